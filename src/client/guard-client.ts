import { AslChannel } from './asl-channel';
import { softwareAttestor, type Attestor } from './attestor';
import { DEFAULT_PRODUCT, type ProductInfo } from './client-statement';
import { createClientAssertion, createDpopProof, generateEcKey, type EcKey } from './crypto';
import type { InstitutionCard } from './card/institution-card';
import { signSubjectToken } from './software-card';
import { fetchTransport, type HttpRequest, type HttpResponse, type HttpTransport } from './transport';
import { CLIENT_ASSERTION_TYPE_JWT as JWT_BEARER, GRANT_REFRESH_TOKEN, GRANT_TOKEN_EXCHANGE as TOKEN_EXCHANGE, TOKEN_TYPE_JWT } from '../common/oauth';

/** Discovery data is cached about a day. */
const DISCOVERY_TTL_MS = 24 * 3600 * 1000;

export interface Discovery {
  /** ETags of the two documents, for revalidation with If-None-Match. */
  etags?: { resource?: string; authorizationServer?: string };
  resource: { resource: string; authorization_servers: string[]; [k: string]: unknown };
  authorizationServer: {
    issuer: string;
    token_endpoint: string;
    nonce_endpoint: string;
    registration_endpoint: string;
    revocation_endpoint: string;
    jwks_uri: string;
    [k: string]: unknown;
  };
  fetchedAt: number;
}

export interface TokenSet {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
  /** Seconds since the epoch (client clock) when the access token expires. */
  expiresAt: number;
  scope: string;
  /** The full token response. */
  raw: Record<string, unknown>;
}

/** A guard answered with an error object. */
export class GuardClientError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    const b = body as { error?: string; error_description?: string } | undefined;
    super(`guard answered ${status}${b?.error ? ` ${b.error}` : ''}${b?.error_description ? `: ${b.error_description}` : ''}`);
  }
  get error(): string | undefined {
    return (this.body as { error?: string } | undefined)?.error;
  }
}

export interface GuardClientOptions {
  /** The resource server's public origin (PUBLIC_URL); discovery starts there. */
  server: string;
  transport?: HttpTransport;
  /** The persistent client instance key; generated when absent. */
  clientKey?: EcKey;
  /** A client_id from an earlier registration with this guard (with its clientKey). */
  clientId?: string;
  clientName?: string;
  product?: ProductInfo;
  /** Retries on 429 and 5xx, with exponential backoff and jitter (default 3). */
  retries?: number;
  /** Base delay of the backoff in ms (default 200). */
  backoffMs?: number;
  /** Seconds since the epoch (tests with a moved server clock pass the same clock here). */
  now?: () => number;
  /** How the client attests (default: the software posture). */
  attestor?: Attestor;
  /** A session restored from a key store. */
  tokens?: TokenSet;
  dpopKey?: EcKey;
  discovery?: Discovery;
  /** Called after registration, login, refresh and revocation (the CLI persists its key store here). */
  onChange?: () => void | Promise<void>;
  /** Upper bound of one backoff wait in ms (default 30 000). */
  maxBackoffMs?: number;
  /**
   * Resource requests through the additional security layer
   * (docs/requirements.md#additional-security-layer-asl): true always, false never, unset when
   * discovery says `svc_asl_use: required`.
   */
  asl?: boolean;
  /** ASL data frames for a production (PU) server: environment byte 1 instead of 0. */
  aslProduction?: boolean;
}

/**
 * The client side of the access guard: discovery, registration, nonce, subject
 * token from a software card, client assertion with client statement, DPoP proofs, token exchange,
 * refresh and revocation. Stateless about storage: the reference CLI persists clientKey, clientId
 * and tokens around it.
 */
export class GuardClient {
  clientId?: string;
  clientKey?: EcKey;
  /** Session-only DPoP key, replaced at every token exchange. */
  dpopKey?: EcKey;
  tokens?: TokenSet;
  private discovery?: Discovery;
  /** The refresh in flight: concurrent callers share it. */
  private refreshing?: Promise<TokenSet>;
  private readonly transport: HttpTransport;
  private readonly now: () => number;
  private readonly attestor: Attestor;
  private asl?: AslChannel;

