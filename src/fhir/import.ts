import fs from 'node:fs';
import path from 'node:path';
import type { Bundle, BundleEntry, OperationOutcomeIssue, Resource } from '@medplum/fhirtypes';
import { fromXml, parseJson } from '../model';
import type { FhirEnv } from './request';
import { badRequest, OperationOutcomeError } from '../server-lib/outcomes';
import { processBundle } from './transaction';

/** A resource of the input with where it stands there: `Bundle.entry[3] (Slot/x)`, or `Slot/x` alone. */
interface ImportSource {
  resource: Resource;
  fullUrl?: string;
  at: string;
}

/**
 * Turns a Bundle (transaction, batch or collection) or a single resource into a transaction of
 * PUTs that keep the ids (`terminus import`). Entries without an id get one
 * from their `urn:uuid:` fullUrl so references between them keep working.
 */
export function toImportTransaction(input: Resource): Bundle {
  return transactionOf(importSources(input));
}

/** Loads resources into the store, one transaction per input, every write with origin `import`. */
export async function importResources(env: FhirEnv, input: Resource): Promise<number> {
  const sources = importSources(input);
  try {
    const result = await processBundle({ method: 'POST', path: [], query: [], body: transactionOf(sources), headers: {} }, { ...env, origin: 'import' });
    return result.entry?.length ?? 0;
  } catch (err) {
    if (err instanceof OperationOutcomeError) throw new OperationOutcomeError(err.status, err.issues.map((i) => inInput(i, sources)), err.headers);
    throw err;
  }
}

function importSources(input: Resource): ImportSource[] {
  if (input.resourceType !== 'Bundle') return [{ resource: input, at: named(input) }];
  const entries = (input as Bundle).entry ?? [];
  return entries.flatMap((e, i) => (e.resource ? [{ resource: e.resource, fullUrl: e.fullUrl, at: `Bundle.entry[${i}] (${named(e.resource)})` }] : []));
}

function named(resource: Resource): string {
  return resource.id ? `${resource.resourceType}/${resource.id}` : String(resource.resourceType);
}

function transactionOf(sources: ImportSource[]): Bundle {
  const entry: BundleEntry[] = sources.map(({ resource, fullUrl, at }) => {
    const id = resource.id ?? /^urn:uuid:([0-9a-f-]{36})$/i.exec(fullUrl ?? '')?.[1];
    if (!id) throw badRequest(`${at} has no id and no urn:uuid fullUrl to take one from`);
    return { fullUrl, resource: { ...resource, id }, request: { method: 'PUT', url: `${resource.resourceType}/${id}` } };
  });
  return { resourceType: 'Bundle', type: 'transaction', entry };
}

/**
 * The transaction names an entry by its place in the import transaction (`Bundle.entry[0]: …`,
 * fhir/transaction.ts); the operator knows the file, where entries without a resource are skipped
 * and a single resource has no entry: name the entry of the file and the resource instead.
 */
function inInput(issue: OperationOutcomeIssue, sources: ImportSource[]): OperationOutcomeIssue {
  const m = /^Bundle\.entry\[(\d+)\]: ([\s\S]*)$/.exec(issue.diagnostics ?? '');
  const source = m ? sources[Number(m[1])] : undefined;
  return source ? { ...issue, diagnostics: `${source.at}: ${m![2]}` } : issue;
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
