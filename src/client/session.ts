import crypto from 'node:crypto';
import type { AttestationHelperClient } from '../attestation-helper';
import { helperAttestor, softwareAttestor, type Attestor } from './attestor';
import { ecKeyFrom, generateEcKey, type EcKey } from './crypto';
import { backoffDelay, GuardClient, RETRYABLE, type Discovery, type TokenSet } from './guard-client';
import { KeyStore, type ServerState } from './key-store';
import { ClientInputError, readPem } from './pem-files';
import type { InstitutionCard } from './card/institution-card';
import { openCard, type CardChoice } from './card/open-card';
import { serverFetch, type ServerTrust } from './server-tls';
import { fetchTransport, type HttpTransport } from './transport';
import { unreachable } from './unreachable';

/** The attestation helper a TPM client logs in through (address and mutual-TLS files). */
export interface HelperSettings {
  address: string;
  ca: string;
  cert: string;
  key: string;
}

export interface CreateClientOptions extends CardChoice {
  /** The repository's public origin (its PUBLIC_URL). */
  server: string;
  /** Key store folder (default TERMINUS_CLIENT_HOME or ~/.terminus-client) and its password (default TERMINUS_CLIENT_PASSWORD). */
  home?: string;
  password?: string;
  /** TPM attestation through this helper; default the software posture. */
  helper?: HelperSettings;
  transport?: HttpTransport;
  /**
   * How the server's TLS is trusted (server-tls.ts): a CA instead of the public store, and
   * whether a stapled OCSP answer is required. Used when no `transport` is given.
   */
  trust?: ServerTrust;
  retries?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  /** A key store the caller holds open (the CLI, for the whole command); else opened per write. */
  store?: KeyStore;
  /** Resource requests through ASL: true always, unset when discovery requires it (GuardClientOptions.asl). */
  asl?: boolean;
  aslProduction?: boolean;
}

/** Refresh this long before the access token expires. */
const REFRESH_AHEAD_SEC = 30;

/**
 * After `logout` the session stays logged out until `login()`: the card is not used by itself to
 * start a new one (a logout ends the consent to act with the card, not just the tokens).
 */
export class LoggedOut extends Error {
  constructor(readonly origin: string) {
    super(`logged out of ${origin}: log in again first (terminus-client login, or login() of the library session)`);
  }
}

/**
 * A session with one repository: registration, token exchange and refresh through the guard, the
 * state kept in the encrypted key store, and a `fetch` that signs every request (`Authorization:
 * DPoP`, a fresh proof with `ath`). A 401 or 403 from the enforcement point is answered by a
 * refresh, then by one full token exchange; 429/502/503/504 are retried with backoff.
 */
export class ClientSession {
  private constructor(
    readonly origin: string,
    readonly guard: GuardClient,
    private readonly o: CreateClientOptions,
    private readonly attestor: Attestor,
    /** The network fetch towards the server: its TLS checked as `trust` says, connections kept alive (one pool for the guard and the resources). */
    private readonly serverFetch: typeof fetch,
    private readonly helperClient?: AttestationHelperClient,
  ) {}

  private loadedCard?: Promise<InstitutionCard>;
  /** Set by `logout` (and kept in the key store) until the next `login`. */
  private loggedOut = false;

  /** The institution card, read when a token exchange first needs it (status and logout do not). */
  private card(): Promise<InstitutionCard> {
    this.loadedCard ??= openCard(this.o);
    this.loadedCard.catch(() => {
      this.loadedCard = undefined; // a card that could not be opened is tried again next time
    });
    return this.loadedCard;
  }

  /** Another guard session of the same registered client (own tokens and DPoP key; not persisted): for load tests. */
  async parallelSession(): Promise<{ guard: GuardClient; login: () => Promise<TokenSet> }> {
    if (!this.guard.clientId) await this.login();
    const guard = new GuardClient({ server: this.origin, transport: this.o.transport ?? fetchTransport({ fetch: this.serverFetch }), clientKey: this.guard.clientKey, clientId: this.guard.clientId, attestor: this.attestor, discovery: this.guard.discoveryCache, retries: 0 });
    return { guard, login: async () => guard.login(await this.card()) };
  }

