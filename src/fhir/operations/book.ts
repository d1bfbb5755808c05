import type { OperationDefinition, Reference } from '@medplum/fhirtypes';
import { referencedId } from '../../server-lib/references';
import { appointmentIdOf, book, bookingContext, checkProposal, type BookInput } from '../../booking';
import { SqlState, sqlState, TRANSIENT_STATES } from '../../store';
import { badRequest, conflict } from '../../server-lib/outcomes';
import { preferHeader, type FhirEnv, type FhirRequest, type FhirResponse } from '../request';
import { written } from '../interactions';
import { scopeNeed } from '../../common/smart-scopes';
import { ISIK_PROFILE } from '../../common/vocabulary';
import { startAsync } from './async';
import { parseInputParameters } from './parameters';
import { definitionOf, type Operation } from './registry';

/** ISiK Terminplanung 6.0.0 `$book`, the definition the CapabilityStatement cites. */
const BOOK_DEFINITION = {
  resourceType: 'OperationDefinition',
  url: 'https://gematik.de/fhir/isik/OperationDefinition/AppointmentBook',
  version: '6.0.0',
  name: 'Book',
  status: 'active',
  kind: 'operation',
  code: 'book',
  resource: ['Appointment'],
  system: false,
  type: true,
  instance: false,
  affectsState: true,
  parameter: [
    { name: 'appt-resource', use: 'in', min: 1, max: '1', type: 'Appointment' },
    { name: 'cancelled-appt-id', use: 'in', min: 0, max: '1', type: 'uri' },
    { name: 'schedule', use: 'in', min: 0, max: '1', type: 'Reference', targetProfile: [ISIK_PROFILE.Schedule] },
    { name: 'patient', use: 'in', min: 0, max: '1', type: 'Patient' },
    { name: 'related-person', use: 'in', min: 0, max: '1', type: 'RelatedPerson' },
    { name: 'patientSubmittedInformation', use: 'in', min: 0, max: '1', type: 'QuestionnaireResponse' },
    { name: 'return', use: 'out', min: 0, max: '1', type: 'Appointment' },
  ],
} as const satisfies OperationDefinition;

export const bookOperation: Operation = {
  definition: definitionOf(BOOK_DEFINITION),
  // $book creates an Appointment; a re-booking cancels one of the caller's own, which the booking checks.
  scopes: () => [scopeNeed('Appointment', 'c')],
  handler: bookHandler,
};

async function bookHandler(req: FhirRequest, env: FhirEnv): Promise<FhirResponse> {
  const input = parseBookRequest(req);
  if ('respond-async' in preferHeader(req)) {
    // Input checks that need no store answer at kick-off; the booking itself runs as a job.
    checkProposal(input.appointment, env.ctx.now());
    return startAsync(req, env);
  }
  // A booking that races on one slot or id with another runs again (serialization failure,
  // deadlock); a race it still loses answers 409.
  try {
    const result = await env.repo.withRetriedTransaction((repo) => book(bookingContext(repo, req.caller), input));
    return written(result.appointment, result.pending ? 202 : 201, env, req);
  } catch (err) {
    const state = sqlState(err);
    if (state && (TRANSIENT_STATES.includes(state) || state === SqlState.uniqueViolation || state === SqlState.exclusionViolation)) {
      throw conflict('The appointment could not be booked: a concurrent booking took the slot or id', 'Appointment');
    }
    throw err;
  }
}

/** The parameters of ISiK `$book`, read by its definition (a bare Appointment is `appt-resource` alone). */
function parseBookRequest(req: FhirRequest): BookInput {
  const p = parseInputParameters(BOOK_DEFINITION, req);
  return {
    appointment: p['appt-resource'],
    cancelledAppointmentId: cancelledId(p['cancelled-appt-id']),
    scheduleId: scheduleId(p.schedule),
    patient: p.patient,
    relatedPerson: p['related-person'],
    patientSubmittedInformation: p.patientSubmittedInformation,
  };
}

/** An Appointment id, `Appointment/id` or an absolute URL (as valueUri, or another primitive value). */
function cancelledId(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const id = appointmentIdOf(value);
  if (!id) throw badRequest('cancelled-appt-id must hold an Appointment id, Appointment/id or an absolute URL', "Parameters.parameter.where(name='cancelled-appt-id')", 'value');
  return id;
}

function scheduleId(reference: Reference | undefined): string | undefined {
  if (!reference) return undefined;
  const id = referencedId(reference.reference, 'Schedule');
  if (!id) throw badRequest('schedule must be a valueReference to a Schedule of this repository', "Parameters.parameter.where(name='schedule')", 'value');
  return id;
}
