import type { PostureVerifier } from './index';
import type { RegistrationVerifier } from './registration';

/**
 * One attestation method, whole in one entry: its `attestation_type` at registration (gematik
 * dcr-request.yaml), which is also the `posture_type` of its client statements
 * (client-statement.yaml), whether its key lives in hardware, the registration members it reads,
 * and its verifiers. Registration, the client statement check and discovery read it from the
 * registry (`AttestationMethods`), never from a list of their own.
 */
export interface AttestationMethod {
  type: string;
  /** The client's key lives in hardware: its clients prove this very posture at every exchange, never a weaker one. */
  hardware: boolean;
  /** The registration members it reads; a registration that proves nothing must carry none of them. */
  fields: readonly string[];
  /** `user_email` at registration: a phone's method may bind an e-mail address, a stationary one may not. */
  userEmail: 'allowed' | 'refused';
  /**
   * The proof at registration; `none`: the method proves nothing then (software). Absent: this
   * instance is not set up for it (no trust anchors, App IDs, trusted guards): registrations of
   * the type are refused.
   */
  registration?: RegistrationVerifier | 'none';
  /** The posture of its client statements; absent: its clients prove their posture with another method's statement. */
  posture?: PostureVerifier;
}

/** The attestation methods of one application, by type (composed once, guard/attestation/index.ts). */
export class AttestationMethods {
  private readonly byType: ReadonlyMap<string, AttestationMethod>;

  constructor(private readonly methods: readonly AttestationMethod[]) {
    const byType = new Map<string, AttestationMethod>();
    for (const m of methods) {
      if (byType.has(m.type)) throw new Error(`two attestation methods of type ${m.type}`);
      byType.set(m.type, m);
    }
    this.byType = byType;
  }

  get(type: string): AttestationMethod | undefined {
    return this.byType.get(type);
  }

  /** Every type this server knows, whether or not it is set up to register it. */
  types(): string[] {
    return this.methods.map((m) => m.type);
  }

  /** The types a client may register with here (discovery's `attestation_types_supported`). */
  registrable(): string[] {
    return this.methods.filter((m) => m.registration !== undefined).map((m) => m.type);
  }

  /** The members of the methods that prove something at registration, each once. */
  proofFields(): string[] {
    return [...new Set(this.methods.filter((m) => m.registration !== 'none').flatMap((m) => m.fields))];
  }
}
