import crypto from 'node:crypto';
import type { AppContext } from '../../../context';
import { claimsOf, decodeCompactJws, MalformedJws } from '../../jose/compact-jws';
import { AccessDenied, InvalidRequest, TemporarilyUnavailable } from '../../errors';
import { CardCertificateError, verifyCardChain, type VerifiedCard } from '../../pki/card-trust';
import { CardRevoked, OcspUnavailable, type OcspChecker } from '../../pki/ocsp';
import type { GuardSettings } from '../../settings';
import { consumeOnce } from '../../state/replay-cache';
import type { SharedState } from '../../state/shared-state';

/** Card signature algorithms: ES256 (P-256), BP256R1 (brainpoolP256r1, RFC 5639), PS256 (RSA). */
export const SUBJECT_TOKEN_ALGS = ['ES256', 'BP256R1', 'PS256'] as const;

export interface SubjectTokenCheck {
  token: string;
  /** Where used subject-token jtis are remembered. */
  state: SharedState;
  clientId: string;
  /** Thumbprint of the registered client instance key (`client_key.jkt`). */
  clientJkt: string;
  /** Thumbprint of the DPoP proof key of this request (`dpop_key.jkt`). */
  dpopJkt: string;
  /** The nonce this request consumed (from the DPoP proof). */
  nonce: string;
  tokenEndpoint: string;
  anchors: crypto.X509Certificate[];
  /** Revocation of the card certificate (CARD_OCSP). */
  ocsp: OcspChecker;
}

export interface VerifiedSubjectToken {
  card: VerifiedCard;
  claims: Record<string, unknown>;
}

/**
 * The subject token: a JWT signed through the connector with the
 * institution card key, the card certificate in `x5c[0]`. A malformed token is 400
 * `invalid_request`; any check failing on a well-formed one is 403 `access_denied`.
 */
export async function verifySubjectToken(ctx: AppContext, settings: GuardSettings, check: SubjectTokenCheck): Promise<VerifiedSubjectToken> {
  const { header, claims, signingInput, signature } = wellFormedJwt(check.token);
  const alg = algIsSupported(header);
  const { leaf, issuer, ...card } = await cardChainsToTrustAnchor(header, check.anchors, ctx.now());
  signatureVerifiesWithCardKey(alg, card.publicKey, signingInput, signature);
  const now = Math.floor(ctx.now().getTime() / 1000);
  issuerIsTheClient(claims, check.clientId);
  audienceHasTokenEndpoint(claims, check.tokenEndpoint);
  timesAreValid(claims, now, settings);
  nonceIsTheConsumedNonce(claims, check.nonce);
  subjectIsTheTelematikId(claims, card);
  keysAreBound(claims, check);
  await cardIsNotRevoked({ leaf, issuer }, check.ocsp);
  await jtiIsFresh(ctx, check.state, claims, settings);
  return { card, claims };
}

function wellFormedJwt(token: string) {
  try {
    const jws = decodeCompactJws(token);
    if (jws.signature.length === 0) throw new MalformedJws('serialization');
    return { header: jws.header, claims: claimsOf(jws), signingInput: jws.signingInput, signature: jws.signature };
  } catch (err) {
    if (!(err instanceof MalformedJws)) throw err;
    throw new InvalidRequest(err.defect === 'serialization' ? 'subject_token is not a JWS in compact serialization' : 'subject_token header or payload is not a JSON object');
  }
}

function algIsSupported(header: Record<string, unknown>): (typeof SUBJECT_TOKEN_ALGS)[number] {
  if (typeof header.alg !== 'string' || !(SUBJECT_TOKEN_ALGS as readonly string[]).includes(header.alg)) {
    throw new AccessDenied(`subject_token alg must be one of ${SUBJECT_TOKEN_ALGS.join(', ')}`);
  }
  return header.alg as (typeof SUBJECT_TOKEN_ALGS)[number];
}

async function cardChainsToTrustAnchor(header: Record<string, unknown>, anchors: crypto.X509Certificate[], now: Date): Promise<VerifiedCard & { leaf: Buffer; issuer: Buffer }> {
  try {
    const { card, leaf, issuer } = await verifyCardChain(header.x5c, anchors, now);
    return { ...card, leaf, issuer };
  } catch (err) {
    if (err instanceof CardCertificateError) throw new AccessDenied(`subject_token card certificate rejected: ${err.message}`);
    throw err;
  }
}

