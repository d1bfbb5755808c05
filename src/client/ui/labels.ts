import type { CodeableConcept, CodeSystem, Coding } from '@medplum/fhirtypes';
import { SERVICE_TYPE_SYSTEM } from '../../common/vocabulary';

/**
 * German names of codes whose code system displays them in English only (HL7 service-type, the
 * codes the ISiK Terminplanung examples use): the page is for German practices.
 */
const GERMAN: ReadonlyMap<string, string> = new Map([
  [`${SERVICE_TYPE_SYSTEM}|124`, 'Allgemeinmedizin'],
  [`${SERVICE_TYPE_SYSTEM}|177`, 'Neurologie'],
]);

const key = (c: Coding) => `${c.system ?? ''}|${c.code ?? ''}`;

/** A code as a person reads it: its German name where known, else its display, the code only when there is nothing else. */
export function codingLabel(c: Coding): string | null {
  return GERMAN.get(key(c)) ?? (c.display?.trim() || c.code || null);
}

/** A CodeableConcept as a person reads it: its text (ISiK: "Freitextbeschreibung ist ausreichend"), else its best coding. */
export function conceptLabel(cc: CodeableConcept | undefined): string | null {
  if (!cc) return null;
  if (cc.text?.trim()) return cc.text.trim();
  const codings = cc.coding ?? [];
  const german = codings.map((c) => GERMAN.get(key(c))).find(Boolean);
  if (german) return german;
  return codings.map((c) => c.display?.trim()).find(Boolean) ?? codings.find((c) => c.code)?.code ?? null;
}

/** A CodeSystem concept's German designation (FHIR R4 CodeSystem.concept.designation, language `de`), if it has one. */
export function germanDesignation(concept: NonNullable<CodeSystem['concept']>[number]): string | undefined {
  return concept.designation?.find((d) => /^de(-|$)/i.test(d.language ?? '') && d.value?.trim())?.value?.trim();
}
