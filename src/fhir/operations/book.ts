import type { Appointment, OperationDefinition, Parameters, ParametersParameter, Patient, QuestionnaireResponse, RelatedPerson, Resource } from '@medplum/fhirtypes';
import { referencedId } from '../../shared/references';
import { appointmentIdOf, book, bookingContext, checkProposal, type BookInput } from '../../booking';
import { SqlState, sqlState } from '../../store';
import { badRequest, conflict } from '../../shared/outcomes';
import { preferHeader, type FhirEnv, type FhirRequest, type FhirResponse } from '../request';
import { written } from '../interactions';
import { scopeNeed } from '../../protocol/smart-scopes';
import { startAsync } from './async';
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
    { name: 'schedule', use: 'in', min: 0, max: '1', type: 'Reference', targetProfile: ['https://gematik.de/fhir/isik/StructureDefinition/ISiKKalender'] },
    { name: 'patient', use: 'in', min: 0, max: '1', type: 'Patient' },
    { name: 'related-person', use: 'in', min: 0, max: '1', type: 'RelatedPerson' },
    { name: 'patientSubmittedInformation', use: 'in', min: 0, max: '1', type: 'QuestionnaireResponse' },
    { name: 'return', use: 'out', min: 0, max: '1', type: 'Appointment' },
  ],
} as const satisfies OperationDefinition;

type ParameterName = (typeof BOOK_DEFINITION.parameter)[number]['name'];
const INPUTS = new Set<string>(BOOK_DEFINITION.parameter.filter((p) => p.use === 'in').map((p) => p.name));

/** A booking that races on one slot or id with another retries on these, then answers 409. */
const RETRIED = new Set<string>([SqlState.serializationFailure, SqlState.deadlockDetected]);
const ATTEMPTS = 3;

export const bookOperation: Operation = {
  definition: definitionOf(BOOK_DEFINITION),
  // $book creates an Appointment; a re-booking cancels one of the caller's own, which the booking checks.
  scopes: () => [scopeNeed('Appointment', 'c')],
  handler: bookHandler,
};

async function bookHandler(req: FhirRequest, env: FhirEnv): Promise<FhirResponse> {
  const input = parseBookRequest(req.body);
  if ('respond-async' in preferHeader(req)) {
    // Input checks that need no store answer at kick-off; the booking itself runs as a job.
    checkProposal(input.appointment, env.ctx.now());
    return startAsync(req, env);
  }
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await env.repo.withTransaction((repo) => book(bookingContext(repo, req.identity), input));
      return written(result.appointment, result.pending ? 202 : 201, env, req);
    } catch (err) {
      const state = sqlState(err);
      if (state && RETRIED.has(state) && attempt < ATTEMPTS && !env.repo.db.inTransaction) continue;
      if (state && (RETRIED.has(state) || state === SqlState.uniqueViolation || state === SqlState.exclusionViolation)) {
        throw conflict('The appointment could not be booked: a concurrent booking took the slot or id', 'Appointment');
      }
      throw err;
    }
  }
}

/** Body: a bare Appointment (ISiK: SOLL when it is the only parameter) or `Parameters`. */
function parseBookRequest(body: unknown): BookInput {
  const resource = body as Resource | undefined;
  if (!resource || typeof resource !== 'object' || Array.isArray(resource)) throw badRequest('$book needs an Appointment or a Parameters body', undefined, 'structure');
  if (resource.resourceType === 'Appointment') return { appointment: resource as Appointment };
  if (resource.resourceType !== 'Parameters') throw badRequest(`$book takes an Appointment or Parameters, not ${String(resource.resourceType)}`, 'resourceType');
  const parameters = (resource as Parameters).parameter ?? [];
  if (!Array.isArray(parameters)) throw badRequest('Parameters.parameter must be an array', 'Parameters.parameter', 'structure');
  parameters.forEach((p, i) => {
    if (!p || typeof p !== 'object' || Array.isArray(p)) throw badRequest(`Parameters.parameter[${i}] must be an object`, `Parameters.parameter[${i}]`, 'structure');
  });
  const byName = new Map<string, ParametersParameter>();
  for (const p of parameters) {
    if (!p.name || !INPUTS.has(p.name)) {
      throw badRequest(`Unknown $book parameter "${String(p.name)}": the parameters of $book are ${[...INPUTS].join(', ')}`, 'Parameters.parameter.name');
    }
    if (byName.has(p.name)) throw badRequest(`$book parameter "${p.name}" given more than once`, `Parameters.parameter.where(name='${p.name}')`);
    byName.set(p.name, p);
  }
  const appointment = typed<Appointment>(byName, 'appt-resource', 'Appointment');
  if (!appointment) throw badRequest('$book needs the appt-resource parameter', "Parameters.parameter.where(name='appt-resource')", 'required');
  return {
    appointment,
    cancelledAppointmentId: cancelledId(byName.get('cancelled-appt-id')),
    scheduleId: scheduleId(byName.get('schedule')),
    patient: typed<Patient>(byName, 'patient', 'Patient'),
    relatedPerson: typed<RelatedPerson>(byName, 'related-person', 'RelatedPerson'),
    patientSubmittedInformation: typed<QuestionnaireResponse>(byName, 'patientSubmittedInformation', 'QuestionnaireResponse'),
  };
}

function typed<T extends Resource>(byName: Map<string, ParametersParameter>, name: ParameterName, type: T['resourceType']): T | undefined {
  const p = byName.get(name);
  if (!p) return undefined;
  if (p.resource?.resourceType !== type) throw badRequest(`$book parameter "${name}" must carry a ${type} resource`, `Parameters.parameter.where(name='${name}').resource`);
  return p.resource as T;
}

/** valueUri or valueString with an id, `Appointment/id` or an absolute URL. */
function cancelledId(p: ParametersParameter | undefined): string | undefined {
  if (!p) return undefined;
  const raw = p.valueUri ?? p.valueString ?? p.valueId ?? p.valueReference?.reference;
  const id = raw ? appointmentIdOf(raw) : undefined;
  if (!id) throw badRequest('cancelled-appt-id must hold an Appointment id, Appointment/id or an absolute URL', "Parameters.parameter.where(name='cancelled-appt-id')", 'value');
  return id;
}

function scheduleId(p: ParametersParameter | undefined): string | undefined {
  if (!p) return undefined;
  const id = referencedId(p.valueReference?.reference, 'Schedule');
  if (!id) throw badRequest('schedule must be a valueReference to a Schedule of this repository', "Parameters.parameter.where(name='schedule')", 'value');
  return id;
}

