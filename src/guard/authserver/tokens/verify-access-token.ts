import type crypto from 'node:crypto';
import { importJWK } from 'jose';
import type { AccessTokenPayload } from './access-token';
import { claimsOf, decodeCompactJws, MalformedJws, type CompactJws } from '../../jose/compact-jws';
import { es256Verifies } from '../../jose/es256';
import { InvalidToken } from '../../errors';
import type { SigningKeys } from '../../keys/signing-keys';
import type { SessionLiveness } from '../../state/revoked-sessions';
import type { PepSettings } from '../../pep/settings';

/** What the verifier checks against and how long it caches. */
export type AccessTokenRules = Pick<PepSettings, 'issuer' | 'resource' | 'leewaySec' | 'keyCacheSec' | 'tokenCacheSize'>;

type Header = Record<string, unknown>;
type Claims = Record<string, unknown>;

/**
 * Access tokens at the resource (ngx-pep `pep.rs` step 2): issued by our AS,
 * one named check each. Keys are imported once per kid and verified tokens are remembered until
 * they expire, so a repeated token costs a map lookup and the time checks, not a signature.
 * Last, its session must still be alive: revocation and refresh-token reuse kill the family's
 * access tokens too, cached for at most a second (state/revoked-sessions.ts).
 */
export class AccessTokenVerifier {
  private readonly verified = new Map<string, AccessTokenPayload>();
  private readonly keys = new Map<string, { key: crypto.KeyObject | undefined; until: number }>();
  constructor(
    private readonly signingKeys: SigningKeys,
    private readonly settings: AccessTokenRules,
    private readonly now: () => Date,
    private readonly sessions: SessionLiveness,
  ) {}

  async verify(token: string): Promise<AccessTokenPayload> {
    const t = Math.floor(this.now().getTime() / 1000);
    const cached = this.verified.get(token);
    if (cached) {
      timesAreValid(cached, t, this.settings.leewaySec);
      await sessionIsLive(this.sessions, cached.sid);
      return cached;
    }
    const [jws, header, claims] = decode(token);
    typIsAccessToken(header);
    algIsEs256(header);
    const key = await this.keyFor(header.kid);
    signatureVerifies(jws, key);
    issuerIsOurs(claims, this.settings.issuer);
    audienceIsThisResource(claims, this.settings.resource);
    timesAreValid(claims, t, this.settings.leewaySec);
    isDpopBound(claims);
    identityClaimsPresent(claims);
    noForeignClaims(claims);
    await sessionIsLive(this.sessions, claims.sid);
    const payload = claims as unknown as AccessTokenPayload;
    this.remember(token, payload);
    return payload;
  }

  /** An ES256 key published at our jwks_uri (guard_signing_key); unknown kids are remembered briefly so garbage cannot hammer the store. */
  private async keyFor(kid: unknown): Promise<crypto.KeyObject> {
    if (typeof kid !== 'string' || kid.length === 0 || kid.length > 128) throw new InvalidToken('the access token names no signing key');
    const nowMs = this.now().getTime();
    let entry = this.keys.get(kid);
    if (!entry || entry.until <= nowMs) {
      const jwk = await this.signingKeys.publicKey(kid);
      const key = jwk ? ((await importJWK({ ...jwk, alg: 'ES256' }, 'ES256')) as crypto.KeyObject) : undefined;
      entry = { key, until: nowMs + (key ? this.settings.keyCacheSec * 1000 : 5_000) };
      if (this.keys.size > 1000) this.keys.clear();
      this.keys.set(kid, entry);
    }
    if (!entry.key) throw new InvalidToken('the access token is signed with an unknown key');
    return entry.key;
  }

  private remember(token: string, payload: AccessTokenPayload): void {
    if (this.verified.size >= this.settings.tokenCacheSize) {
      // Map keeps insertion order: drop the oldest entry.
      const oldest = this.verified.keys().next().value;
      if (oldest !== undefined) this.verified.delete(oldest);
    }
    this.verified.set(token, payload);
  }
}

/** Revoked family (RFC 7009 /revoke, RFC 9700 §4.14.2 reuse detection) or a sid we never issued → 401. */
async function sessionIsLive(sessions: SessionLiveness, sid: unknown): Promise<void> {
  if (typeof sid !== 'string' || sid.length === 0 || sid.length > 128) throw new InvalidToken('the access token has no sid');
  if (!(await sessions.isLive(sid))) throw new InvalidToken('the access token has been revoked');
}

function decode(token: string): [CompactJws, Header, Claims] {
  try {
    const jws = decodeCompactJws(token);
    if (jws.signature.length === 0) throw new MalformedJws('serialization');
    return [jws, jws.header, claimsOf(jws)];
  } catch (err) {
    if (err instanceof MalformedJws) throw new InvalidToken('the access token is not a signed JWT');
    throw err;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 9068 §2.1: `typ: at+jwt` keeps other JWTs (proofs, ID tokens, assertions) from passing as access tokens. */
function typIsAccessToken(header: Header): void {
  if (header.typ !== 'at+jwt') throw new InvalidToken('the access token typ must be at+jwt');
}

function algIsEs256(header: Header): void {
  if (header.alg !== 'ES256') throw new InvalidToken('the access token must be signed with ES256');
}

function signatureVerifies(jws: CompactJws, key: crypto.KeyObject): void {
  if (!es256Verifies(jws, key)) throw new InvalidToken('the access token signature does not verify');
}

function issuerIsOurs(claims: Claims, issuer: string): void {
  if (claims.iss !== issuer) throw new InvalidToken('the access token has another issuer');
}

/** ngx-pep `pep_require_aud`: the token must name this resource. */
function audienceIsThisResource(claims: Claims, resource: string): void {
  const aud = claims.aud;
  const ok = Array.isArray(aud) ? aud.includes(resource) : aud === resource;
  if (!ok) throw new InvalidToken('the access token is for another audience');
}

/** `exp`, `nbf`, `iat` with the leeway (RFC 7519 §4.1.4-6). */
function timesAreValid(claims: Claims | AccessTokenPayload, now: number, leeway: number): void {
  const { exp, nbf, iat } = claims as Claims;
  if (typeof exp !== 'number' || !Number.isFinite(exp)) throw new InvalidToken('the access token has no exp');
  if (exp + leeway <= now) throw new InvalidToken('the access token has expired');
  if (nbf !== undefined && (typeof nbf !== 'number' || nbf - leeway > now)) throw new InvalidToken('the access token is not valid yet');
  if (typeof iat !== 'number' || iat - leeway > now) throw new InvalidToken('the access token iat is in the future');
}

/** RFC 9449 §6: only sender-constrained tokens are accepted here. */
function isDpopBound(claims: Claims): void {
  const cnf = claims.cnf;
  if (!isObject(cnf) || typeof cnf.jkt !== 'string' || cnf.jkt.length === 0) throw new InvalidToken('the access token is not DPoP-bound');
}

function identityClaimsPresent(claims: Claims): void {
  for (const name of ['sub', 'client_id', 'scope', 'jti'] as const) {
    if (typeof claims[name] !== 'string' || (claims[name] as string).length === 0) throw new InvalidToken(`the access token has no ${name}`);
  }
}

/** ZETA UC12: a `nonce` marks an ID token or a proof, never an access token. */
function noForeignClaims(claims: Claims): void {
  if ('nonce' in claims) throw new InvalidToken('the access token carries a nonce claim');
}
