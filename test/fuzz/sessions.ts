/**
 * Valid sessions of every kind for the fuzzer, made once per target through the server's own
 * front door and renewed before their access tokens expire (300 s by the default policy):
 *
 * - requestor: an institution card's token exchange (ZETA token exchange with a SMC-B);
 * - owner: the same for a Telematik-ID listed in REPOSITORY_OWNERS (`system/*.cruds`);
 * - patient: the authorization-code flow with PAR and PKCE through a real OpenID provider
 *   (node-oidc-provider, its own process), `patient/` scopes;
 * - workload: a workload token of a trusted issuer (a loopback HTTP server publishing its JWKS)
 *   exchanged for an access token.
 *
 * Every request then gets a fresh DPoP proof (RFC 9449 §4.2) with its own `jti`, `htm`, `htu` and
 * the token's `ath`, signed with node:crypto directly: the header and `ath` are encoded once per
 * session, so a proof costs one ES256 signature.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClientAssertion, createDpopProof, generateEcKey, signCompactJws, type EcKey } from '../../src/client/crypto';
import { softwareClientStatement } from '../../src/client/client-statement';
import type { AppContext } from '../../src/context';
import { endpoints } from '../../src/guard/settings';
import { APP_REDIRECT, pkce, providerEntry, providersFile, serverKeys, startIdp, type Idp } from '../guard/helpers/code-flow';
import { getTestToken } from '../guard/helpers/get-token';
import { JWT_BEARER, TOKEN_EXCHANGE, TOKEN_TYPE_JWT } from '../guard/helpers/harness';
import { PATIENT_KVNR, type SessionKind } from './cases';

/** The Telematik-IDs of the two institutions (the patient logs in as PATIENT_KVNR). */
const REQUESTOR_ID = '1-FUZZ-PRAXIS';
const OWNER_ID = '1-FUZZ-OWNER';
const WORKLOAD_SUB = 'system:serviceaccount:fuzz:sync';
/** Every `patient/` scope the default policy grants patients. */
const PATIENT_SCOPES = 'openid patient/Slot.rs patient/Schedule.rs patient/HealthcareService.rs patient/Practitioner.rs patient/CodeSystem.rs patient/Appointment.crus patient/Patient.r';
/** Within the policy's requestor scopes (a workload gets no more without `scopes.workload`), a different set. */
const WORKLOAD_SCOPES = ['system/Slot.rs', 'system/Schedule.rs', 'system/Appointment.crus', 'system/Patient.cr', 'system/Subscription.cruds'];
/** Access tokens live 300 s (policies/default.json): sessions are made again after 200 s. */
const RENEW_AFTER_MS = 200_000;

export interface Session {
  kind: SessionKind;
  accessToken: string;
  /** base64url of the proof's protected header (typ, alg, jwk), the same for every proof. */
  proofHeader: string;
  /** `ath`: base64url(SHA-256(access token)). */
  ath: string;
  key: crypto.KeyObject;
}

export interface ProofOptions {
  /** Claims added or replaced (a wrong htm, htu or ath, an old iat). */
  claims?: Record<string, unknown>;
  /** Sign with this key instead (a proof by another key than the token's `cnf.jkt`). */
  key?: crypto.KeyObject;
}

let jtis = 0;
const jtiPrefix = crypto.randomBytes(6).toString('base64url');

