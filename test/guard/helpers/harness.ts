import type { Express } from 'express';
import { Redis } from 'ioredis';
import request from 'supertest';
import { createApp } from '../../../src/app';
import type { AppContext } from '../../../src/context';
import type { Db } from '../../../src/store/db';
import { GuardClient } from '../../../src/client';
import { createClientAssertion, createDpopProof, generateEcKey, signCompactJws, type EcKey } from '../../../src/client/crypto';
import { softwareClientStatement } from '../../../src/client/client-statement';
import { createSubjectToken, SoftwareCard } from '../../../src/client/software-card';
import { endpoints } from '../../../src/guard/settings';
import { createTestContext, type TestClock } from '../../helpers/context';
import { testCard } from './get-token';
import { supertestTransport } from './transport';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
export const TOKEN_TYPE_JWT = 'urn:ietf:params:oauth:token-type:jwt';

export interface Harness {
  ctx: AppContext & { clock: TestClock };
  app: Express;
  publicUrl: string;
  resource: string;
  urls: ReturnType<typeof endpoints>;
  close(): Promise<void>;
}

/**
 * A real app on a fresh store; with REDIS_URL set the replay caches, nonces and rate limits run in
 * Redis (as in production), else in PostgreSQL/PGlite.
 */
export async function guardHarness(o: { env?: Record<string, string>; db?: Db; redis?: boolean; app?: (ctx: AppContext) => Express } = {}): Promise<Harness> {
  const ctx = await createTestContext({ env: o.env, db: o.db });
  const redis = o.redis !== false && process.env.REDIS_URL ? new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 2 }) : undefined;
  if (redis) ctx.redis = redis;
  const app = (o.app ?? createApp)(ctx);
  const publicUrl = ctx.config.publicUrl;
  return {
    ctx,
    app,
    publicUrl,
    resource: `${publicUrl}/fhir`,
    urls: endpoints(publicUrl),
    async close() {
      redis?.disconnect();
      if (!o.db) await ctx.db.close();
    },
  };
}

export const nowSec = (h: Harness) => Math.floor(h.ctx.now().getTime() / 1000);

export interface RegisteredClient {
  clientId: string;
  clientKey: EcKey;
}

export async function registerClient(h: Harness, grantTypes = [TOKEN_EXCHANGE, 'refresh_token']): Promise<RegisteredClient> {
  const clientKey = await generateEcKey();
  const res = await request(h.app)
    .post('/svc/v1/register')
    .send({ client_name: 'test', token_endpoint_auth_method: 'private_key_jwt', grant_types: grantTypes, jwks: { keys: [{ ...clientKey.publicJwk, use: 'sig' }] } });
  if (res.status !== 201) throw new Error(`register failed: ${res.status} ${res.text}`);
  return { clientId: res.body.client_id, clientKey };
}

export async function fetchNonce(h: Harness): Promise<string> {
  const res = await request(h.app).get('/svc/v1/nonce');
  if (res.status !== 200) throw new Error(`nonce failed: ${res.status}`);
  return res.body.nonce;
}

/** Knobs for building one token-exchange request with something wrong in it. */
export interface ExchangeOverrides {
  client?: RegisteredClient;
  card?: SoftwareCard;
  telematikId?: string;
  professionOid?: string;
  dpopKey?: EcKey;
  /** Nonce used everywhere (default: a fresh one). */
  nonce?: string;
  dpop?: { header?: Record<string, unknown>; claims?: Record<string, unknown>; iat?: number; method?: string; url?: string; nonce?: string | null; signWith?: EcKey; values?: string[]; headerName?: string };
  assertion?: { header?: Record<string, unknown>; claims?: Record<string, unknown>; signWith?: EcKey; raw?: string; now?: number };
  statement?: (s: Record<string, unknown>) => unknown;
  subject?: { claims?: Record<string, unknown>; header?: Record<string, unknown>; raw?: string; now?: number };
  form?: Record<string, string | undefined>;
  headers?: Record<string, string>;
  /** Request path (default /svc/v1/token). */
  path?: string;
  /** Appended verbatim to the form body (repeated parameters). */
  extraBody?: string;
}

export interface ExchangeResult {
  res: request.Response;
  client: RegisteredClient;
  dpopKey: EcKey;
  nonce: string;
}

