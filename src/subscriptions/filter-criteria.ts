import type { Appointment, Reference } from '@medplum/fhirtypes';
import type { Topic } from './topics';

/**
 * A parsed `backport-filter-criteria` (`Appointment?patient=Patient/1&status=booked`): every
 * parameter must match (AND), any of its comma-separated values (OR).
 */
export interface FilterCriteria {
  resourceType: string;
  params: { name: string; values: string[] }[];
}

export class FilterCriteriaError extends Error {}

export function parseFilterCriteria(text: string, topic: Topic): FilterCriteria {
  const m = /^([A-Z][A-Za-z]+)\?(.+)$/.exec(text.trim());
  if (!m) throw new FilterCriteriaError(`"${text}" is not of the form ${topic.resource}?name=value`);
  if (m[1] !== topic.resource) throw new FilterCriteriaError(`filter criteria of ${topic.url} apply to ${topic.resource}, not ${m[1]}`);
  const params = [...new URLSearchParams(m[2]).entries()].map(([name, value]) => ({ name, values: value.split(',').map((v) => v.trim()).filter(Boolean) }));
  for (const p of params) {
    if (!topic.filterParameters.includes(p.name)) {
      throw new FilterCriteriaError(`filter parameter "${p.name}" is not supported by ${topic.url} (supported: ${topic.filterParameters.join(', ')})`);
    }
    if (p.values.length === 0) throw new FilterCriteriaError(`filter parameter "${p.name}" has no value`);
  }
  if (params.length === 0) throw new FilterCriteriaError(`"${text}" names no filter parameter`);
  return { resourceType: m[1], params };
}

/** Whether an Appointment version satisfies the criteria (references compared as `Type/id`). */
export function matchesFilter(criteria: FilterCriteria, appointment: Appointment, baseUrl: string): boolean {
  return criteria.params.every((p) => {
    const have = valuesOf(p.name, appointment, baseUrl);
    return p.values.some((v) => have.includes(normalise(p.name, v, baseUrl)));
  });
}

const ACTOR_TYPE: Record<string, string> = { patient: 'Patient', practitioner: 'Practitioner', location: 'Location' };

function valuesOf(name: string, a: Appointment, baseUrl: string): string[] {
  if (name === 'status') return a.status ? [a.status] : [];
  if (name === '_id') return a.id ? [a.id] : [];
  const refs = (a.participant ?? []).map((p) => localRef(p.actor, baseUrl)).filter((r): r is string => !!r);
  const type = ACTOR_TYPE[name];
  return type ? refs.filter((r) => r.startsWith(`${type}/`)) : refs;
}

function normalise(name: string, value: string, baseUrl: string): string {
  if (name === 'status' || name === '_id') return value;
  const ref = localRef({ reference: value }, baseUrl) ?? value;
  const type = ACTOR_TYPE[name];
  return type && !ref.includes('/') ? `${type}/${ref}` : ref;
}

function localRef(ref: Reference | undefined, baseUrl: string): string | undefined {
  const r = ref?.reference;
  if (!r) return undefined;
  return r.startsWith(`${baseUrl}/`) ? r.slice(baseUrl.length + 1) : r;
}
