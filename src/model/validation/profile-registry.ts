import fs from 'node:fs';
import type { CodeSystem, StructureDefinition, ValueSet } from '@medplum/fhirtypes';
import { projectPath } from '../../server-lib/paths';

/**
 * The conformance resources this repository wrote itself (fhir-profiles/*.json): ISiK profiles
 * in differential form and the value sets their bindings name. Read once, on first use.
 */
interface Registry {
  readonly profiles: Map<string, StructureDefinition>;
  readonly valueSets: Map<string, ValueSet>;
  readonly codeSystems: Map<string, CodeSystem>;
}

let registry: Registry | undefined;

const PROFILES_DIR = projectPath('fhir-profiles');

function load(): Registry {
  const reg: Registry = { profiles: new Map(), valueSets: new Map(), codeSystems: new Map() };
  for (const file of fs.readdirSync(PROFILES_DIR).filter((f) => f.endsWith('.json')).sort()) {
    const resource = JSON.parse(fs.readFileSync(`${PROFILES_DIR}/${file}`, 'utf8')) as
      | StructureDefinition
      | ValueSet
      | CodeSystem;
    if (!resource.url) continue;
    if (resource.resourceType === 'StructureDefinition') reg.profiles.set(resource.url, resource);
    else if (resource.resourceType === 'ValueSet') reg.valueSets.set(resource.url, resource);
    else if (resource.resourceType === 'CodeSystem') reg.codeSystems.set(resource.url, resource);
  }
  return reg;
}

function get(): Registry {
  registry ??= load();
  return registry;
}

export function profile(url: string): StructureDefinition | undefined {
  return get().profiles.get(stripVersion(url));
}

export function allProfiles(): StructureDefinition[] {
  return [...get().profiles.values()];
}

export function localValueSet(url: string): ValueSet | undefined {
  return get().valueSets.get(stripVersion(url));
}

export function localCodeSystem(url: string): CodeSystem | undefined {
  return get().codeSystems.get(stripVersion(url));
}

/** Canonical references may carry `|version` (R4 references.html#canonical). */
export function stripVersion(url: string): string {
  const bar = url.indexOf('|');
  return bar < 0 ? url : url.slice(0, bar);
}