  constructor(private readonly opts: GuardClientOptions) {
    this.transport = opts.transport ?? fetchTransport();
    this.clientId = opts.clientId;
    this.clientKey = opts.clientKey;
    this.now = opts.now ?? (() => Math.floor(Date.now() / 1000));
    this.attestor = opts.attestor ?? softwareAttestor(opts.product ?? DEFAULT_PRODUCT);
    this.tokens = opts.tokens;
    this.dpopKey = opts.dpopKey;
    this.discovery = opts.discovery;
  }

  /** The cached discovery documents (to persist them). */
  get discoveryCache(): Discovery | undefined {
    return this.discovery;
  }

  private async changed(): Promise<void> {
    await this.opts.onChange?.();
  }

  /**
   * RFC 9728 then RFC 8414 document, cached for a day, then revalidated with If-None-Match (a 304
   * keeps the cached copy); `force` re-reads them without validators (after a 404).
   */
  async discover(force = false): Promise<Discovery> {
    const cached = this.discovery;
    if (!force && cached && Date.now() - cached.fetchedAt < DISCOVERY_TTL_MS) return cached;
    const origin = this.opts.server.replace(/\/+$/, '');
    const get = async (url: string, etag: string | undefined, old: unknown) => {
      const res = await this.withRetry(() => this.transport({ method: 'GET', url, headers: { accept: 'application/json', ...(etag && !force ? { 'if-none-match': etag } : {}) } }));
      if (res.status === 304 && old) return { body: old, etag };
      return { body: res.json, etag: res.headers.etag };
    };
    const pr = await get(`${origin}/.well-known/oauth-protected-resource`, cached?.etags?.resource, cached?.resource);
    const resource = pr.body as Discovery['resource'];
    const issuer = resource?.authorization_servers?.[0];
    if (typeof issuer !== 'string') throw new Error('protected-resource document names no authorization server');
    const sameIssuer = cached?.authorizationServer.issuer === issuer;
    const as = await get(`${issuer}/.well-known/oauth-authorization-server`, sameIssuer ? cached?.etags?.authorizationServer : undefined, sameIssuer ? cached?.authorizationServer : undefined);
    this.discovery = { resource, authorizationServer: as.body as Discovery['authorizationServer'], fetchedAt: Date.now(), etags: { resource: pr.etag, authorizationServer: as.etag } };
    await this.changed();
    return this.discovery;
  }

  /**
   * Dynamic client registration with the attestor's members; a 202 (TPM credential activation) is
   * answered at `{registration_endpoint}/verify`.
   */
  async register(): Promise<Record<string, unknown>> {
    const d = await this.discover();
    this.clientKey ??= await generateEcKey();
    const key = this.clientKey;
    const json = { 'content-type': 'application/json', accept: 'application/json' };
    let body = (await this.json({
      method: 'POST',
      url: d.authorizationServer.registration_endpoint,
      headers: json,
      body: JSON.stringify({
        client_name: this.opts.clientName ?? 'terminus-client',
        token_endpoint_auth_method: 'private_key_jwt',
        grant_types: [TOKEN_EXCHANGE, GRANT_REFRESH_TOKEN],
        jwks: { keys: [{ ...key.publicJwk, use: 'sig', alg: 'ES256', kid: key.jkt }] },
        ...(await this.attestor.registrationMembers(key)),
      }),
    })) as Record<string, unknown>;
    if (body.status === 'pending_verification' && typeof body.transaction_id === 'string') {
      const answer = await this.attestor.answerChallenge(body);
      body = (await this.json({ method: 'POST', url: `${d.authorizationServer.registration_endpoint}/verify`, headers: json, body: JSON.stringify(answer) })) as Record<string, unknown>;
    }
    this.clientId = (body as { client_id: string }).client_id;
    await this.changed();
    return body;
  }

  async fetchNonce(): Promise<string> {
    const d = await this.discover();
    const body = (await this.json({ method: 'GET', url: d.authorizationServer.nonce_endpoint, headers: { accept: 'application/json' } })) as { nonce: string };
    return body.nonce;
  }

  /**
   * A usable access token: the current one while it has `minValiditySec` left, else a refresh,
   * else (refresh refused or session over) a new token exchange with fresh attestation (ZETA UC06 row 14).
   */
  async ensureAccessToken(card: InstitutionCard | (() => Promise<InstitutionCard>), minValiditySec = 10): Promise<string> {
    if (this.tokens && this.tokens.expiresAt - this.now() > minValiditySec) return this.tokens.accessToken;
    this.refreshing ??= this.renew(card).finally(() => {
      this.refreshing = undefined;
    });
    return (await this.refreshing).accessToken;
  }

