import type { JWK } from 'jose';
import type { AppContext } from '../../context';
import type { TPM_ACTIVATION } from '../../common/attestation-types';

/** The client instance key of a registration, already checked (one EC P-256 `sig` key). */
export interface RegisteringClient {
  jwk: JWK;
  jkt: string;
}

/** A challenge the client must answer at /register/verify before it is registered. */
export interface RegistrationChallenge {
  /** `challenge_type` of the 202 answer and `verify_type` of the verify request. */
  type: typeof TPM_ACTIVATION;
  /** The expected answer (kept only as a hash). */
  answer: Buffer;
  /** Members of the 202 answer that carry the challenge (credential blob and secret). */
  response: Record<string, string>;
}

/** What a registration-time proof established. */
export interface RegistrationProof {
  /** Stored with the client: what later token exchanges verify against (`{tpm: {...}}`). */
  attestation: Record<string, unknown>;
  challenge?: RegistrationChallenge;
  /** `required`: the registration is a phone's and binds an e-mail address (docs/requirements.md, Patients (authorization code flow)). */
  userEmail?: 'required';
  /** The status the client starts in (default `pending_attestation`). */
  status?: 'pending_attestation' | 'pending_user_binding';
}

/**
 * Registration-time proof of one attestation method (TPM credential activation, a service
 * attestation token, the platform attestation objects). Throws a GuardError when the proof does
 * not hold.
 */
export interface RegistrationVerifier {
  verify(body: Record<string, unknown>, client: RegisteringClient, ctx: AppContext): Promise<RegistrationProof>;
}
