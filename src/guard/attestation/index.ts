import type { AppContext } from '../../context';
import { InvalidRequest } from '../errors';
import type { GuardSettings } from '../settings';
import { softwarePostureVerifier } from './software/verify-software-posture';
import { tpmRegistrationVerifier } from './tpm/register-tpm';
import { tpmPostureVerifier } from './tpm/verify-tpm-posture';
import type { RegistrationVerifier } from './registration';
import type { SharedState } from '../state/shared-state';
import { svcTokenRegistrationVerifier } from './svc-token/register-svc-token';
import { TrustedIssuers } from './svc-token/trusted-issuers';
import { platformAPostureVerifier, platformARegistrationVerifier } from './platform-a/platform-a';
import type { PlatformAAppId, PlatformBPackage } from '../../config';
import { platformBPostureVerifier, platformBRegistrationVerifier } from './platform-b/platform-b';
import type { RevocationList } from './platform-b/revocation-list';

export type { RegistrationChallenge, RegistrationProof, RegistrationVerifier, RegisteringClient } from './registration';

/** `client_statement.platform` values (gematik client-statement.yaml). */
const PLATFORMS = ['android', 'apple', 'windows', 'linux', 'other'] as const;

export interface ClientStatement {
  sub: string;
  platform: string;
  posture_type: string;
  posture: Record<string, unknown>;
  attestation_timestamp: number;
}

export interface AttestationContext {
  ctx: AppContext;
  settings: GuardSettings;
  clientId: string;
  /** Thumbprint of the registered client instance key. */
  clientJkt: string;
  /** The nonce consumed by this token request. */
  nonce: string;
  /** Platform recorded at the client's first attested exchange, if any. */
  registeredPlatform?: string;
  /** How the client registered and what it proved then (the TPM's AK, ...). */
  registration: { attestationType: string; attestation?: Record<string, unknown> };
}

/** What the policy engine and the tokens learn from a verified statement. */
export interface AttestationResult {
  postureType: string;
  platform: string;
  productId: string;
  productVersion: string;
  os: string;
  osVersion: string;
  arch: string;
  attestationTimestamp: number;
  /** `client_registration_data.attestation_result` of the policy input, keyed by posture type. */
  result: Record<string, unknown>;
  /** Set when hardware proved the posture: the token response then carries an `svc_att_token`. */
  hardware?: { attestationKeyJkt: string };
}

/**
 * Verifies one posture type (`software` here; `tpm`, `android`, `apple` later, each in its own
 * folder). Throws a GuardError when the posture does not prove what it claims.
 */
export interface PostureVerifier {
  postureType: string;
  verify(statement: ClientStatement, actx: AttestationContext): Promise<AttestationResult>;
}

export function defaultPostureVerifiers(): Map<string, PostureVerifier> {
  return new Map([
    [softwarePostureVerifier.postureType, softwarePostureVerifier],
    [tpmPostureVerifier.postureType, tpmPostureVerifier],
    [platformAPostureVerifier.postureType, platformAPostureVerifier],
    [platformBPostureVerifier.postureType, platformBPostureVerifier],
  ]);
}

/**
 * Registration proofs this instance accepts: `tpm` only when TPM manufacturer CAs are configured,
 * `svc_attestation_token` only when other guard instances are trusted.
 */
export function defaultRegistrationVerifiers(o: {
  ekAnchors?: Buffer[];
  trustedIssuers: string[];
  state: SharedState;
  now: () => Date;
  platformA?: { anchors: Buffer[]; appIds: readonly PlatformAAppId[] };
  platformB?: { anchors: Buffer[]; packages: readonly PlatformBPackage[]; revocations: RevocationList };
}): Map<string, RegistrationVerifier> {
  const verifiers = new Map<string, RegistrationVerifier>();
  // platform_a only for the App IDs named in PLATFORM_A_APP_IDS.
  const platformA = o.platformA;
  if (platformA && platformA.appIds.length > 0) verifiers.set('platform_a', platformARegistrationVerifier(() => platformA.anchors, platformA.appIds));
  // platform_b only for the packages named in PLATFORM_B_PACKAGES.
  const platformB = o.platformB;
  if (platformB && platformB.packages.length > 0) verifiers.set('platform_b', platformBRegistrationVerifier(() => platformB.anchors, platformB.packages, platformB.revocations));
  const ekAnchors = o.ekAnchors;
  if (ekAnchors) verifiers.set('tpm', tpmRegistrationVerifier(() => ekAnchors));
  if (o.trustedIssuers.length > 0) verifiers.set('svc_attestation_token', svcTokenRegistrationVerifier(new TrustedIssuers(o.trustedIssuers, o.now), o.state));
  return verifiers;
}