  /** Refresh, else (refused or no session) a new token exchange; one at a time per client. */
  private async renew(card: InstitutionCard | (() => Promise<InstitutionCard>)): Promise<TokenSet> {
    if (this.tokens && this.dpopKey) {
      try {
        return await this.refresh();
      } catch (err) {
        if (!(err instanceof GuardClientError) || err.status >= 500 || err.status === 429) throw err;
      }
    }
    // The card is opened only now: a refresh needs none (a Konnektor is not asked per refresh).
    return this.login(typeof card === 'function' ? await card() : card);
  }

  /**
   * Registration (first time), a fresh nonce and DPoP key, then the token exchange with attestation.
   * A 401 (the guard does not know the client, or the assertion was refused) is answered once with a
   * fresh registration and exchange (gemSpec_ZETA A_27007); 400 and 403 end it.
   */
  async login(card: InstitutionCard, o: { scope?: string } = {}): Promise<TokenSet> {
    try {
      return await this.loginOnce(card, o);
    } catch (err) {
      if (!(err instanceof GuardClientError) || err.status !== 401) throw err;
      this.clientId = undefined;
      return this.loginOnce(card, o);
    }
  }

  private async loginOnce(card: InstitutionCard, o: { scope?: string }): Promise<TokenSet> {
    if (!this.clientId || !this.clientKey) await this.register();
    const admission = card.admission;
    if (!admission) throw new Error('the card certificate has no admission extension');
    return this.withRetry(async () => {
      const d = await this.discover();
      const tokenEndpoint = d.authorizationServer.token_endpoint;
      const nonce = await this.fetchNonce();
      const dpopKey = await generateEcKey();
      const clientId = this.clientId!;
      const clientKey = this.clientKey!;
      const params = new URLSearchParams({
        grant_type: TOKEN_EXCHANGE,
        client_assertion_type: JWT_BEARER,
        client_assertion: await createClientAssertion(clientKey, {
          clientId,
          audience: tokenEndpoint,
          now: this.now(),
          clientStatement: await this.attestor.clientStatement({ clientId, clientKey, nonce, now: this.now() }),
        }),
        subject_token_type: TOKEN_TYPE_JWT,
        subject_token: await signSubjectToken(card, { clientId, telematikId: admission.telematikId, tokenEndpoint, nonce, clientJkt: clientKey.jkt, dpopJkt: dpopKey.jkt, now: this.now() }),
        resource: d.resource.resource,
      });
      if (o.scope) params.set('scope', o.scope);
      const request: HttpRequest = {
        method: 'POST',
        url: tokenEndpoint,
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
          dpop: await createDpopProof(dpopKey, { method: 'POST', url: tokenEndpoint, nonce, iat: this.now() }),
        },
        body: params.toString(),
      };
      const res = await this.transport(request);
      if (res.status === 200) {
        this.dpopKey = dpopKey;
        this.tokens = tokenSet(res.json, this.now());
      }
      return res;
    }).then(async () => {
      await this.changed();
      return this.tokens!;
    });
  }

  /** Refresh: assertion without statement, proof with the session's DPoP key; rotates the refresh token. */
  async refresh(): Promise<TokenSet> {
    if (!this.tokens || !this.dpopKey || !this.clientId || !this.clientKey) throw new Error('no session to refresh');
    const refreshToken = this.tokens.refreshToken;
    await this.withRetry(async () => {
      const d = await this.discover();
      const tokenEndpoint = d.authorizationServer.token_endpoint;
      const res = await this.transport({
        method: 'POST',
        url: tokenEndpoint,
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
          dpop: await createDpopProof(this.dpopKey!, { method: 'POST', url: tokenEndpoint, iat: this.now() }),
        },
        body: new URLSearchParams({
          grant_type: GRANT_REFRESH_TOKEN,
          refresh_token: refreshToken,
          client_assertion_type: JWT_BEARER,
          client_assertion: await createClientAssertion(this.clientKey!, { clientId: this.clientId!, audience: tokenEndpoint, now: this.now() }),
        }).toString(),
      });
      if (res.status === 200) this.tokens = tokenSet(res.json, this.now());
      return res;
    });
    await this.changed();
    return this.tokens;
  }

  /** RFC 7009 revocation of the refresh token (the whole session). */
  async revoke(): Promise<void> {
    if (!this.tokens || !this.dpopKey || !this.clientId || !this.clientKey) return;
    const d = await this.discover();
    const url = d.authorizationServer.revocation_endpoint;
    await this.withRetry(async () =>
      this.transport({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await createDpopProof(this.dpopKey!, { method: 'POST', url, iat: this.now() }) },
        body: new URLSearchParams({
          token: this.tokens!.refreshToken,
          token_type_hint: 'refresh_token',
          client_assertion_type: JWT_BEARER,
          client_assertion: await createClientAssertion(this.clientKey!, { clientId: this.clientId!, audience: d.authorizationServer.token_endpoint, now: this.now() }),
        }).toString(),
      }),
    );
    this.tokens = undefined;
    await this.changed();
  }

  /** A DPoP proof with the session key for a resource request (`ath` of the current access token). */
  async proof(method: string, url: string, accessToken = this.tokens?.accessToken): Promise<string> {
    if (!this.dpopKey) throw new Error('no DPoP key: log in first');
    return createDpopProof(this.dpopKey, { method, url, accessToken, iat: this.now() });
  }

  /**
   * An authenticated resource request: `Authorization: DPoP <at>` plus a fresh proof; through the
   * additional security layer when asked to or when the server requires it.
   */
  async request(method: string, url: string, init: { headers?: Record<string, string>; body?: string } = {}): Promise<HttpResponse> {
    if (!this.tokens) throw new Error('not logged in');
    const send = this.usesAsl() ? (r: HttpRequest) => this.aslChannel().send(r) : this.transport;
    return send({
      method,
      url,
      headers: { ...init.headers, authorization: `DPoP ${this.tokens.accessToken}`, dpop: await this.proof(method, url) },
      body: init.body,
    });
  }

  /** Whether resource requests go through ASL (asked for, or the server requires it). */
  usesAsl(): boolean {
    return this.opts.asl ?? this.discovery?.resource.svc_asl_use === 'required';
  }

  /** A signed resource request sent through the ASL tunnel (its answer decrypted). */
  sendThroughAsl(req: HttpRequest): Promise<HttpResponse> {
    return this.aslChannel().send(req);
  }

  private aslChannel(): AslChannel {
    this.asl ??= new AslChannel({ origin: new URL(this.opts.server).origin, transport: this.transport, env: this.opts.aslProduction ? 1 : 0, now: this.now });
    return this.asl;
  }

  private async json(req: HttpRequest): Promise<unknown> {
    const res = await this.withRetry(() => this.transport(req));
    return res.json;
  }

  /**
   * Retries 429, 502, 503 and 504 with exponential backoff and full jitter, waiting what Retry-After
   * asks for when it is given (each wait bounded by maxBackoffMs); 404 re-runs discovery once.
   */
  private async withRetry(send: () => Promise<HttpResponse>): Promise<HttpResponse> {
    const retries = this.opts.retries ?? 3;
    let rediscovered = false;
    for (let attempt = 0; ; attempt++) {
      const res = await send();
      if (res.status < 400) return res;
      if (res.status === 404 && !rediscovered && this.discovery) {
        rediscovered = true;
        await this.discover(true);
        continue;
      }
      if (!RETRYABLE.includes(res.status) || attempt >= retries) throw new GuardClientError(res.status, res.json ?? res.text);
      await sleep(backoffDelay(attempt, res.headers['retry-after'], this.opts.backoffMs ?? 200, this.opts.maxBackoffMs ?? 30_000));
    }
  }
}

/** Statuses worth another try: rate limited, or a gateway or server that is briefly away. */
export const RETRYABLE = [429, 502, 503, 504];

/** Full jitter (random in [0, base·2^attempt]) unless Retry-After (seconds or an HTTP date) names the wait. */
export function backoffDelay(attempt: number, retryAfter: string | undefined, baseMs: number, maxMs: number): number {
  if (retryAfter !== undefined) {
    const seconds = /^\d+$/.test(retryAfter.trim()) ? Number(retryAfter) * 1000 : Date.parse(retryAfter) - Date.now();
    if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds, maxMs);
  }
  return Math.random() * Math.min(maxMs, baseMs * 2 ** attempt);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function tokenSet(body: unknown, now: number): TokenSet {
  const b = body as { access_token: string; refresh_token: string; expires_in: number; scope: string };
  return { accessToken: b.access_token, refreshToken: b.refresh_token, expiresIn: b.expires_in, expiresAt: now + b.expires_in, scope: b.scope, raw: body as Record<string, unknown> };
}
