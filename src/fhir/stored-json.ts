import type { BundleEntry, Resource } from '@medplum/fhirtypes';

/**
 * Bundle entries whose resource is written as the store keeps it
 * (docs/requirements.md#performance-aims): a search answer copies each match's stored JSON text
 * into its bytes instead of parsing it and writing it again. The entry's `resource` is still there
 * for everyone else (XML, `_pretty`, a batch answer, a job's result): a getter that parses on
 * first use. The text is PostgreSQL's writing of the stored
 * `jsonb` (a space after `:` and `,`), which is JSON all the same.
 */
const storedText = new WeakMap<BundleEntry, string>();

/** An entry `{ fullUrl, resource, search }` whose resource is `json`; `resource()` parses it when asked. */
export function storedEntry(fullUrl: string, json: string, resource: () => Resource, search: BundleEntry['search']): BundleEntry {
  const entry: BundleEntry = {
    fullUrl,
    get resource() {
      return resource();
    },
    search,
  };
  storedText.set(entry, json);
  return entry;
}

/** `JSON.stringify(body)`, with the stored text of stored entries copied in place of their resource. */
export function jsonText(body: Resource): string {
  if (body.resourceType !== 'Bundle' || !body.entry?.some((e) => storedText.has(e))) return JSON.stringify(body);
  const { entry, ...rest } = body;
  const head = JSON.stringify(rest);
  const entries = entry!.map((e) => {
    const json = storedText.get(e);
    if (json === undefined) return JSON.stringify(e);
    const search = e.search === undefined ? '' : `,"search":${JSON.stringify(e.search)}`;
    return `{"fullUrl":${JSON.stringify(e.fullUrl)},"resource":${json}${search}}`;
  });
  return `${head.slice(0, -1)},"entry":[${entries.join(',')}]}`;
}
