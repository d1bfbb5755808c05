import { InvalidRequest } from '../errors';
import type { AttestationContext, AttestationResult, ClientStatement } from './index';

/** The product and device members every posture carries (gematik posture-*.yaml base fields). */
export const PRODUCT_MEMBERS = ['product_id', 'product_version', 'os', 'os_version', 'arch'] as const;
export type ProductFields = Record<(typeof PRODUCT_MEMBERS)[number], string>;

/** Posture members that must be non-empty printable strings of at most 1 KiB; 400 naming the first that is not. */
export function printableMembers<K extends string>(posture: Record<string, unknown>, members: readonly K[]): Record<K, string> {
  for (const m of members) {
    const v = posture[m];
    if (typeof v !== 'string' || v.length === 0 || v.length > 1024 || /[\u0000-\u001f\u007f]/.test(v)) {
      throw new InvalidRequest(`client_statement.posture.${m} must be a non-empty printable string`);
    }
  }
  return posture as Record<K, string>;
}

/** What the policy engine and the tokens learn from a verified statement of any posture type. */
export function attestationResult(statement: ClientStatement, p: ProductFields, verified: Pick<AttestationResult, 'postureType' | 'result' | 'hardware'>): AttestationResult {
  return {
    platform: statement.platform,
    productId: p.product_id,
    productVersion: p.product_version,
    os: p.os,
    osVersion: p.os_version,
    arch: p.arch,
    attestationTimestamp: statement.attestation_timestamp,
    ...verified,
  };
}

/** What the client proved at registration for this posture type (`attestation[type]`); 400 when it registered otherwise. */
export function registrationFor<T>(actx: AttestationContext, type: string): T {
  const registered = actx.registration.attestation?.[type] as T | undefined;
  if (actx.registration.attestationType !== type || !registered) throw new InvalidRequest(`client_statement.posture_type ${type} needs a client registered with attestation_type ${type}`);
  return registered;
}
