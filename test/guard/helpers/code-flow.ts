/**
 * The authorization-code flow's real parts for tests: node-oidc-provider as the upstream IdP (its
 * own process: oidc-provider is ESM only), a provider file for the server, a small browser with a
 * cookie jar that follows redirects and submits the IdP's development login and consent forms, and
 * the app's side (PAR, token request with PKCE, DPoP and client statement).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Express } from 'express';
import request from 'supertest';
import { createClientAssertion, createDpopProof, generateEcKey, type EcKey } from '../../../src/client/crypto';
import { softwareClientStatement } from '../../../src/client/client-statement';
import { JWT_BEARER, type Harness } from './harness';

export const APP_REDIRECT = 'https://app.test/cb/terminus/app';

export interface Idp {
  issuer: string;
  /** The next token response carries an id_token built by the test's rules (see oidc-idp.mjs). */
  tamper(t: { claims?: Record<string, unknown>; foreignSigningKey?: boolean; foreignEncryptionKey?: boolean }): Promise<void>;
  close(): Promise<void>;
}

export interface ServerIdpKeys {
  /** The provider file for OIDC_PROVIDERS_FILE. */
  providersFile: string;
  dir: string;
}

/** Our client at the IdP: private_key_jwt with `signing`, id_tokens encrypted to `encryption` (ECDH-ES, A256GCM). */
export function serverKeys(): { signing: crypto.KeyPairKeyObjectResult; encryption: crypto.KeyPairKeyObjectResult; dir: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-idp-'));
  const signing = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const encryption = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  fs.writeFileSync(path.join(dir, 'client-key.pem'), signing.privateKey.export({ type: 'pkcs8', format: 'pem' }));
  fs.writeFileSync(path.join(dir, 'id-token-key.pem'), encryption.privateKey.export({ type: 'pkcs8', format: 'pem' }));
  return { signing, encryption, dir };
}

/** RFC 7638 thumbprint of an EC public key: the `kid` the server's assertions carry. */
function ecThumbprint(key: crypto.KeyObject): string {
  const j = key.export({ format: 'jwk' });
  return crypto.createHash('sha256').update(JSON.stringify({ crv: j.crv, kty: 'EC', x: j.x, y: j.y })).digest('base64url');
}

