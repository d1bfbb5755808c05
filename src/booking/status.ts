import type { Appointment } from '@medplum/fhirtypes';

/** Appointment states that occupy their slots and time window. */
const HOLDING = new Set(['booked', 'pending', 'arrived', 'checked-in']);

export const holdsTime = (a: Appointment | undefined): boolean => !!a && HOLDING.has(a.status);

export const EXTERNAL_TAG = { system: 'http://fhir.de/CodeSystem/common-meta-tag-de', code: 'external' } as const;
