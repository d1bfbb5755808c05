import type { AppContext } from '../../context';
import { InvalidRequest } from '../errors';
import { anchorSource } from '../pki/anchor-source';
import type { GuardSettings } from '../settings';
import type { SharedState } from '../state/shared-state';
import { AttestationMethods, type AttestationMethod } from './method';
import { platformAMethod } from './platform-a/platform-a-method';
import { platformBMethod } from './platform-b/platform-b-method';
import { RevocationList } from './platform-b/revocation-list';
import { softwareMethod } from './software/software-method';
import { svcTokenMethod } from './svc-token/svc-token-method';
import { tpmMethod } from './tpm/tpm-method';

export type { RegistrationChallenge, RegistrationProof, RegistrationVerifier, RegisteringClient } from './registration';
export { AttestationMethods, type AttestationMethod } from './method';

/** A registration without `attestation_type` is a software one (gematik dcr-request.yaml: the software/legacy form; the ZETA SDK sends none). */
export const DEFAULT_ATTESTATION_TYPE = softwareMethod.type;

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

/** Verifies the client statements of one attestation method. Throws a GuardError when the posture does not prove what it claims. */
export interface PostureVerifier {
  verify(statement: ClientStatement, actx: AttestationContext): Promise<AttestationResult>;
}

/**
 * The attestation methods of one application: software, TPM, the two platforms and the service
 * attestation token, each accepting registrations only where this instance is set up for it
 * (TPM_EK_TRUST_ANCHORS, PLATFORM_A_APP_IDS, PLATFORM_B_PACKAGES, TRUSTED_ATTESTATION_ISSUERS);
 * then `extra` ones. A new method is one entry here, its verifiers in a folder of its own.
 */
export function attestationMethods(ctx: AppContext, o: { state: SharedState; extra?: readonly AttestationMethod[] }): AttestationMethods {
  const { config } = ctx;
  return new AttestationMethods([
    softwareMethod,
    tpmMethod(config.tpmEkTrustAnchors ? anchorSource(ctx, 'TPM_EK_TRUST_ANCHORS', config.tpmEkTrustAnchors) : undefined),
    platformAMethod({ anchors: anchorSource(ctx, 'PLATFORM_A_TRUST_ANCHORS', config.platformATrustAnchors), appIds: config.platformAAppIds }),
    platformBMethod({
      anchors: anchorSource(ctx, 'PLATFORM_B_TRUST_ANCHORS', config.platformBTrustAnchors),
      packages: config.platformBPackages,
      revocations: new RevocationList(config.platformBRevocationSource, ctx.now),
    }),
    svcTokenMethod({ trustedIssuers: config.trustedAttestationIssuers, state: o.state, now: ctx.now }),
    ...(o.extra ?? []),
  ]);
}

/**
 * The client statement of a token exchange: structure, binding to the client and
 * freshness here, the posture by the verifier for its `posture_type`. All failures are 400
 * `invalid_request` (ZETA UC06: empty statement, changed platform, wrong challenge, junk quote).
 */
export async function verifyClientStatement(raw: unknown, actx: AttestationContext, methods: AttestationMethods): Promise<AttestationResult> {
  const statement = statementHasAllMembers(raw);
  subIsTheClient(statement, actx);
  platformIsKnown(statement);
  platformMatchesFirstAttestation(statement, actx);
  timestampIsFresh(statement, actx);
  postureIsTheRegisteredHardware(statement, actx, methods);
  const verifier = methods.get(statement.posture_type)?.posture;
  if (!verifier) throw new InvalidRequest('client_statement posture_type is not supported by this server');
  return verifier.verify(statement, actx);
}

/** A client registered with a hardware method cannot fall back to another posture. */
function postureIsTheRegisteredHardware(statement: ClientStatement, actx: AttestationContext, methods: AttestationMethods): void {
  const registered = actx.registration.attestationType;
  if (methods.get(registered)?.hardware && statement.posture_type !== registered) {
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
