import type { Appointment, AppointmentParticipant, HealthcareService, Patient } from '@medplum/fhirtypes';
import { forbidden, OperationOutcomeError, unprocessable } from '../server-lib/outcomes';
import { validateResource } from '../model';
import type { SearchRequest, StoredRow } from '../store';
import { canSee, KVID_SYSTEM } from '../server-lib/owner';
import { ownerOf, type BookingContext } from './context';
import { referencedId } from '../server-lib/references';
import { EXTERNAL_TAG } from './status';

/**
 * ISiK 6.0.0 $book `patient`: the repository MUST support it. A Patient with an identifier we
 * already hold is that patient; otherwise it is created, tagged `external` (provisional until the
 * practice completes it).
 */
export async function resolvePatientParameter(c: BookingContext, patient: Patient): Promise<Patient> {
  const checked = validateResource(patient, { profiles: 'claimed' });
  if (!checked.ok) throw new OperationOutcomeError(checked.status, checked.issues.map((i) => ({ ...i, diagnostics: `patient: ${i.diagnostics ?? i.code}` })));
  const identifiers = (patient.identifier ?? []).filter((i) => i.system && i.value).map((i) => `${i.system}|${i.value}`);
  await c.tables.lockIdentifiers(identifiers);
  for (const identifier of patient.identifier ?? []) {
    if (!identifier.system || !identifier.value) continue;
    const found = await c.repo.search(byIdentifier(`${identifier.system}|${identifier.value}`), c.caller);
    const match = found.resources[0] as Patient | undefined;
    if (match) {
      if (match.active === false) throw unprocessable(`Patient/${match.id} is not active`, 'Parameters.parameter.where(name=\'patient\')');
      return match;
    }
  }
  const { id: _id, meta, ...rest } = patient;
  const tags = meta?.tag ?? [];
  const tagged: Patient = {
    ...rest,
    meta: { ...(meta?.profile ? { profile: meta.profile } : {}), tag: tags.some((t) => t.system === EXTERNAL_TAG.system && t.code === EXTERNAL_TAG.code) ? tags : [...tags, { ...EXTERNAL_TAG }] },
  };
  return c.repo.create(tagged, { owner: ownerOf(c.caller, 'Patient') });
}

/**
 * A patient books only for themselves. Their `patient` parameter is the Patient
 * carrying their insurance number (KVNR), found or created like any `patient` parameter; one
 * naming another KVNR is 403. Other identifiers are dropped: they could match someone else.
 */
export function ownPatientParameter(kvnr: string, given: Patient | undefined): Patient {
  if ((given?.identifier ?? []).some((i) => i.system === KVID_SYSTEM && i.value !== kvnr)) {
    throw forbidden('A patient books only for themselves: the patient parameter names another insurance number');
  }
  return { ...(given ?? {}), resourceType: 'Patient', identifier: [{ system: KVID_SYSTEM, value: kvnr }] };
}

/** After the patient's own Patient was resolved: no participant may name another Patient (403). */
export function onlyThePatient(participants: AppointmentParticipant[], own: Patient): void {
  for (const p of participants) {
    const id = referencedId(p.actor?.reference, 'Patient');
    if (id !== undefined && id !== own.id) throw forbidden('A patient books only for themselves: a participant names another Patient');
  }
}

/**
 * Points the appointment's patient participant at the resolved patient: adds one when none is
 * given (the parameter alone names the patient), rewrites a reference to the parameter's own id.
 */
export function withPatientParticipant(appointment: Appointment, given: Patient, resolved: Patient): AppointmentParticipant[] {
  const participants = appointment.participant ?? [];
  const target = `Patient/${resolved.id}`;
  const display = displayName(resolved);
  const isPatient = (p: AppointmentParticipant) => /(^|\/)Patient\//.test(p.actor?.reference ?? '') || p.actor?.type === 'Patient';
  if (!participants.some(isPatient)) {
    return [...participants, { actor: { reference: target, ...(display ? { display } : {}) }, status: 'accepted' }];
  }
  return participants.map((p) => {
    const ref = p.actor?.reference ?? '';
    const pointsToGiven = given.id !== undefined && referencedId(ref, 'Patient') === given.id;
    const local = ref.startsWith('urn:') || ref.startsWith('#');
    return isPatient(p) && (pointsToGiven || local) ? { ...p, actor: { ...p.actor, reference: target } } : p;
  });
}

/**
 * Participants that take no bookings unless they exist and are active (coded alike: missing,
 * deleted or invisible `not-found`, inactive `business-rule`, both 422). docs/requirements.md, Booking ($book), for
 * patients, also later for provisionally created ones; the same for HealthcareServices
 * named in the appointment (those behind its Schedule are checked with the Schedule).
 */
export async function checkActiveParticipants(
  c: BookingContext,
  participants: AppointmentParticipant[],
  type: 'Patient' | 'HealthcareService',
  /** Rows already read in this transaction (`participantKeys`, lockSlots), by `Type/id`. */
  read?: Map<string, StoredRow | undefined>,
): Promise<void> {
  for (const [i, p] of participants.entries()) {
    const id = referencedId(p.actor?.reference, type);
    if (!id) continue;
    const expression = `Appointment.participant[${i}].actor`;
    const key = `${type}/${id}`;
    const row = read?.has(key) ? read.get(key) : await c.repo.readRow(type, id);
    if (!row || row.deleted || !canSee(row.owner, c.caller, row.resource)) throw unprocessable(`${type}/${id} does not exist`, expression, 'not-found');
    if ((row.resource as Patient | HealthcareService).active === false) throw unprocessable(`${type}/${id} is not active`, expression);
  }
}

/** The Patient and HealthcareService rows checkActiveParticipants reads. */
export function participantKeys(participants: AppointmentParticipant[]): { type: string; id: string }[] {
  return (['Patient', 'HealthcareService'] as const).flatMap((type) =>
    participants.map((p) => referencedId(p.actor?.reference, type)).filter((id): id is string => !!id).map((id) => ({ type, id })),
  );
}

function displayName(p: Patient): string | undefined {
  const n = p.name?.[0];
  if (!n) return undefined;
  return n.text ?? [...(n.given ?? []), n.family].filter(Boolean).join(' ') ?? undefined;
}

function byIdentifier(token: string): SearchRequest {
  return {
    resourceType: 'Patient',
    filters: [{ chain: [], param: 'identifier', values: [token] }],
    count: 1,
    offset: 0,
    sort: [],
    include: [],
    revinclude: [],
    totalOnly: false,
  };
}