/**
 * The client statement of a token exchange: structure, binding to the client and
 * freshness here, the posture by the verifier for its `posture_type`. All failures are 400
 * `invalid_request` (ZETA UC06: empty statement, changed platform, wrong challenge, junk quote).
 */
export async function verifyClientStatement(
  raw: unknown,
  actx: AttestationContext,
  verifiers: ReadonlyMap<string, PostureVerifier>,
): Promise<AttestationResult> {
  const statement = statementHasAllMembers(raw);
  subIsTheClient(statement, actx);
  platformIsKnown(statement);
  platformMatchesFirstAttestation(statement, actx);
  timestampIsFresh(statement, actx);
  postureIsTheRegisteredHardware(statement, actx);
  const verifier = verifiers.get(statement.posture_type);
  if (!verifier) throw new InvalidRequest('client_statement posture_type is not supported by this server');
  return verifier.verify(statement, actx);
}

/** Registration types whose key lives in hardware: their clients prove it on every exchange. */
const HARDWARE_REGISTRATIONS = ['tpm', 'platform_a', 'platform_b'];

/** A client registered with hardware attestation cannot fall back to a software posture. */
function postureIsTheRegisteredHardware(statement: ClientStatement, actx: AttestationContext): void {
  const registered = actx.registration.attestationType;
  if (HARDWARE_REGISTRATIONS.includes(registered) && statement.posture_type !== registered) {
    throw new InvalidRequest(`client_statement.posture_type must be ${registered}: the client registered with attestation_type ${registered}`);
  }
}

function statementHasAllMembers(raw: unknown): ClientStatement {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new InvalidRequest('the client assertion must carry a client_statement object');
  const s = raw as Record<string, unknown>;
  for (const m of ['sub', 'platform', 'posture_type'] as const) {
    if (typeof s[m] !== 'string' || s[m] === '') throw new InvalidRequest(`client_statement.${m} must be a non-empty string`);
  }
  if (typeof s.posture !== 'object' || s.posture === null || Array.isArray(s.posture)) throw new InvalidRequest('client_statement.posture must be an object');
  if (typeof s.attestation_timestamp !== 'number' || !Number.isInteger(s.attestation_timestamp)) {
    throw new InvalidRequest('client_statement.attestation_timestamp must be an integer');
  }
  return s as unknown as ClientStatement;
}

function subIsTheClient(s: ClientStatement, actx: AttestationContext): void {
  if (s.sub !== actx.clientId) throw new InvalidRequest('client_statement.sub must be the client_id');
}

function platformIsKnown(s: ClientStatement): void {
  if (!(PLATFORMS as readonly string[]).includes(s.platform)) throw new InvalidRequest(`client_statement.platform must be one of ${PLATFORMS.join(', ')}`);
}

function platformMatchesFirstAttestation(s: ClientStatement, actx: AttestationContext): void {
  if (actx.registeredPlatform && actx.registeredPlatform !== s.platform) {
    throw new InvalidRequest('client_statement.platform differs from the platform this client attested before');
  }
}

function timestampIsFresh(s: ClientStatement, actx: AttestationContext): void {
  const now = Math.floor(actx.ctx.now().getTime() / 1000);
  if (s.attestation_timestamp > now + actx.settings.clockSkewSec) throw new InvalidRequest('client_statement.attestation_timestamp is in the future');
  if (s.attestation_timestamp < now - actx.settings.attestationMaxAgeSec) throw new InvalidRequest('client_statement.attestation_timestamp is stale');
}
