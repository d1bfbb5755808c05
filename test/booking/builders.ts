import fs from 'node:fs';
import path from 'node:path';
import type { Appointment, Bundle, Parameters, Patient, Resource, Schedule, Slot } from '@medplum/fhirtypes';
import type { Express } from 'express';
import { composeTerminus, type Terminus } from '../../src/app';
import type { AppContext } from '../../src/context';
import type { WriteInterceptor } from '../../src/store';
import { importResources } from '../../src/fhir';
import { handle } from '../../src/fhir/interactions';
import type { FhirEnv, FhirRequest, FhirResponse, Caller } from '../../src/fhir/request';
import { OperationOutcomeError } from '../../src/server-lib/outcomes';
import { createTestContext, type TestClock } from '../helpers/context';

export const ISIK = 'https://gematik.de/fhir/isik/StructureDefinition/';
export const SERVICE_TYPE = { system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '177', display: 'Neurology' };
export const NEUR = { system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'NEUR', display: 'Neurologie' };
export const MANUAL = { url: 'http://terminus.local/fhir/StructureDefinition/booking-confirmation', valueCode: 'manual' };

export interface BookingFixture {
  ctx: AppContext & { clock: TestClock };
  app: Express;
  env: FhirEnv;
  terminus: Terminus;
  close(): Promise<void>;
}

/** A fresh store with the ISiK Stufe 5 seed fixture loaded, and the app on it. */
export async function bookingFixture(opts: { pglite?: boolean; env?: Record<string, string>; interceptors?: WriteInterceptor[] } = {}): Promise<BookingFixture> {
  const ctx = await createTestContext(opts);
  const bundle = JSON.parse(fs.readFileSync(path.join(__dirname, '../../fixtures/isik-stufe5.json'), 'utf8')) as Bundle;
  const terminus = composeTerminus(ctx, { interceptors: opts.interceptors });
  await importResources(terminus.fhir, bundle);
  // The audit trail's partitions exist before the tests count statements.
  await terminus.audit.prepare();
  return {
    ctx,
    app: terminus.app,
    env: terminus.fhir,
    terminus,
    close: async () => {
      await terminus.stop();
      await ctx.db.close();
    },
  };
}

/** The S5-7 fixture `Appointment-Appointment-Book-Fixture-With-Specialty` shape, without id. */
export function proposal(overrides: Partial<Appointment> = {}): Appointment {
  return {
    resourceType: 'Appointment',
    meta: { tag: [{ system: 'http://fhir.de/CodeSystem/common-meta-tag-de', code: 'external' }], profile: [`${ISIK}ISiKTermin`] },
    status: 'proposed',
    start: '2027-01-01T11:05:00Z',
    end: '2027-01-01T11:55:00Z',
    comment: 'Bitte Befunde mitbringen',
    serviceType: [{ coding: [SERVICE_TYPE] }],
    specialty: [{ coding: [NEUR] }],
    slot: [{ reference: 'Slot/Slot-Free-Example' }],
    participant: [{ actor: { reference: 'Patient/Patient-Read-Example', display: 'Test Patient' }, status: 'accepted' }],
    patientInstruction: 'Bitte nüchtern erscheinen',
    ...overrides,
  };
}

export function parameters(parts: Record<string, unknown>): Parameters {
  return {
    resourceType: 'Parameters',
    parameter: Object.entries(parts).map(([name, v]) =>
      v && typeof v === 'object' && 'resourceType' in (v as object) ? { name, resource: v as Resource } : { name, ...(v as object) },
    ),
  };
}

export function freeSlot(id: string, start: string, end: string, schedule = 'Schedule-Read-Example'): Slot {
  return {
    resourceType: 'Slot',
    id,
    meta: { profile: [`${ISIK}ISiKTerminblock`] },
    serviceType: [{ coding: [SERVICE_TYPE] }],
    specialty: [{ coding: [NEUR] }],
    schedule: { reference: `Schedule/${schedule}` },
    status: 'free',
    start,
    end,
  };
}

export function schedule(id: string, extra: Partial<Schedule> = {}): Schedule {
  return {
    resourceType: 'Schedule',
    id,
    meta: { profile: [`${ISIK}ISiKKalender`] },
    extension: [{ url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name', valueString: id }],
    active: true,
    serviceType: [{ coding: [SERVICE_TYPE] }],
    specialty: [{ coding: [NEUR] }],
    actor: [{ reference: 'Practitioner/Practitioner-Read-Example', display: 'Dr. Walter Musterarzt' }],
    ...extra,
  };
}

export function patient(id: string, extra: Partial<Patient> = {}): Patient {
  return { resourceType: 'Patient', id, active: true, name: [{ family: 'Muster', given: ['Erika'] }], ...extra };
}

export async function put(f: BookingFixture, ...resources: Resource[]): Promise<void> {
  await importResources(f.env, { resourceType: 'Bundle', type: 'collection', entry: resources.map((resource) => ({ resource })) });
}

/** Runs a FHIR request through the FHIR layer as `caller` (the guard sets it in production). */
export async function asFhir(f: BookingFixture, req: Partial<FhirRequest> & { method: string; path: string[] }, caller?: Caller): Promise<FhirResponse> {
  try {
    return await handle({ query: [], headers: {}, ...req, caller }, f.env);
  } catch (err) {
    if (err instanceof OperationOutcomeError) return { status: err.status, body: err.outcome };
    throw err;
  }
}

export const requestor = (institution = '1-INST-A'): Caller => ({
  institution,
  scopes: ['system/Appointment.crus', 'system/Patient.cr'],
  isOwner: false,
});
export const owner = (): Caller => ({ institution: '1-PRACTICE', scopes: ['system/*.cruds'], isOwner: true });

export const FHIR_JSON = 'application/fhir+json';