/** A DPoP proof for `method htu` with the session's key and `ath`. */
export function proofFor(s: Session, method: string, htu: string, o: ProofOptions = {}): string {
  const claims = { jti: `${jtiPrefix}.${(jtis++).toString(36)}`, htm: method, htu, iat: Math.floor(Date.now() / 1000), ath: s.ath, ...o.claims };
  const input = `${s.proofHeader}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  const signature = crypto.sign('sha256', Buffer.from(input), { key: o.key ?? s.key, dsaEncoding: 'ieee-p1363' });
  return `${input}.${signature.toString('base64url')}`;
}

/** `ath` (RFC 9449 §4.2): base64url(SHA-256(ASCII access token)). */
export function athOf(accessToken: string): string {
  return crypto.createHash('sha256').update(accessToken, 'ascii').digest('base64url');
}

function session(kind: SessionKind, accessToken: string, key: EcKey): Session {
  return {
    kind,
    accessToken,
    proofHeader: Buffer.from(JSON.stringify({ typ: 'dpop+jwt', alg: 'ES256', jwk: key.publicJwk })).toString('base64url'),
    ath: athOf(accessToken),
    key: key.privateKey,
  };
}

/**
 * The parties outside the server that the sessions need: a workload issuer and the patients'
 * OpenID provider, and the server's configuration naming them (`env`). Made before the server
 * starts; `close` stops both and removes their files.
 */
export interface Identities {
  env: Record<string, string>;
  /** Logs in every kind at the server listening on `serverUrl` (PUBLIC_URL is `ctx.config.publicUrl`). */
  open(serverUrl: string, ctx: AppContext): Promise<Sessions>;
  close(): Promise<void>;
}

export async function prepareIdentities(publicUrl: string): Promise<Identities> {
  const keys = serverKeys();
  let issuer: WorkloadIssuer | undefined;
  let idp: Idp | undefined;
  try {
    issuer = await WorkloadIssuer.start();
    idp = await startIdp({ clientId: 'terminus', redirectUri: endpoints(publicUrl).redirection, keys });
    const workloadFile = `${keys.dir}/workload-issuers.json`;
    fs.writeFileSync(workloadFile, JSON.stringify([{ issuer: issuer.url, subjects: ['system:serviceaccount:fuzz:*'], scopes: WORKLOAD_SCOPES, max_token_age: 600 }]));
    const env = { WORKLOAD_ISSUERS_FILE: workloadFile, OIDC_PROVIDERS_FILE: providersFile(keys, [providerEntry(idp.issuer, 'terminus')]), REPOSITORY_OWNERS: OWNER_ID };
    const theIssuer = issuer;
    const theIdp = idp;
    return {
      env,
      open: async (serverUrl, ctx) => {
        const sessions = new Sessions(() => loginAll(serverUrl, ctx, theIssuer));
        await sessions.renew();
        return sessions;
      },
      close: async () => {
        await Promise.all([theIssuer.stop(), theIdp.close()]);
        fs.rmSync(keys.dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await Promise.all([issuer?.stop(), idp?.close()]);
    fs.rmSync(keys.dir, { recursive: true, force: true });
    throw err;
  }
}

/** The current session of each kind; `tick` starts a renewal in the background when one is due. */
export class Sessions {
  private current?: Record<SessionKind, Session>;
  private madeAt = 0;
  private renewing?: Promise<void>;
  private failed?: Error;
  /** Login rounds (all four kinds) so far. */
  logins = 0;

  constructor(private readonly login: () => Promise<Record<SessionKind, Session>>) {}

  get(kind: SessionKind): Session {
    if (!this.current) throw new Error('no sessions yet');
    return this.current[kind];
  }

  /** Logs in every kind again; the sessions in use stay until the new ones are there. */
  renew(): Promise<void> {
    this.renewing ??= this.login()
      .then((made) => {
        this.current = made;
        this.madeAt = Date.now();
        this.logins++;
      })
      .finally(() => {
        this.renewing = undefined;
      });
    return this.renewing;
  }

  /** Renews in the background when the tokens are older than RENEW_AFTER_MS; a failed renewal fails the next call. */
  tick(): void {
    if (this.failed) throw this.failed;
    if (this.renewing || Date.now() - this.madeAt < RENEW_AFTER_MS) return;
    this.renew().catch((err: unknown) => {
      this.failed = new Error(`renewing the fuzz sessions failed: ${err instanceof Error ? err.message : String(err)}`);
    });
  }
}

async function loginAll(serverUrl: string, ctx: AppContext, issuer: WorkloadIssuer): Promise<Record<SessionKind, Session>> {
  const [requestor, owner, patient, workload] = await Promise.all([
    getTestToken(serverUrl, ctx, { telematikId: REQUESTOR_ID }),
    getTestToken(serverUrl, ctx, { telematikId: OWNER_ID }),
    patientLogin(serverUrl, ctx.config.publicUrl),
    workloadExchange(serverUrl, ctx.config.publicUrl, issuer),
  ]);
  return {
    requestor: session('requestor', requestor.accessToken, requestor.dpopKey),
    owner: session('owner', owner.accessToken, owner.dpopKey),
    patient,
    workload,
  };
}

/** The published URL's path and query at the server actually listening. */
const at = (serverUrl: string, publicUrl: string, url: string) => {
  const u = new URL(url, publicUrl);
  return `${serverUrl}${u.pathname}${u.search}`;
};

async function form(url: string, fields: Record<string, string>, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams(fields).toString() });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A workload token of the issuer exchanged at the token endpoint (RFC 8693, DPoP-bound). */
async function workloadExchange(serverUrl: string, publicUrl: string, issuer: WorkloadIssuer): Promise<Session> {
  const tokenUrl = endpoints(publicUrl).token;
  const dpopKey = await generateEcKey();
  const proof = await createDpopProof(dpopKey, { method: 'POST', url: tokenUrl });
  const res = await form(at(serverUrl, publicUrl, tokenUrl), { grant_type: TOKEN_EXCHANGE, subject_token_type: TOKEN_TYPE_JWT, subject_token: issuer.token(tokenUrl) }, { dpop: proof });
  if (res.status !== 200) throw new Error(`workload token exchange: ${res.status} ${JSON.stringify(res.body)}`);
  return session('workload', res.body.access_token as string, dpopKey);
}

/**
 * A patient app's login: registration, PAR with PKCE, the browser through /authorize and the
 * IdP's development login and consent forms back to the app's redirect URI, then the code
 * redeemed with a client statement and a DPoP proof carrying the server's nonce.
 */
async function patientLogin(serverUrl: string, publicUrl: string): Promise<Session> {
  const urls = endpoints(publicUrl);
  const clientKey = await generateEcKey();
  const dpopKey = await generateEcKey();
  const registered = await fetch(at(serverUrl, publicUrl, urls.register), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'fuzz patient app', token_endpoint_auth_method: 'private_key_jwt', grant_types: ['authorization_code', 'refresh_token'], redirect_uris: [APP_REDIRECT], jwks: { keys: [{ ...clientKey.publicJwk, use: 'sig' }] } }),
  });
  const clientId = ((await registered.json()) as { client_id?: string }).client_id;
  if (registered.status !== 201 || !clientId) throw new Error(`patient app registration: ${registered.status}`);
  const now = () => Math.floor(Date.now() / 1000);
  const { verifier, challenge } = pkce();
  const pushed = await form(at(serverUrl, publicUrl, urls.par), {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: APP_REDIRECT,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    scope: PATIENT_SCOPES,
    state: 'fuzz',
    client_assertion_type: JWT_BEARER,
    client_assertion: await createClientAssertion(clientKey, { clientId, audience: publicUrl, now: now() }),
  });
  if (pushed.status !== 201) throw new Error(`PAR: ${pushed.status} ${JSON.stringify(pushed.body)}`);
  const landed = await browse(serverUrl, publicUrl, `${urls.authorize}?client_id=${encodeURIComponent(clientId)}&request_uri=${encodeURIComponent(pushed.body.request_uri as string)}`, PATIENT_KVNR);
  const code = landed.searchParams.get('code');
  if (!code) throw new Error(`no code at the app's redirect URI: ${landed.href}`);
  const nonce = ((await (await fetch(at(serverUrl, publicUrl, urls.nonce))).json()) as { nonce: string }).nonce;
  const statement = softwareClientStatement({ clientId, clientKey, nonce, now: now(), platform: 'android', posture: { os: 'Android' } });
  const redeemed = await form(
    at(serverUrl, publicUrl, urls.token),
    {
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      redirect_uri: APP_REDIRECT,
      client_assertion_type: JWT_BEARER,
      client_assertion: await createClientAssertion(clientKey, { clientId, audience: urls.token, now: now(), clientStatement: statement }),
    },
    { dpop: await createDpopProof(dpopKey, { method: 'POST', url: urls.token, nonce, iat: now() }) },
  );
  if (redeemed.status !== 200) throw new Error(`code redemption: ${redeemed.status} ${JSON.stringify(redeemed.body)}`);
  return session('patient', redeemed.body.access_token as string, dpopKey);
}

