import type { Appointment, AppointmentParticipant, Reference } from '@medplum/fhirtypes';
import { referencedId } from '../server-lib/references';
import { epochMs } from './time';

/**
 * ISiK Terminplanung 6.0.0: these elements MUST NOT be changed by an
 * update; a new time goes through $book with the same id. Equal values (also instants written
 * differently for the same moment, references written differently to the same resource) are no
 * change.
 */
export const IMMUTABLE_ELEMENTS = [
  'Appointment.slot',
  'Appointment.start',
  'Appointment.end',
  'Appointment.participant.actor.where(resolve() is Patient)',
] as const;

export type ImmutableElement = (typeof IMMUTABLE_ELEMENTS)[number];

export function changedImmutables(previous: Appointment, next: Appointment): ImmutableElement[] {
  return IMMUTABLE_ELEMENTS.filter((element) => !sameValue(element, previous, next));
}

function sameValue(element: ImmutableElement, a: Appointment, b: Appointment): boolean {
  switch (element) {
    case 'Appointment.start':
      return epochMs(a.start) === epochMs(b.start) && (a.start === undefined) === (b.start === undefined);
    case 'Appointment.end':
      return epochMs(a.end) === epochMs(b.end) && (a.end === undefined) === (b.end === undefined);
    case 'Appointment.slot':
      return sameKeys(referenceKeys(a.slot, 'Slot'), referenceKeys(b.slot, 'Slot'));
    default:
      return sameKeys(referenceKeys(patientActors(a), 'Patient'), referenceKeys(patientActors(b), 'Patient'));
  }
}

/**
 * The patient participants. FHIRPath resolve() (medplum) only knows `Patient/id`; $book also takes
 * `Patient/id/_history/n` and absolute URLs on the base, and an actor typed Patient.
 */
function patientActors(a: Appointment): Reference[] {
  const isPatient = (p: AppointmentParticipant) => !!referencedId(p.actor?.reference, 'Patient') || p.actor?.type === 'Patient';
  return (a.participant ?? []).filter(isPatient).map((p) => p.actor as Reference);
}

/** What identifies a reference: the local id of the type when it has one, else its text. */
function referenceKeys(refs: Reference[] | undefined, type: string): string[] {
  return (refs ?? [])
    .map((r) => {
      const id = referencedId(r.reference, type);
      return id ? `${type}/${id}` : (r.reference ?? JSON.stringify(r.identifier ?? r));
    })
    .sort();
}

function sameKeys(x: string[], y: string[]): boolean {
  return x.length === y.length && x.every((v, i) => v === y[i]);
}
