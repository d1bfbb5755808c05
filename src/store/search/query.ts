/**
 * A parsed FHIR search, as the store executes it (store/search/sql.ts). The FHIR layer parses
 * the query string into it (fhir/search-request.ts).
 */

/** One link of a chain: `schedule` or `actor:HealthcareService`. */
export interface ChainLink {
  param: string;
  targetType?: string;
}

export interface Filter {
  /** Reference parameters walked before `param` (`schedule.actor=...`). */
  chain: ChainLink[];
  /** `_has:Type:ref:` reverse chain: resources of `type` whose `param` points here. */
  has?: { type: string; param: string };
  param: string;
  modifier?: string;
  /** OR-ed values (comma-separated in the query); AND-ed when `allOf`. */
  values: string[];
  /** Merged repeats of a date parameter: one value must satisfy every condition. */
  allOf?: boolean;
  /** The parameter's type at the end of the chain. */
  kind?: string;
}

export interface IncludeSpec {
  type: string;
  param: string;
  targetType?: string;
}

export interface SortSpec {
  param: string;
  descending: boolean;
}

export interface SearchRequest {
  resourceType: string;
  filters: Filter[];
  count: number;
  offset: number;
  sort: SortSpec[];
  include: IncludeSpec[];
  revinclude: IncludeSpec[];
  /** `_summary=count` or `_count=0`: total only. */
  totalOnly: boolean;
  /** `_summary=true|text|data`: the matches are returned subsetted (`false`: left out). */
  summary?: 'true' | 'text' | 'data';
  /** `_elements`: top-level element names the matches are cut down to. */
  elements?: string[];
}

/** FHIR date search prefixes (R4 search.html#prefix). */
const DATE_PREFIXES = ['eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap'];

/** `ge2026-01-01` -> ['ge', '2026-01-01']; no prefix means `eq`. */
export function splitDatePrefix(value: string): [string, string] {
  const prefix = value.slice(0, 2);
  return DATE_PREFIXES.includes(prefix) && /^\d/.test(value.slice(2)) ? [prefix, value.slice(2)] : ['eq', value];
}