/**
 * A browser from `start` (a URL on PUBLIC_URL, fetched at the server): follows redirects, keeps
 * the IdP's cookies, signs in as `login` and consents, until a redirect leaves both the server and
 * the IdP (the app's redirect URI), which is returned unopened.
 */
async function browse(serverUrl: string, publicUrl: string, start: string, login: string): Promise<URL> {
  const jar = new Map<string, string>();
  const ours = new URL(publicUrl).origin;
  let url = new URL(start);
  let post: string | undefined;
  for (let hop = 0; hop < 20; hop++) {
    const own = url.origin === ours;
    if (!own && !(url.protocol === 'http:' && url.hostname === '127.0.0.1')) return url;
    const res = await fetch(own ? at(serverUrl, publicUrl, url.href) : url, {
      method: post === undefined ? 'GET' : 'POST',
      headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '), ...(post === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }) },
      body: post,
      redirect: 'manual',
    });
    post = undefined;
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      jar.set(pair.slice(0, i), pair.slice(i + 1));
    }
    const html = await res.text();
    if (res.status >= 400) throw new Error(`${url.href}: ${res.status} ${html.slice(0, 300)}`);
    const location = res.headers.get('location');
    if (res.status >= 300 && location) {
      url = new URL(location, url);
      continue;
    }
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1]?.replace(/&amp;/g, '&');
    const prompt = /name="prompt" value="(\w+)"/.exec(html)?.[1];
    if (!action || !prompt) throw new Error(`no form at ${url.href}: ${html.slice(0, 300)}`);
    post = new URLSearchParams(prompt === 'login' ? { prompt, login, password: 'x' } : { prompt }).toString();
    url = new URL(action, url);
  }
  throw new Error('too many redirects');
}

/** A workload issuer on loopback: its OpenID configuration and JWKS, and tokens signed with its key. */
class WorkloadIssuer {
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
    private readonly key: crypto.KeyObject,
    private readonly kid: string,
  ) {}

  static async start(): Promise<WorkloadIssuer> {
    const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const kid = crypto.randomUUID();
    const jwks = JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' }] });
    let url = '';
    const server = http.createServer((req, res) => {
      if (req.url === '/.well-known/openid-configuration') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: url, jwks_uri: `${url}/jwks` }));
      if (req.url === '/jwks') return void res.writeHead(200, { 'content-type': 'application/json' }).end(jwks);
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return new WorkloadIssuer(server, url, privateKey, kid);
  }

  token(audience: string): string {
    const now = Math.floor(Date.now() / 1000);
    return signCompactJws({ alg: 'ES256', kid: this.kid, typ: 'JWT' }, { iss: this.url, sub: WORKLOAD_SUB, aud: audience, iat: now, exp: now + 300, jti: crypto.randomUUID() }, this.key);
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
