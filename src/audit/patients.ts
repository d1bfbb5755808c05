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
  const add = (reference: string | undefined) => {
    const m = reference === undefined ? null : /(?:^|\/)(Patient\/[A-Za-z0-9\-.]{1,64})(?:\/_history\/[^/]+)?$/.exec(reference);
    if (m) found.add(m[1]);
  };
  if (resource.resourceType === 'Appointment') for (const p of resource.participant ?? []) add(p.actor?.reference);
  const r = resource as { subject?: { reference?: string }; patient?: { reference?: string } };
  add(r.subject?.reference);
  add(r.patient?.reference);
  return [...found];
}

/** The patients of every resource in a Bundle (a search's matches and includes, a history). */
export function patientsInBundle(bundle: Bundle): string[] {
  const found = new Set<string>();
  for (const entry of bundle.entry ?? []) for (const p of patientsOf(entry.resource)) found.add(p);
  return [...found];
}