/** One token exchange built from parts (client, card, nonce, proof, assertion, statement, subject token), each overridable. */
export async function exchange(h: Harness, o: ExchangeOverrides = {}): Promise<ExchangeResult> {
  const client = o.client ?? (await registerClient(h));
  const card = o.card ?? testCard(h.ctx, { telematikId: o.telematikId ?? '1-TEST-PRAXIS', professionOid: o.professionOid });
  const dpopKey = o.dpopKey ?? (await generateEcKey());
  const nonce = o.nonce ?? (await fetchNonce(h));
  const now = nowSec(h);
  const statement = softwareClientStatement({ clientId: client.clientId, clientKey: client.clientKey, nonce, now, platform: 'linux', posture: { os: 'Linux' } });
  const clientStatement = o.statement ? o.statement(statement) : statement;
  const assertion =
    o.assertion?.raw ??
    (await createClientAssertion(o.assertion?.signWith ?? client.clientKey, {
      clientId: client.clientId,
      audience: h.urls.token,
      now: o.assertion?.now ?? now,
      clientStatement: clientStatement as Record<string, unknown>,
      header: o.assertion?.header,
      claims: o.assertion?.claims,
    }));
  const subject =
    o.subject?.raw ??
    createSubjectToken(card, {
      clientId: client.clientId,
      telematikId: card.admission?.telematikId ?? 'none',
      tokenEndpoint: h.urls.token,
      nonce,
      clientJkt: client.clientKey.jkt,
      dpopJkt: dpopKey.jkt,
      now: o.subject?.now ?? now,
      claims: o.subject?.claims,
      header: o.subject?.header,
    });
  const dpopNonce = o.dpop?.nonce === null ? undefined : (o.dpop?.nonce ?? nonce);
  const proof = await createDpopProof(o.dpop?.signWith ?? dpopKey, {
    method: o.dpop?.method ?? 'POST',
    url: o.dpop?.url ?? h.urls.token,
    nonce: dpopNonce,
    iat: o.dpop?.iat ?? now,
    header: o.dpop?.header,
    claims: o.dpop?.claims,
  });
  const form: Record<string, string | undefined> = {
    grant_type: TOKEN_EXCHANGE,
    client_assertion_type: JWT_BEARER,
    client_assertion: assertion,
    subject_token_type: TOKEN_TYPE_JWT,
    subject_token: subject,
    resource: h.resource,
    ...o.form,
  };
  let r = request(h.app).post(o.path ?? '/svc/v1/token').type('form');
  const dpopValues = o.dpop?.values ?? [proof];
  if (o.dpop?.headerName) r = r.set(o.dpop.headerName, dpopValues[0]);
  else if (dpopValues.length > 0) r = r.set('DPoP', (dpopValues.length === 1 ? dpopValues[0] : dpopValues) as string);
  for (const [k, v] of Object.entries(o.headers ?? {})) r = r.set(k, v);
  const body = Object.entries(form)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');
  const res = await r.send(o.extraBody ? `${body}&${o.extraBody}` : body);
  return { res, client, dpopKey, nonce };
}

/** A logged-in GuardClient against the harness app (for refresh and revoke stories). */
export async function loggedInClient(h: Harness, o: { telematikId?: string; professionOid?: string } = {}): Promise<GuardClient> {
  const client = new GuardClient({ server: h.publicUrl, transport: supertestTransport(h.app), retries: 0, now: () => nowSec(h) });
  await client.login(testCard(h.ctx, { telematikId: o.telematikId ?? '1-TEST-PRAXIS', professionOid: o.professionOid }));
  return client;
}

export interface RefreshOverrides {
  refreshToken?: string;
  dpopKey?: EcKey;
  assertion?: { claims?: Record<string, unknown>; clientStatement?: Record<string, unknown> };
  client?: RegisteredClient;
  form?: Record<string, string | undefined>;
  nonce?: string;
}

/** One refresh request for a logged-in GuardClient, overridable. */
export async function refreshWith(h: Harness, c: GuardClient, o: RefreshOverrides = {}): Promise<request.Response> {
  const clientId = o.client?.clientId ?? c.clientId!;
  const clientKey = o.client?.clientKey ?? c.clientKey!;
  const dpop = await createDpopProof(o.dpopKey ?? c.dpopKey!, { method: 'POST', url: h.urls.token, iat: nowSec(h), nonce: o.nonce });
  const assertion = await createClientAssertion(clientKey, { clientId, audience: h.urls.token, now: nowSec(h), claims: o.assertion?.claims, clientStatement: o.assertion?.clientStatement });
  const form: Record<string, string | undefined> = {
    grant_type: 'refresh_token',
    refresh_token: o.refreshToken ?? c.tokens!.refreshToken,
    client_assertion_type: JWT_BEARER,
    client_assertion: assertion,
    ...o.form,
  };
  const body = new URLSearchParams(Object.entries(form).filter((e): e is [string, string] => e[1] !== undefined)).toString();
  return request(h.app).post('/svc/v1/token').type('form').set('DPoP', dpop).send(body);
}

export function decodePayload(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString('utf8')) as Record<string, unknown>;
}

export function decodeHeader(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[0], 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** A compact JWS with any header (even one jose refuses to produce), ES256-signed with `key` unless alg is none. */
export function rawJws(header: Record<string, unknown>, claims: Record<string, unknown>, key?: EcKey): string {
  if (!key) {
    const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    return `${enc(header)}.${enc(claims)}.`;
  }
  return signCompactJws(header, claims, key.privateKey);
}

/** Re-encodes a JWT's payload without re-signing (tampering). */
export function tamperPayload(jwt: string, change: (p: Record<string, unknown>) => void): string {
  const [h, , s] = jwt.split('.');
  const p = decodePayload(jwt);
  change(p);
  return `${h}.${Buffer.from(JSON.stringify(p)).toString('base64url')}.${s}`;
}
