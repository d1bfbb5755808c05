import crypto from 'node:crypto';
import { errors as joseErrors, jwtVerify, decodeJwt, type JWTPayload } from 'jose';
import type { AppContext } from '../../../context';
import { canonicalEcJwk } from '../../../common/canonical-jwk';
import { SVC_ATT_TOKEN_TYP } from '../../../common/oauth';
import { InvalidRequest, TemporarilyUnavailable } from '../../errors';
import { stateKey, type SharedState } from '../../state/shared-state';
import type { RegistrationProof, RegistrationVerifier, RegisteringClient } from '../registration';
import { IssuerUnreachable, type TrustedIssuers } from './trusted-issuers';

/** What a registration by service attestation token stores with the client. */
export interface SvcTokenRegistration {
  iss: string;
  /** The client_id at the issuing guard. */
  sub: string;
  puk_ak_sig: string;
  platform: string;
}

/**
 * `attestation_type: "svc_attestation_token"` (docs/requirements.md, Hardware attestation): a token another guard instance issued
 * after it saw the client's hardware attest. One named step each: the issuer is trusted, the
 * signature verifies with its published keys, the claims say hardware-bound and verified, the token
 * names this client key (`cnf.jkt`), the client key signed its own canonical JWK, and the token
 * registers once. The client starts `pending_user_binding`; its first token exchange binds it.
 */
export function svcTokenRegistrationVerifier(issuers: TrustedIssuers, state: SharedState): RegistrationVerifier {
  return {
    async verify(body: Record<string, unknown>, client: RegisteringClient, ctx: AppContext): Promise<RegistrationProof> {
      const token = tokenIsPresent(body);
      const iss = issuerIsTrusted(token, issuers);
      const claims = await signatureVerifies(token, iss, issuers, ctx.now());
      claimsSayHardwareVerified(claims);
      tokenNamesThisClientKey(claims, client);
      clientKeySignedItself(body, client);
      await tokenRegistersOnce(claims, state, ctx.now());
      const registration: SvcTokenRegistration = { iss, sub: claims.sub as string, puk_ak_sig: claims.puk_ak_sig as string, platform: claims.platform as string };
      return { attestation: { svc_attestation_token: registration }, status: 'pending_user_binding' };
    },
  };
}

function tokenIsPresent(b: Record<string, unknown>): string {
  const t = b.svc_attestation_token;
  if (typeof t !== 'string' || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(t) || t.length > 8192) {
    throw new InvalidRequest('svc_attestation_token must be a compact JWS');
  }
  return t;
}

function issuerIsTrusted(token: string, issuers: TrustedIssuers): string {
  let iss: unknown;
  try {
    iss = decodeJwt(token).iss;
  } catch {
    throw new InvalidRequest('svc_attestation_token does not decode');
  }
  if (typeof iss !== 'string' || !issuers.isTrusted(iss)) throw new InvalidRequest('svc_attestation_token is not from a trusted attestation issuer');
  return iss;
}

async function signatureVerifies(token: string, iss: string, issuers: TrustedIssuers, now: Date): Promise<JWTPayload> {
  try {
    const keys = await issuers.keysOf(iss);
    const { payload } = await jwtVerify(token, keys, { issuer: iss, algorithms: ['ES256'], typ: SVC_ATT_TOKEN_TYP, currentDate: now, requiredClaims: ['sub', 'exp', 'iat', 'jti'] });
    return payload;
  } catch (err) {
    if (err instanceof IssuerUnreachable) throw new TemporarilyUnavailable(err.message);
    // A network failure while fetching the key set is not the client's fault: 503, retry later.
    if (err instanceof joseErrors.JWKSTimeout || !(err instanceof joseErrors.JOSEError)) throw new TemporarilyUnavailable(`the keys of ${iss} could not be fetched`);
    throw new InvalidRequest(`svc_attestation_token does not verify: ${(err as Error).message}`);
  }
}

function claimsSayHardwareVerified(c: JWTPayload): void {
  if (c.hardware_bound !== true || c.verification_status !== 'SUCCESS') throw new InvalidRequest('svc_attestation_token is not a verified hardware attestation');
  if (typeof c.puk_ak_sig !== 'string' || typeof c.platform !== 'string') throw new InvalidRequest('svc_attestation_token lacks puk_ak_sig or platform');
}

function tokenNamesThisClientKey(c: JWTPayload, client: RegisteringClient): void {
  const jkt = (c.cnf as { jkt?: unknown } | undefined)?.jkt;
  if (jkt !== client.jkt) throw new InvalidRequest('svc_attestation_token was issued for another client instance key');
}

/** signed_hash_puk_client_sig: ES256 by the client key over its RFC 7638 canonical JWK (base64url, r‖s or DER). */
function clientKeySignedItself(b: Record<string, unknown>, client: RegisteringClient): void {
  const sig = b.signed_hash_puk_client_sig;
  if (typeof sig !== 'string' || !/^[A-Za-z0-9_-]+$/.test(sig)) throw new InvalidRequest('signed_hash_puk_client_sig must be base64url');
  const raw = Buffer.from(sig, 'base64url');
  const canonical = canonicalEcJwk(client.jwk);
  const key = crypto.createPublicKey({ key: client.jwk as crypto.JsonWebKey, format: 'jwk' });
  let ok = false;
  try {
    ok = crypto.verify('sha256', canonical, { key, dsaEncoding: raw.length === 64 ? 'ieee-p1363' : 'der' }, raw);
  } catch {
    ok = false;
  }
  if (!ok) throw new InvalidRequest('client_key_binding: signed_hash_puk_client_sig is not the client key signature over its canonical JWK');
}

async function tokenRegistersOnce(c: JWTPayload, state: SharedState, now: Date): Promise<void> {
  const first = await state.firstUse(stateKey('svc-att-token', `${c.iss}\u0000${c.jti}`), new Date((c.exp as number) * 1000), now);
  if (!first) throw new InvalidRequest('svc_attestation_token was used for a registration already');
}
