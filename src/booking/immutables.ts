import type { Appointment, Reference } from '@medplum/fhirtypes';
import { evalFhirPath } from '../fhir/medplum';
import { epochMs } from './time';

/**
 * ISiK Terminplanung 6.0.0 (seed 001 section 4 rule 5): these elements MUST NOT be changed by an
 * update; a new time goes through $book with the same id. Equal values (also instants written
 * differently for the same moment) are no change.
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
      return sameReferences(a.slot, b.slot);
    default:
      return sameReferences(evalFhirPath(element, a) as Reference[], evalFhirPath(element, b) as Reference[]);
  }
}

function sameReferences(a: Reference[] | undefined, b: Reference[] | undefined): boolean {
  const norm = (refs: Reference[] | undefined) => (refs ?? []).map((r) => r.reference ?? JSON.stringify(r.identifier ?? r)).sort();
  const x = norm(a);
  const y = norm(b);
  return x.length === y.length && x.every((v, i) => v === y[i]);
}
