import type { Appointment } from '@medplum/fhirtypes';
import { badRequest, OperationOutcomeError, issue, unprocessable } from '../server-lib/outcomes';
import { validateResource } from '../model';
import { epochMs, type Window } from './time';

/**
 * Checks of the `appt-resource` that need no store (ISiK 6.0.0 $book): a time window (missing
 * start/end is a structural fault, 400, as the ISiK test suite S5-7 demands), ISiKTermin-valid,
 * status `proposed`, start before end, in the future. Returns the window.
 */
export function checkProposal(appointment: Appointment, now: Date): Window {
  const missing = (['start', 'end'] as const).filter((e) => !appointment[e]);
  if (missing.length) {
    throw new OperationOutcomeError(
      400,
      missing.map((e) => issue('required', `Appointment.${e} is required to book`, `Appointment.${e}`)),
    );
  }
  const result = validateResource(appointment);
  if (!result.ok) throw new OperationOutcomeError(result.status, result.issues);
  if (appointment.status !== 'proposed') {
    throw unprocessable(`Appointment.status must be proposed in a booking request, got ${String(appointment.status)}`, 'Appointment.status');
  }
  const start = epochMs(appointment.start);
  const end = epochMs(appointment.end);
  if (start === undefined || end === undefined) throw badRequest('Appointment.start and Appointment.end must be instants', 'Appointment.start', 'value');
  if (start >= end) throw unprocessable('Appointment.start must be before Appointment.end', 'Appointment.end');
  if (start <= now.getTime()) throw unprocessable('Appointment.start must be in the future', 'Appointment.start');
  return { start, end };
}
