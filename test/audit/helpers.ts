import type { Appointment, AuditEvent, Patient } from '@medplum/fhirtypes';
import { importResources } from '../../src/fhir';
import { storedEventJson } from '../../src/audit/stored-form';
import { KVID_SYSTEM } from '../../src/common/vocabulary';
import type { PepHarness } from '../guard/pep/helpers';
import { decodePayload, guardSigningKey } from '../guard/pep/helpers';
import type { TestToken } from '../guard/helpers/get-token';
import { DEFAULT_PATIENT_SCOPES } from '../../src/guard/policy/scopes';

/** Every AuditEvent stored so far (writes' events linked first), oldest first. */
export async function storedEvents(h: PepHarness): Promise<AuditEvent[]> {
  await h.terminus.audit.linkAll();
  const { rows } = await h.ctx.db.query<{ content: string }>('SELECT content FROM audit_event ORDER BY recorded, id');
  return rows.map((r) => JSON.parse(storedEventJson(r.content)) as AuditEvent);
}

/** The AuditEvents of one request (its X-Request-Id). */
export async function eventsOf(h: PepHarness, requestId: string): Promise<AuditEvent[]> {
  // Refusals and failures are recorded without holding their answer: wait for them a moment.
  for (let i = 0; ; i++) {
    const found = (await storedEvents(h)).filter((e) => e.entity?.some((x) => x.type?.code === 'XrequestId' && x.what?.identifier?.value === requestId));
    if (found.length > 0 || i >= 200) return found;
    await new Promise((r) => setTimeout(r, 25));
  }
}

export const patientOf = (e: AuditEvent) => e.entity?.find((x) => x.type?.code === '1')?.what?.reference;
export const dataOf = (e: AuditEvent) => e.entity?.filter((x) => x.role?.code === '4').map((x) => x.what?.reference);
export const queryOf = (e: AuditEvent) => e.entity?.find((x) => x.role?.code === '24');
export const userOf = (e: AuditEvent) => e.agent?.find((a) => a.requestor);
export const clientOf = (e: AuditEvent) => e.agent?.[0];

/** Two more patients with an appointment each, beside the fixture's Patient-Read-Example (imports are not accesses: nothing recorded). */
export async function threePatients(h: PepHarness): Promise<string[]> {
  const { rows } = await h.ctx.db.query<{ content: Patient }>("SELECT content FROM resource WHERE resource_type = 'Patient' AND id = 'Patient-Read-Example'");
  const { rows: appts } = await h.ctx.db.query<{ content: Appointment }>("SELECT content FROM resource WHERE resource_type = 'Appointment' AND id = 'Appointment-Read-Example'");
  const patient = rows[0].content;
  const appointment = appts[0].content;
  const extra = ['B', 'C'].flatMap((x, i) => [
    { ...patient, id: `audit-patient-${x}`, meta: undefined, identifier: [{ system: KVID_SYSTEM, value: `Z00000000${i}` }] } as Patient,
    {
      ...appointment,
      id: `audit-appt-${x}`,
      meta: undefined,
      participant: appointment.participant?.map((p) => (p.actor?.reference?.startsWith('Patient/') ? { ...p, actor: { reference: `Patient/audit-patient-${x}` } } : p)),
    } as Appointment,
  ]);
  await importResources(h.fhir, { resourceType: 'Bundle', type: 'collection', entry: extra.map((resource) => ({ resource })) });
  return ['Appointment-Read-Example', 'audit-appt-B', 'audit-appt-C'];
}

/**
 * A patient's token as the code flow issues it (its claims: `kvnr`, patient scopes), signed with
 * the guard's key over a session that exists; the DPoP key stays the institution token's.
 */
export async function patientToken(h: PepHarness, from: TestToken, kvnr: string): Promise<TestToken> {
  const key = await guardSigningKey(h);
  const claims = { ...decodePayload(from.accessToken), kvnr, sub: kvnr, scope: DEFAULT_PATIENT_SCOPES.join(' '), common_name: 'Erika Mustermann', platform: 'platform_a' };
  return { ...from, accessToken: key.sign({ alg: 'ES256', typ: 'at+jwt', kid: key.kid }, claims) };
}
