import crypto from 'node:crypto';
import type { AuditEvent } from '@medplum/fhirtypes';

/** The previous hash of a chain's first row (and of a chain nothing was linked into yet). */
export const GENESIS = Buffer.alloc(32);

/**
 * A row's link: SHA-256 over its chain, its position, the previous row's link and the SHA-256 of
 * its content. Altering a row's content, moving it to another place or chain, or removing or
 * inserting a row breaks the link of the row itself or of the one after it.
 */
export function linkHash(chain: number, seq: bigint, prev: Buffer, content: string): Buffer {
  // One buffer, two one-shot digests (no Hash objects): it runs for every AuditEvent stored.
  const input = Buffer.allocUnsafe(12 + prev.length + 32);
  input.writeInt32BE(chain, 0);
  input.writeBigInt64BE(seq, 4);
  prev.copy(input, 12);
  crypto.hash('sha256', content, 'buffer').copy(input, 12 + prev.length);
  return crypto.hash('sha256', input, 'buffer');
}

/** The columns a stored AuditEvent is searched by, all derived from its JSON (verify derives them again). */
export interface AuditColumns {
  type: string;
  subtypes: string[];
  action: string | null;
  outcome: string;
  /** Agent identifiers as `system|value` and `value`, and agent references. */
  agents: string[];
  /** Entity references without their version (`Appointment/1`). */
  entities: string[];
  /** `Patient/id` of the patient entities. */
  patients: string[];
}

export function auditColumns(event: AuditEvent): AuditColumns {
  const agents = new Set<string>();
  for (const a of event.agent ?? []) {
    const id = a.who?.identifier;
    if (id?.value) {
      agents.add(id.value);
      if (id.system) agents.add(`${id.system}|${id.value}`);
    }
    if (a.who?.reference) agents.add(a.who.reference);
  }
  const entities = new Set<string>();
  const patients = new Set<string>();
  for (const e of event.entity ?? []) {
    const ref = e.what?.reference?.replace(/\/_history\/[^/]+$/, '');
    if (!ref) continue;
    if (e.type?.code === '1' && ref.startsWith('Patient/')) patients.add(ref);
    else entities.add(ref);
  }
  return {
    type: event.type.code ?? '',
    subtypes: (event.subtype ?? []).map((c) => c.code ?? '').filter(Boolean),
    action: event.action ?? null,
    outcome: event.outcome ?? '0',
    agents: [...agents].sort(),
    entities: [...entities].sort(),
    patients: [...patients].sort(),
  };
}
