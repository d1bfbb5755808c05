import { r4Definitions } from '../../server-lib/r4-definitions';
import type { Bundle, CodeSystem, CodeSystemConcept, Coding, ValueSet } from '@medplum/fhirtypes';
import { localCodeSystem, localValueSet, stripVersion } from './profile-registry';

/**
 * What a value set admits: per code system either an enumerated set of codes or `'any'` (the
 * whole system is included but its content is not shipped with us, e.g. IHE-D
 * AerztlicheFachrichtungen). A value set built from filters cannot be expanded here: `undefined`,
 * and the binding is not checked rather than wrongly rejected.
 */
export type ValueSetContent = Map<string, Set<string> | 'any'>;

const cache = new Map<string, ValueSetContent | undefined>();
let r4: { valueSets: Map<string, ValueSet>; codeSystems: Map<string, CodeSystem> } | undefined;

function r4Terminology(): NonNullable<typeof r4> {
  if (!r4) {
    r4 = { valueSets: new Map(), codeSystems: new Map() };
    for (const file of ['fhir/r4/valuesets.json', 'fhir/r4/v3-codesystems.json']) {
      for (const entry of r4Definitions<Bundle>(file).entry ?? []) {
        const res = entry.resource;
        if (res?.resourceType === 'ValueSet' && res.url) r4.valueSets.set(res.url, res);
        if (res?.resourceType === 'CodeSystem' && res.url) r4.codeSystems.set(res.url, res);
      }
    }
  }
  return r4;
}

export function valueSetContent(canonical: string): ValueSetContent | undefined {
  const url = stripVersion(canonical);
  if (!cache.has(url)) cache.set(url, expand(url, new Set()));
  return cache.get(url);
}

function expand(url: string, seen: Set<string>): ValueSetContent | undefined {
  if (seen.has(url)) return undefined;
  seen.add(url);
  const vs = localValueSet(url) ?? r4Terminology().valueSets.get(url);
  if (!vs?.compose) return undefined;
  const content: ValueSetContent = new Map();
  for (const include of vs.compose.include) {
    if (include.filter?.length) return undefined;
    for (const imported of include.valueSet ?? []) {
      const sub = expand(stripVersion(imported), seen);
      if (!sub) return undefined;
      for (const [system, codes] of sub) merge(content, system, codes);
    }
    if (!include.system) continue;
    if (include.concept?.length) {
      merge(content, include.system, new Set(include.concept.map((c) => c.code)));
    } else {
      const cs = localCodeSystem(include.system) ?? r4Terminology().codeSystems.get(include.system);
      merge(content, include.system, cs?.concept?.length ? new Set(flatten(cs.concept)) : 'any');
    }
  }
  for (const exclude of vs.compose.exclude ?? []) {
    const codes = exclude.system ? content.get(exclude.system) : undefined;
    if (codes instanceof Set) for (const c of exclude.concept ?? []) codes.delete(c.code);
  }
  return content;
}

function merge(content: ValueSetContent, system: string, codes: Set<string> | 'any'): void {
  const existing = content.get(system);
  if (existing === 'any' || codes === 'any') content.set(system, 'any');
  else content.set(system, new Set([...(existing ?? []), ...codes]));
}

function flatten(concepts: CodeSystemConcept[]): string[] {
  return concepts.flatMap((c) => [c.code, ...flatten(c.concept ?? [])]);
}

/** A bare `code` carries no system: it is in the value set if any included system has it. */
export function admitsCode(content: ValueSetContent, code: string): boolean {
  for (const codes of content.values()) if (codes === 'any' || codes.has(code)) return true;
  return false;
}

export function admitsCoding(content: ValueSetContent, coding: Coding): boolean {
  if (!coding.system || !coding.code) return false;
  const codes = content.get(coding.system);
  return codes === 'any' || (codes !== undefined && codes.has(coding.code));
}
