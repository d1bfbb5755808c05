import { FHIR_ID_PATTERN } from './fhir-id';

/**
 * `Type/id`, `Type/id/_history/n`, or an absolute URL ending in `Type/id` (R4 references.html,
 * literal references).
 */
const REFERENCE = new RegExp(`(?:^|/)([A-Z][A-Za-z]+)/(${FHIR_ID_PATTERN})(?:/_history/[^/]+)?$`);

export function parseReference(reference: string): { type: string; id: string } | undefined {
  const m = REFERENCE.exec(reference);
  return m ? { type: m[1], id: m[2] } : undefined;
}

/** The id of a reference to a resource of `type`, whatever form the reference takes. */
export function referencedId(reference: string | undefined, type: string): string | undefined {
  if (!reference) return undefined;
  const parsed = parseReference(reference);
  return parsed?.type === type ? parsed.id : undefined;
}
