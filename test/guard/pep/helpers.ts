import fs from 'node:fs';
import path from 'node:path';
import type { Bundle } from '@medplum/fhirtypes';
import type { Express } from 'express';
import { Redis } from 'ioredis';
import request from 'supertest';
import { composeTerminus, type Terminus } from '../../../src/app';
import type { FhirEnv } from '../../../src/fhir';
import { createDpopProof, signCompactJws, type EcKey } from '../../../src/client/crypto';
import type { AppContext } from '../../../src/context';
import { importResources } from '../../../src/fhir';
import { SigningKeys } from '../../../src/guard/keys/signing-keys';
import { guardSettings } from '../../../src/guard/settings';
import type { Db } from '../../../src/store/db';
import { createTestContext, type TestClock } from '../../helpers/context';
import { getTestToken, type TestToken, type TestTokenOptions } from '../helpers/get-token';

/** Every test of the enforcement point runs with it on, behind a public HTTPS origin (so an htu with the explicit default port :443 can be tested). */
export const PEP_ENV = { GUARD_ENFORCEMENT: 'on', PUBLIC_URL: 'https://terminus.example' };

export interface PepHarness {
  ctx: AppContext & { clock: TestClock };
  app: Express;
  /** The FHIR layer of the app (imports, direct requests). */
  fhir: FhirEnv;
  terminus: Terminus;
  /** `https://terminus.example/fhir` */
  base: string;
  close(): Promise<void>;
}

/** A real app with the enforcement point on a fresh store (or a shared one: two replicas); Redis when REDIS_URL is set. */
export async function pepHarness(o: { env?: Record<string, string>; db?: Db; fixture?: boolean; redis?: false } = {}): Promise<PepHarness> {
  const ctx = await createTestContext({ env: { ...PEP_ENV, ...o.env }, db: o.db });
  // `redis: false`: a file that never needs Redis (test/store-env.js REDIS_FREE) does not even read REDIS_URL.
  const redis = o.redis !== false && process.env.REDIS_URL ? new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 2 }) : undefined;
  if (redis) ctx.redis = redis;
  const terminus = composeTerminus(ctx);
  if (o.fixture) {
    const bundle = JSON.parse(fs.readFileSync(path.join(__dirname, '../../../fixtures/isik-stufe5.json'), 'utf8')) as Bundle;
    await importResources(terminus.fhir, bundle);
  }
  return {
    ctx,
    app: terminus.app,
    fhir: terminus.fhir,
    terminus,
    base: `${ctx.config.publicUrl}/fhir`,
    async close() {
      await terminus.stop();
      redis?.disconnect();
      if (!o.db) await ctx.db.close();
    },
  };
}

export const nowSec = (h: PepHarness) => Math.floor(h.ctx.now().getTime() / 1000);

/** A logged-in institution: a real token from the authorization server of this app. */
export function institution(h: PepHarness, o: TestTokenOptions): Promise<TestToken> {
  return getTestToken(h.app, h.ctx, o);
}

export interface CallOptions {
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string | string[]>;
  /** The proof to send; null: none; default a fresh valid one. */
  proof?: string | string[] | null;
  /** Access token to present (default the institution's). */
  token?: string;
  /** Authorization scheme (default DPoP); null: no Authorization header. */
  scheme?: string | null;
}

/** One resource request as a well-behaved client sends it, every part overridable. */
export async function call(h: PepHarness, t: TestToken, method: string, fhirPath: string, o: CallOptions = {}): Promise<request.Response> {
  const token = o.token ?? t.accessToken;
  const proof = o.proof === undefined ? await proofFor(h, t.dpopKey, method, fhirPath, token) : o.proof;
  const agent = request(h.app);
  let r = agent[method.toLowerCase() as 'get'](`/fhir${fhirPath}`);
  if (o.scheme !== null) r = r.set('Authorization', `${o.scheme ?? 'DPoP'} ${token}`);
  if (proof !== null) r = r.set('DPoP', proof as string);
  for (const [k, v] of Object.entries(o.headers ?? {})) r = r.set(k, v as string);
  if (o.body !== undefined) {
    r = r.set('Content-Type', o.contentType ?? 'application/fhir+json');
    return r.send(typeof o.body === 'string' ? o.body : JSON.stringify(o.body));
  }
  return r;
}

/** A valid proof for `method $PUBLIC_URL/fhir<path>` with `ath` of the token; overrides for negative rows. */
export function proofFor(h: PepHarness, key: EcKey, method: string, fhirPath: string, token: string, o: { header?: Record<string, unknown>; claims?: Record<string, unknown>; iat?: number } = {}): Promise<string> {
  return createDpopProof(key, { method, url: `${h.base}${fhirPath}`, accessToken: token, iat: o.iat ?? nowSec(h), header: o.header, claims: o.claims });
}

/** A compact JWS with any header and payload, ECDSA-signed with `key` (even headers jose refuses), or unsigned. */
export function rawJws(header: Record<string, unknown>, claims: Record<string, unknown>, key?: EcKey): string {
  if (!key) return `${b64(header)}.${b64(claims)}.`;
  return signCompactJws(header, claims, key.privateKey);
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

export function decodePayload(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** The guard's current signing key (tests re-sign access tokens with it, as the ZETA test suite does). */
export async function guardSigningKey(h: PepHarness): Promise<{ kid: string; sign(header: Record<string, unknown>, claims: Record<string, unknown>): string }> {
  const key = await new SigningKeys(h.ctx, guardSettings(h.ctx.config)).signingKey();
  return { kid: key.kid, sign: (header, claims) => signCompactJws(header, claims, key.privateKey) };
}

export const challenge = (code: string) => `DPoP error="${code}", algs="ES256"`;