/** Starts node-oidc-provider with our server as its client; accounts are any login name. */
export async function startIdp(o: {
  clientId: string;
  redirectUri: string;
  keys: ReturnType<typeof serverKeys>;
  encrypt?: boolean;
  /** false: the IdP offers no PAR, and our client authenticates with this secret (client_secret_post). */
  par?: boolean;
  secret?: string;
  claims?: Record<string, Record<string, unknown>>;
}): Promise<Idp> {
  const sigJwk = { ...o.keys.signing.publicKey.export({ format: 'jwk' }), kid: ecThumbprint(o.keys.signing.publicKey), use: 'sig', alg: 'ES256' };
  const encJwk = { ...o.keys.encryption.publicKey.export({ format: 'jwk' }), kid: 'enc-1', use: 'enc', alg: 'ECDH-ES' };
  const client = {
    client_id: o.clientId,
    redirect_uris: [o.redirectUri],
    response_types: ['code'],
    grant_types: ['authorization_code'],
    ...(o.secret ? { token_endpoint_auth_method: 'client_secret_post', client_secret: o.secret } : { token_endpoint_auth_method: 'private_key_jwt', token_endpoint_auth_signing_alg: 'ES256' }),
    id_token_signed_response_alg: 'ES256',
    jwks: { keys: [sigJwk, encJwk] },
    ...(o.encrypt !== false ? { id_token_encrypted_response_alg: 'ECDH-ES', id_token_encrypted_response_enc: 'A256GCM' } : {}),
  };
  const child = spawn(process.execPath, [path.join(__dirname, '../../helpers/oidc-idp.mjs')], {
    env: { ...process.env, NODE_OPTIONS: '', IDP_CONFIG: JSON.stringify({ clients: [client], claims: o.claims ?? {}, par: o.par }) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const issuer = await new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /IDP_READY (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
    child.once('exit', (code) => reject(new Error(`the IdP exited with ${code}: ${err.slice(-2000)}`)));
  });
  return {
    issuer,
    async tamper(t) {
      const res = await fetch(`${issuer}/__tamper`, { method: 'POST', body: JSON.stringify(t) });
      if (res.status !== 204) throw new Error(`tamper failed: ${res.status}`);
    },
    close: () => stopChild(child),
  };
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** OIDC_PROVIDERS_FILE naming `issuer` (written beside the keys). */
export function providersFile(keys: ReturnType<typeof serverKeys>, entries: Record<string, unknown>[]): string {
  const file = path.join(keys.dir, 'providers.json');
  fs.writeFileSync(file, JSON.stringify(entries));
  return file;
}

export function providerEntry(issuer: string, clientId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { iss: issuer, name: 'Test IdP', client_id: clientId, client_auth: 'private_key_jwt', key: 'client-key.pem', id_token_decryption_key: 'id-token-key.pem', scopes: ['openid'], ...extra };
}

/**
 * A browser: from `start` (a URL of the app under test, a path on `app`) it follows redirects,
 * keeps the IdP's cookies, signs in as `login` and consents, until a redirect leaves both the
 * app and the IdP (the app's redirect URI): that URL is returned, not opened.
 */
export async function browse(app: Express, publicUrl: string, start: string, login: string, visited: URL[] = []): Promise<URL> {
  const jar = new Map<string, string>();
  let url = new URL(start, publicUrl);
  let form: { action: string; body: string } | undefined;
  for (let hop = 0; hop < 20; hop++) {
    visited.push(url);
    let status: number;
    let location: string | undefined;
    let html = '';
    if (url.origin === new URL(publicUrl).origin) {
      const res = await request(app).get(url.pathname + url.search);
      status = res.status;
      location = res.headers.location;
      if (status >= 400) throw new Error(`${url.pathname}: ${status} ${res.text}`);
    } else if (url.protocol === 'http:' && url.hostname === '127.0.0.1') {
      const headers: Record<string, string> = { cookie: [...jar.entries()].map(([k, v]) => `${k}=${v}`).join('; ') };
      const init: RequestInit = form ? { method: 'POST', headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' }, body: form.body, redirect: 'manual' } : { headers, redirect: 'manual' };
      form = undefined;
      const res = await fetch(url, init);
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(';');
        const i = pair.indexOf('=');
        jar.set(pair.slice(0, i), pair.slice(i + 1));
      }
      status = res.status;
      location = res.headers.get('location') ?? undefined;
      html = await res.text();
      if (status >= 400) throw new Error(`IdP ${url.pathname}: ${status} ${html.slice(0, 500)}`);
    } else {
      return url;
    }
    if (status >= 300 && status < 400 && location) {
      url = new URL(location, url);
      continue;
    }
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1]?.replace(/&amp;/g, '&');
    const prompt = /name="prompt" value="(\w+)"/.exec(html)?.[1];
    if (!action || !prompt) throw new Error(`no form at ${url.href}: ${html.slice(0, 300)}`);
    form = { action, body: new URLSearchParams(prompt === 'login' ? { prompt, login, password: 'x' } : { prompt }).toString() };
    url = new URL(action, url);
  }
  throw new Error('too many redirects');
}

export interface PatientApp {
  clientId: string;
  clientKey: EcKey;
  dpopKey: EcKey;
}

/** A software client registered for the authorization_code grant with the app's redirect URI. */
export async function registerPatientApp(h: Pick<Harness, 'app'>, redirectUris = [APP_REDIRECT]): Promise<PatientApp> {
  const clientKey = await generateEcKey();
  const res = await request(h.app)
    .post('/svc/v1/register')
    .send({ client_name: 'patient app', token_endpoint_auth_method: 'private_key_jwt', grant_types: ['authorization_code', 'refresh_token'], redirect_uris: redirectUris, jwks: { keys: [{ ...clientKey.publicJwk, use: 'sig' }] } });
  if (res.status !== 201) throw new Error(`register failed: ${res.status} ${res.text}`);
  return { clientId: res.body.client_id, clientKey, dpopKey: await generateEcKey() };
}

export function pkce(): { verifier: string; challenge: string } {
  const verifier = crypto.randomBytes(32).toString('base64url');
  return { verifier, challenge: crypto.createHash('sha256').update(verifier).digest('base64url') };
}

type Urls = Harness['urls'] & { par: string };

/** POST /par as the app; `form` overrides or removes (undefined) parameters. */
export async function par(h: { app: Express; publicUrl: string; urls: Urls; now: () => number; idpIss?: string }, a: PatientApp, challenge: string, form: Record<string, string | undefined> = {}): Promise<request.Response> {
  const assertion = await createClientAssertion(a.clientKey, { clientId: a.clientId, audience: h.publicUrl, now: h.now() });
  const body = {
    response_type: 'code',
    client_id: a.clientId,
    redirect_uri: APP_REDIRECT,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    scope: 'openid patient/Appointment.crus patient/Slot.rs patient/Patient.r',
    state: 'app-state-1',
    idp_iss: h.idpIss,
    client_assertion_type: JWT_BEARER,
    client_assertion: assertion,
    ...form,
  };
  return request(h.app)
    .post(new URL(h.urls.par).pathname)
    .type('form')
    .send(new URLSearchParams(Object.entries(body).filter((e): e is [string, string] => e[1] !== undefined)).toString());
}

/** POST /token with grant_type=authorization_code, a fresh DPoP nonce and a software client statement. */
export async function redeemCode(
  h: { app: Express; urls: Urls; now: () => number },
  a: PatientApp,
  code: string,
  verifier: string,
  form: Record<string, string | undefined> = {},
  dpopKey = a.dpopKey,
): Promise<request.Response> {
  const nonce = (await request(h.app).get(new URL(h.urls.nonce).pathname)).body.nonce as string;
  const now = h.now();
  const statement = softwareClientStatement({ clientId: a.clientId, clientKey: a.clientKey, nonce, now, platform: 'android', posture: { os: 'Android' } });
  const assertion = await createClientAssertion(a.clientKey, { clientId: a.clientId, audience: h.urls.token, now, clientStatement: statement as unknown as Record<string, unknown> });
  const proof = await createDpopProof(dpopKey, { method: 'POST', url: h.urls.token, nonce, iat: now });
  const body = {
    grant_type: 'authorization_code',
    code,
    code_verifier: verifier,
    redirect_uri: APP_REDIRECT,
    client_assertion_type: JWT_BEARER,
    client_assertion: assertion,
    ...form,
  };
  return request(h.app)
    .post(new URL(h.urls.token).pathname)
    .type('form')
    .set('DPoP', proof)
    .send(new URLSearchParams(Object.entries(body).filter((e): e is [string, string] => e[1] !== undefined)).toString());
}