/** After the signature: only a card that signed this token is worth an OCSP round trip. */
async function cardIsNotRevoked(card: { leaf: Buffer; issuer: Buffer }, ocsp: OcspChecker): Promise<void> {
  try {
    await ocsp.check(card.leaf, card.issuer);
  } catch (err) {
    if (err instanceof CardRevoked) throw new AccessDenied(`subject_token card certificate rejected: ${err.message}`);
    if (err instanceof OcspUnavailable) throw new TemporarilyUnavailable(`card revocation status unavailable: ${err.message}`);
    throw err;
  }
}

function signatureVerifiesWithCardKey(alg: string, key: crypto.KeyObject, signingInput: Buffer, signature: Buffer): void {
  const curve = key.asymmetricKeyDetails?.namedCurve;
  const keyFits =
    (alg === 'ES256' && key.asymmetricKeyType === 'ec' && curve === 'prime256v1') ||
    (alg === 'BP256R1' && key.asymmetricKeyType === 'ec' && curve === 'brainpoolP256r1') ||
    (alg === 'PS256' && (key.asymmetricKeyType === 'rsa' || key.asymmetricKeyType === 'rsa-pss'));
  if (!keyFits) throw new AccessDenied('subject_token alg does not fit the card key');
  const ok =
    alg === 'PS256'
      ? crypto.verify('sha256', signingInput, { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }, signature)
      : signature.length === 64 && crypto.verify('sha256', signingInput, { key, dsaEncoding: 'ieee-p1363' }, signature);
  if (!ok) throw new AccessDenied('subject_token signature does not verify with the card key');
}

function issuerIsTheClient(claims: Record<string, unknown>, clientId: string): void {
  if (claims.iss !== clientId) throw new AccessDenied('subject_token iss must be the client_id');
}

function audienceHasTokenEndpoint(claims: Record<string, unknown>, tokenEndpoint: string): void {
  const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!aud.includes(tokenEndpoint)) throw new AccessDenied('subject_token aud must contain the token endpoint');
}

function timesAreValid(claims: Record<string, unknown>, now: number, settings: GuardSettings): void {
  if (typeof claims.exp !== 'number' || claims.exp <= now - settings.clockSkewSec) throw new AccessDenied('subject_token has expired or has no exp');
  if (typeof claims.iat !== 'number' || claims.iat > now + settings.clockSkewSec) throw new AccessDenied('subject_token iat is missing or in the future');
  if (claims.exp - claims.iat > settings.nonceTtlSec + settings.clockSkewSec) throw new AccessDenied('subject_token lives too long');
  if (claims.nbf !== undefined && (typeof claims.nbf !== 'number' || claims.nbf > now + settings.clockSkewSec)) throw new AccessDenied('subject_token is not valid yet');
}

function nonceIsTheConsumedNonce(claims: Record<string, unknown>, nonce: string): void {
  if (claims.nonce !== nonce) throw new AccessDenied('subject_token nonce must be the nonce of the DPoP proof');
}

function subjectIsTheTelematikId(claims: Record<string, unknown>, card: VerifiedCard): void {
  if (claims.sub !== card.telematikId) throw new AccessDenied('subject_token sub must be the Telematik-ID of the card');
}

function keysAreBound(claims: Record<string, unknown>, check: SubjectTokenCheck): void {
  const jkt = (v: unknown) => (typeof v === 'object' && v !== null ? (v as { jkt?: unknown }).jkt : undefined);
  if (jkt(claims.client_key) !== check.clientJkt) throw new AccessDenied('subject_token client_key.jkt must be the registered client key');
  if (jkt(claims.dpop_key) !== check.dpopJkt) throw new AccessDenied('subject_token dpop_key.jkt must be the DPoP proof key');
}

async function jtiIsFresh(ctx: AppContext, state: SharedState, claims: Record<string, unknown>, settings: GuardSettings): Promise<void> {
  if (typeof claims.jti !== 'string' || claims.jti.length === 0 || claims.jti.length > 256) throw new AccessDenied('subject_token must carry a jti');
  const until = new Date(((claims.exp as number) + settings.clockSkewSec) * 1000);
  if (!(await consumeOnce(state, 'subject_token', `${String(claims.iss)}:${claims.jti}`, until, ctx.now()))) throw new AccessDenied('subject_token has been used before');
}
