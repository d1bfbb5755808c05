import fs from 'node:fs';
import path from 'node:path';
import type { Bundle, BundleEntry, Resource } from '@medplum/fhirtypes';
import { fromXml, parseJson } from '../model';
import type { FhirEnv } from './request';
import { badRequest } from '../shared/outcomes';
import { processBundle } from './transaction';

/**
 * Turns a Bundle (transaction, batch or collection) or a single resource into a transaction of
 * PUTs that keep the ids (`terminus import`). Entries without an id get one
 * from their `urn:uuid:` fullUrl so references between them keep working.
 */
export function toImportTransaction(input: Resource): Bundle {
  const resources: { resource: Resource; fullUrl?: string }[] =
    input.resourceType === 'Bundle'
      ? ((input as Bundle).entry ?? []).filter((e): e is BundleEntry & { resource: Resource } => !!e.resource).map((e) => ({ resource: e.resource, fullUrl: e.fullUrl }))
      : [{ resource: input }];
  const entry: BundleEntry[] = resources.map(({ resource, fullUrl }, i) => {
    const id = resource.id ?? /^urn:uuid:([0-9a-f-]{36})$/i.exec(fullUrl ?? '')?.[1];
    if (!id) throw badRequest(`entry ${i} (${resource.resourceType}) has no id and no urn:uuid fullUrl to take one from`);
    return { fullUrl, resource: { ...resource, id }, request: { method: 'PUT', url: `${resource.resourceType}/${id}` } };
  });
  return { resourceType: 'Bundle', type: 'transaction', entry };
}

/** Loads resources into the store, one transaction per input, every write with origin `import`. */
export async function importResources(env: FhirEnv, input: Resource): Promise<number> {
  const bundle = toImportTransaction(input);
  const result = await processBundle({ method: 'POST', path: [], query: [], body: bundle, headers: {} }, { ...env, origin: 'import' });
  return result.entry?.length ?? 0;
}

export function readResourceFile(file: string): Resource {
  const text = fs.readFileSync(file, 'utf8');
  if (path.extname(file).toLowerCase() === '.xml' || text.trimStart().startsWith('<')) return fromXml(text);
  try {
    return parseJson(text) as Resource; // the REST layer's rules: BOM, repeated keys, depth
  } catch (err) {
    throw new Error(`${file}: not valid JSON (${(err as Error).message})`);
  }
}
