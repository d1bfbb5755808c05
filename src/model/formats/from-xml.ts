import type { Resource } from '@medplum/fhirtypes';
import { FhirXmlError } from './errors';
import {
  type ComplexTypeInfo,
  type JsonPrimitive,
  type Slot,
  type StructureModel,
  structureModel,
} from './structure-model';
import { serializeXhtml } from './xhtml';
import { type XmlElement, parseXmlDocument } from './xml-document';
import { FHIR_NS, XHTML_NS, clip, decodeAttribute } from './xml-text';

type JsonObject = Record<string, unknown>;

// FHIR R4 datatypes.html regular expressions for the JSON-number primitives.
const INTEGER = /^-?(0|[1-9][0-9]*)$/;
const DECIMAL = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;
// R4 integer is 32-bit signed; unsignedInt and positiveInt share its upper bound.
const INTEGER_RANGES: Readonly<Record<string, readonly [number, number]>> = {
  integer: [-2147483648, 2147483647],
  unsignedInt: [0, 2147483647],
  positiveInt: [1, 2147483647],
};

/**
 * FHIR R4 XML -> JSON (R4 json.html): numbers and booleans become JSON types per element type,
 * repeating elements arrays, a primitive's id/extensions go to `_name`. Strict: unknown
 * elements, foreign namespaces, stray text and repeated singletons are rejected with
 * FhirXmlError (400 `structure`), as are malformed XML, DTDs and entities other than XML's own,
 * and elements out of definition order (R4 xml.html: the element order of the definitions is
 * part of the format); decimals keep their value, not their lexical form (`1.50` -> 1.5).
 */
export function fromXml(xml: string): Resource {
  const root = parseXmlDocument(xml);
  if (root.ns !== FHIR_NS) {
    throw new FhirXmlError(
      `Root element must be in the FHIR namespace ${FHIR_NS}, found ${root.ns === undefined ? 'no namespace' : clip(root.ns)}`,
    );
  }
  return new XmlReader(structureModel()).resource(root, root.local) as unknown as Resource;
}

interface Collected {
  slot: Slot;
  values: unknown[];
  extras: (JsonObject | null)[];
}

class XmlReader {
  constructor(private readonly model: StructureModel) {}

  resource(element: XmlElement, path: string): JsonObject {
    if (!this.model.isResourceType(element.local)) {
      throw new FhirXmlError(`Unknown resource type '${clip(element.local)}'`, clip(path, 200));
    }
    return { resourceType: element.local, ...this.complex(element, this.model.type(element.local) as ComplexTypeInfo, path) };
  }

  private readonly positions = new WeakMap<ComplexTypeInfo, Map<string, number>>();

  /** Index of an element in its type's definition order. */
  private position(type: ComplexTypeInfo, name: string): number {
    let byName = this.positions.get(type);
    if (!byName) {
      byName = new Map(type.elements.map((e, i) => [e.name, i]));
      this.positions.set(type, byName);
    }
    return byName.get(name) ?? -1;
  }

  private complex(element: XmlElement, type: ComplexTypeInfo, path: string): JsonObject {
    const attributes: JsonObject = {};
    for (const attribute of element.attributes) {
      if (attribute.ns !== undefined) continue; // xmlns declarations, xsi:* and other foreign attributes
      const slot = type.slots.get(attribute.local);
      if (slot === undefined || !slot.element.xmlAttr) {
        throw new FhirXmlError(`Unknown attribute '${clip(attribute.local)}' on ${path}`, path);
      }
      attributes[attribute.local] = nonEmpty(decodeAttribute(attribute.raw, path), `${path}.${attribute.local}`);
    }

    const collected = new Map<string, Collected>();
    let lastPosition = -1;
    let lastName = '';
    for (const child of element.children) {
      if (child.kind !== 'element') {
        if (child.kind === 'text' && child.raw.trim() === '') continue;
        throw new FhirXmlError(`Unexpected text content in ${path}`, path);
      }
      const childPath = `${path}.${clip(child.local)}`;
      const slot = type.slots.get(child.local);
      if (slot === undefined || slot.element.xmlAttr) {
        throw new FhirXmlError(`Unknown element '${clip(child.local)}' in ${path}`, childPath);
      }
      // R4 xml.html: elements appear in the order the definition gives, repeats side by side.
      const position = this.position(type, slot.element.name);
      if (position < lastPosition) {
        throw new FhirXmlError(`Element '${clip(child.local)}' in ${path} is out of order: it must come before '${lastName}'`, childPath);
      }
      lastPosition = position;
      lastName = child.local;
      const childType = this.model.type(slot.typeName);
      const expectedNs = childType.kind === 'xhtml' ? XHTML_NS : FHIR_NS;
      if (child.ns !== expectedNs) {
        throw new FhirXmlError(`Element '${child.local}' in ${path} must be in namespace ${expectedNs}`, childPath);
      }

      const entry = collected.get(slot.element.name) ?? { slot, values: [], extras: [] };
      if (entry.slot !== slot) {
        throw new FhirXmlError(`More than one type given for ${slot.element.name}[x] in ${path}`, childPath);
      }
      if (!slot.element.isArray && entry.values.length > 0) {
        throw new FhirXmlError(`Element '${child.local}' must not repeat in ${path}`, childPath);
      }
      collected.set(slot.element.name, entry);

      switch (childType.kind) {
        case 'primitive': {
          const { value, extras } = this.primitive(child, childType.name, childType.json, childPath);
          entry.values.push(value);
          entry.extras.push(extras);
          break;
        }
        case 'xhtml':
          entry.values.push(serializeXhtml(child, childPath));
          break;
        case 'any-resource':
        case 'resource':
          entry.values.push(this.wrappedResource(child, childType.kind === 'resource' ? childType.name : undefined, childPath));
          break;
        case 'complex':
          entry.values.push(this.complex(child, childType, childPath));
      }
    }

    // Definition order, `_name` right after `name`: the shape FHIR JSON writers produce.
    const result: JsonObject = {};
    for (const definition of type.elements) {
      if (definition.xmlAttr) {
        if (attributes[definition.name] !== undefined) result[definition.name] = attributes[definition.name];
        continue;
      }
      const entry = collected.get(definition.name);
      if (entry === undefined) continue;
      const { slot, values, extras } = entry;
      const isArray = slot.element.isArray;
      if (values.some((v) => v !== null)) result[slot.name] = isArray ? values : values[0];
      if (extras.some((e) => e !== null)) result[`_${slot.name}`] = isArray ? extras : extras[0];
    }
    return result;
  }