  static async open(o: CreateClientOptions): Promise<ClientSession> {
    const origin = new URL(o.server).origin;
    const store = o.store ?? (await KeyStore.open({ home: o.home, password: o.password }));
    try {
      let clientKey: EcKey;
      if (store.data.clientKey) clientKey = await ecKeyFrom(crypto.createPrivateKey({ key: store.data.clientKey as crypto.JsonWebKey, format: 'jwk' }));
      else {
        clientKey = await generateEcKey();
        store.data.clientKey = clientKey.privateKey.export({ format: 'jwk' }) as ServerState['dpopKey'];
        store.save();
      }
      const state = store.server(origin);
      const helper = o.helper;
      // gRPC is loaded only by clients that attest through the helper.
      const helperClient = helper ? new (await import('../attestation-helper')).AttestationHelperClient(helper.address, helperFiles(helper)) : undefined;
      const attestor: Attestor = helperClient ? helperAttestor(helperClient) : softwareAttestor();
      // A registration belongs to its attestation type: switching types registers anew.
      const sameType = state.attestationType === undefined || state.attestationType === attestor.attestationType;
      let session: ClientSession | undefined;
      const network = serverFetch(o.trust);
      const guard = new GuardClient({
        server: origin,
        transport: o.transport ?? fetchTransport({ fetch: network }),
        clientKey,
        clientId: sameType ? state.clientId : undefined,
        tokens: sameType ? await tokensOf(state) : undefined,
        dpopKey: sameType && state.dpopKey ? await ecKeyFrom(crypto.createPrivateKey({ key: state.dpopKey as crypto.JsonWebKey, format: 'jwk' })) : undefined,
        discovery: state.discovery as Discovery | undefined,
        attestor,
        retries: o.retries,
        asl: o.asl,
        aslProduction: o.aslProduction,
        backoffMs: o.backoffMs,
        maxBackoffMs: o.maxBackoffMs,
        onChange: () => session?.persist(),
      });
      session = new ClientSession(origin, guard, o, attestor, network, helperClient);
      session.loggedOut = state.loggedOut === true;
      return session;
    } finally {
      if (!o.store) store.close();
    }
  }

  /** Writes the session into the key store: the held one, or opened (and locked) for this write. */
  async persist(): Promise<void> {
    const store = this.o.store ?? (await KeyStore.open({ home: this.o.home, password: this.o.password }));
    try {
      const g = this.guard;
      const state = store.server(this.origin);
      state.clientId = g.clientId;
      state.attestationType = this.helperClient ? 'tpm' : 'software';
      state.refreshToken = g.tokens?.refreshToken;
      state.accessToken = g.tokens?.accessToken;
      state.accessExpiresAt = g.tokens?.expiresAt;
      state.scope = g.tokens?.scope;
      state.dpopKey = g.tokens && g.dpopKey ? (g.dpopKey.privateKey.export({ format: 'jwk' }) as ServerState['dpopKey']) : undefined;
      state.discovery = g.discoveryCache as ServerState['discovery'];
      state.loggedOut = this.loggedOut || undefined;
      store.data.lastServer = this.origin;
      store.save();
    } finally {
      if (!this.o.store) store.close();
    }
  }

  /** Registration (first time per guard) and token exchange; ends a logout. */
  async login(o: { scope?: string } = {}): Promise<TokenSet> {
    const tokens = await this.guard.login(await this.card(), o);
    if (this.loggedOut) {
      this.loggedOut = false;
      await this.persist();
    }
    return tokens;
  }

  /** A valid access token: refreshed ahead of expiry, concurrent callers share one refresh. */
  async accessToken(): Promise<string> {
    if (this.loggedOut) throw new LoggedOut(this.origin);
    return this.guard.ensureAccessToken(() => this.card(), REFRESH_AHEAD_SEC);
  }

  /** Revokes the session at the guard and forgets its tokens and DPoP key; no new session until `login`. */
  async logout(): Promise<void> {
    try {
      await this.guard.revoke();
    } finally {
      this.guard.tokens = undefined;
      this.guard.dpopKey = undefined;
      this.loggedOut = true;
      await this.persist();
    }
  }

