import type { Bundle, Resource } from '@medplum/fhirtypes';

/**
 * The patients a resource is about (`Patient/id`): a Patient itself, an Appointment's Patient
 * participants, and the `subject` or `patient` of any other resource (Encounter,
 * QuestionnaireResponse, RelatedPerson). BALP's Patient variants name one of them per AuditEvent.
 */
export function patientsOf(resource: Resource | undefined): string[] {
  if (!resource) return [];
  if (resource.resourceType === 'Patient') return resource.id ? [`Patient/${resource.id}`] : [];
  const found = new Set<string>();
  addPatients(resource, found);
  return [...found];
}

const PATIENT_REFERENCE = /(?:^|\/)(Patient\/[A-Za-z0-9\-.]{1,64})(?:\/_history\/[^/]+)?$/;

/** Adds the patients of a resource other than a Patient to `found` (no closure per call: it runs for every resource of every audited answer). */
function addPatients(resource: Resource, found: Set<string>): void {
  if (resource.resourceType === 'Appointment') for (const p of resource.participant ?? []) addPatient(p.actor?.reference, found);
  const r = resource as { subject?: { reference?: string }; patient?: { reference?: string } };
  addPatient(r.subject?.reference, found);
  addPatient(r.patient?.reference, found);
}

function addPatient(reference: string | undefined, found: Set<string>): void {
  if (reference === undefined) return;
  const m = PATIENT_REFERENCE.exec(reference);
  if (m) found.add(m[1]);
}

/**
 * Types whose R4 definition has no `subject`, no `patient` and no participant (writes reject
 * unknown elements): patientsOf finds no patient in them.
 */
const WITHOUT_PATIENTS = new Set(['CodeSystem', 'ValueSet', 'Schedule', 'Slot', 'HealthcareService', 'Practitioner', 'PractitionerRole', 'Location', 'Subscription', 'OperationOutcome']);

/** Whether resources of a type can name a patient (a search of one that includes nothing else needs no look at its answer). */
export function mayHoldPatients(type: string): boolean {
  return !WITHOUT_PATIENTS.has(type);
}

/** `Slot` of `https://x/fhir/Slot/1`, undefined for a fullUrl of another form (`urn:uuid:`). */
function typeInFullUrl(fullUrl: string | undefined): string | undefined {
  if (!fullUrl) return undefined;
  const end = fullUrl.lastIndexOf('/');
  const start = end > 0 ? fullUrl.lastIndexOf('/', end - 1) : -1;
  return start < 0 ? undefined : fullUrl.slice(start + 1, end);
}

/**
 * The patients of every resource in a Bundle (a search's matches and includes, a history). An
 * entry whose fullUrl names a type without patients is passed over unread: a search answer's
 * matches are their stored JSON text, parsed only when asked for.
 */
export function patientsInBundle(bundle: Bundle): string[] {
  const found = new Set<string>();
  for (const entry of bundle.entry ?? []) {
    const type = typeInFullUrl(entry.fullUrl);
    if (type !== undefined && WITHOUT_PATIENTS.has(type)) continue;
    const resource = entry.resource;
    if (!resource) continue;
    if (resource.resourceType === 'Patient') {
      if (resource.id) found.add(`Patient/${resource.id}`);
    } else addPatients(resource, found);
  }
  return [...found];
}