  private wrappedResource(wrapper: XmlElement, requiredType: string | undefined, path: string): JsonObject {
    if (wrapper.attributes.some((a) => a.ns === undefined)) {
      throw new FhirXmlError(`Unexpected attribute on ${path}`, path);
    }
    const inner = wrapper.children.filter((child) => {
      if (child.kind === 'element') return true;
      if (child.kind === 'text' && child.raw.trim() === '') return false;
      throw new FhirXmlError(`Unexpected text content in ${path}`, path);
    }) as XmlElement[];
    const [resource] = inner;
    if (inner.length !== 1 || resource === undefined) {
      throw new FhirXmlError(`${path} must contain exactly one resource`, path);
    }
    if (resource.ns !== FHIR_NS) {
      throw new FhirXmlError(`Resource in ${path} must be in namespace ${FHIR_NS}`, path);
    }
    if (requiredType !== undefined && resource.local !== requiredType) {
      throw new FhirXmlError(`${path} must hold a ${requiredType}, found ${clip(resource.local)}`, path);
    }
    return this.resource(resource, `${path}.${clip(resource.local)}`);
  }

  private primitive(
    element: XmlElement,
    typeName: string,
    json: JsonPrimitive,
    path: string,
  ): { value: unknown; extras: JsonObject | null } {
    let value: unknown = null;
    const extras: JsonObject = {};
    for (const attribute of element.attributes) {
      if (attribute.ns !== undefined) continue;
      const text = nonEmpty(decodeAttribute(attribute.raw, path), `${path}.${attribute.local}`);
      if (attribute.local === 'value') value = jsonValue(text, typeName, json, path);
      else if (attribute.local === 'id') extras.id = text;
      else throw new FhirXmlError(`Unknown attribute '${clip(attribute.local)}' on ${path}`, path);
    }

    const extensionType = this.model.type('Extension') as ComplexTypeInfo;
    const extensions: JsonObject[] = [];
    for (const child of element.children) {
      if (child.kind === 'element' && child.local === 'extension' && child.ns === FHIR_NS) {
        extensions.push(this.complex(child, extensionType, `${path}.extension`));
      } else if (child.kind !== 'text' || child.raw.trim() !== '') {
        throw new FhirXmlError(`Only extensions may appear inside primitive element ${path}`, path);
      }
    }
    if (extensions.length > 0) extras.extension = extensions;

    const hasExtras = Object.keys(extras).length > 0;
    // R4 xml.html: a primitive element has a value, extensions, or both.
    if (value === null && !hasExtras) throw new FhirXmlError(`Element ${path} has neither value nor extension`, path);
    return { value, extras: hasExtras ? extras : null };
  }
}

function jsonValue(text: string, typeName: string, json: JsonPrimitive, path: string): string | number | boolean {
  switch (json) {
    case 'string':
      return text;
    case 'boolean':
      if (text === 'true' || text === 'false') return text === 'true';
      throw new FhirXmlError(`Invalid boolean '${clip(text)}' at ${path}`, path);
    case 'number': {
      const number = Number(text);
      const [min, max] = INTEGER_RANGES[typeName] ?? [-Infinity, Infinity];
      const valid =
        (typeName === 'decimal' ? DECIMAL : INTEGER).test(text) && Number.isFinite(number) && number >= min && number <= max;
      if (!valid) throw new FhirXmlError(`Invalid ${typeName} '${clip(text)}' at ${path}`, path);
      return number;
    }
  }
}

// R4 xml.html: attributes SHALL never be empty.
function nonEmpty(value: string, path: string): string {
  if (value === '') throw new FhirXmlError(`Empty attribute at ${path}`, path);
  return value;
}