  /**
   * fetch with `Authorization: DPoP <token>` and a fresh proof on every call: what any fetch-based
   * FHIR client can use.
   */
  fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const body = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
    const retries = this.o.retries ?? 3;
    let renewals = 0;
    for (let attempt = 0; ; attempt++) {
      const headers = new Headers(request.headers);
      await this.sign(request.url, request.method, headers);
      const res = this.guard.usesAsl()
        ? await this.throughAsl(request, headers, body)
        : await this.serverFetch(request.url, { method: request.method, headers, body, redirect: request.redirect, signal: init?.signal ?? undefined }).catch((err: unknown) => {
            throw unreachable(request.url, err);
          });
      if ((res.status === 401 || res.status === 403) && renewals < 2) {
        await res.body?.cancel();
        // First a refresh; if the enforcement point still refuses, one full token exchange.
        if (renewals++ === 0) await this.renew();
        else await this.login();
        continue;
      }
      if (RETRYABLE.includes(res.status) && attempt < retries) {
        await res.body?.cancel();
        await new Promise((r) => setTimeout(r, backoffDelay(attempt, res.headers.get('retry-after') ?? undefined, this.o.backoffMs ?? 200, this.o.maxBackoffMs ?? 30_000)));
        continue;
      }
      return res;
    }
  };

  /** The signed request through the additional security layer, its inner answer as a fetch Response. */
  private async throughAsl(request: Request, headers: Headers, body: Buffer | undefined): Promise<Response> {
    const flat: Record<string, string> = {};
    headers.forEach((v, k) => {
      flat[k] = v;
    });
    const res = await this.guard.sendThroughAsl({ method: request.method, url: request.url, headers: flat, body });
    const nullBody = [204, 304].includes(res.status) || request.method === 'HEAD';
    return new Response(nullBody ? null : (res.bytes ?? res.text), { status: res.status, headers: res.headers });
  }

  /** fhir-kit-client's `requestSigner(url, requestInit)`: signs the request it is about to send. */
  requestSigner = async (url: string, init: { method?: string; headers?: unknown }): Promise<void> => {
    const headers = init.headers instanceof Headers ? init.headers : new Headers(init.headers as Record<string, string> | undefined);
    await this.sign(url, init.method ?? 'GET', headers);
    init.headers = headers;
  };

  private async sign(url: string, method: string, headers: Headers): Promise<void> {
    const at = await this.accessToken();
    headers.set('authorization', `DPoP ${at}`);
    headers.set('dpop', await this.guard.proof(method, url, at));
  }

  private async renew(): Promise<void> {
    if (this.guard.tokens) this.guard.tokens = { ...this.guard.tokens, expiresAt: 0 };
    await this.accessToken();
  }

  /** What the key store knows about this session. */
  status(): Record<string, unknown> {
    const t = this.guard.tokens;
    return {
      server: this.origin,
      client_id: this.guard.clientId ?? null,
      attestation: this.helperClient ? 'tpm' : 'software',
      logged_in: Boolean(t),
      ...(this.loggedOut ? { logged_out: true } : {}),
      scope: t?.scope ?? null,
      access_token_expires_at: t ? new Date(t.expiresAt * 1000).toISOString() : null,
    };
  }

  close(): void {
    this.helperClient?.close();
  }
}

async function tokensOf(s: ServerState): Promise<TokenSet | undefined> {
  if (!s.refreshToken || !s.accessToken || s.accessExpiresAt === undefined) return undefined;
  return { accessToken: s.accessToken, refreshToken: s.refreshToken, expiresAt: s.accessExpiresAt, expiresIn: 0, scope: s.scope ?? '', raw: {} };
}

/** The helper's mutual-TLS files, each checked to be PEM of its kind. */
function helperFiles(h: HelperSettings): { ca: Buffer; cert: Buffer; key: Buffer } {
  const pem = (value: string, option: string, what: string, kind: 'certificate' | 'private key') => Buffer.from(readPem(value, { option, what, kind }).text);
  return {
    ca: pem(h.ca, 'helper.ca', "the helper's CA certificate", 'certificate'),
    cert: pem(h.cert, 'helper.cert', 'the client certificate for the helper', 'certificate'),
    key: pem(h.key, 'helper.key', 'the key of the client certificate for the helper', 'private key'),
  };
}

/**
 * `createClient({server, card, key, home?, password?})` (docs/requirements.md#reference-client-and-sdk):
 * a session whose fetch logs in by itself on first use. Its inputs are checked now, not at the first request: the server URL, the
 * card and key (files exist, PEM of the right kind, the key belongs to the certificate), the helper's
 * files, and the key store password. A `ClientInputError` names the option and the file.
 */
export async function createClient(o: CreateClientOptions): Promise<ClientSession> {
  checkServer(o.server);
  await openCard(o);
  if (o.helper) helperFiles(o.helper);
  if (!o.store && !(o.password ?? process.env.TERMINUS_CLIENT_PASSWORD)) {
    throw new ClientInputError('password', 'the key store password is not set: pass the password option or set TERMINUS_CLIENT_PASSWORD (it encrypts the key store)');
  }
  return ClientSession.open(o);
}

function checkServer(server: string): void {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new ClientInputError('server', `server ${JSON.stringify(server)} is not a URL: the repository's origin (its PUBLIC_URL), for example http://localhost:8080`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ClientInputError('server', `server ${server} is not an http(s) URL`);
}
