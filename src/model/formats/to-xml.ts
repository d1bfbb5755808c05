import type { Resource } from '@medplum/fhirtypes';
import { FhirXmlError, XmlSerializationError } from './errors';
import { type ComplexTypeInfo, type ElementInfo, type Slot, type StructureModel, structureModel } from './structure-model';
import { normalizeXhtml } from './xhtml';
import { FHIR_NS, containsNonXmlChar, escapeAttribute } from './xml-text';

type JsonObject = Record<string, unknown>;

// Guards our recursion against pathological JSON; real resources stay far below.
const MAX_DEPTH = 100;

/**
 * FHIR R4 JSON -> XML (R4 xml.html): elements in definition order, primitives as `value`
 * attributes with their `_name` id/extensions merged in, repeating elements repeated, resources
 * inside `contained`, `Bundle.entry.resource` and `Parameters.parameter.resource` wrapped in an
 * element named after their type, `Narrative.div` inline as XHTML.
 *
 * Throws XmlSerializationError (a server bug, 500) when the input is not a valid R4 resource shape.
 */
export function toXml(resource: Resource): string {
  const writer = new XmlWriter(structureModel());
  writer.resource(resource as unknown as JsonObject, resource.resourceType ?? '', ` xmlns="${FHIR_NS}"`, 0);
  return `<?xml version="1.0" encoding="UTF-8"?>${writer.output()}`;
}

class XmlWriter {
  private readonly parts: string[] = [];

  constructor(private readonly model: StructureModel) {}

  output(): string {
    return this.parts.join('');
  }

  resource(value: unknown, path: string, rootAttributes: string, depth: number): void {
    const object = expectObject(value, path);
    const type = object.resourceType;
    if (typeof type !== 'string' || !this.model.isResourceType(type)) {
      throw new XmlSerializationError(`Unknown resourceType ${JSON.stringify(type)}`, path);
    }
    this.complex(type, object, this.model.type(type) as ComplexTypeInfo, path, rootAttributes, depth);
  }

  private complex(
    tag: string,
    object: JsonObject,
    type: ComplexTypeInfo,
    path: string,
    rootAttributes: string,
    depth: number,
  ): void {
    if (depth > MAX_DEPTH) throw new XmlSerializationError(`Nesting deeper than ${MAX_DEPTH}`, path);
    checkKeys(object, type, path);

    let open = `<${tag}${rootAttributes}`;
    for (const element of type.elements) {
      if (!element.xmlAttr || object[element.name] === undefined) continue;
      open += ` ${element.name}="${escapeAttribute(expectString(object[element.name], `${path}.${element.name}`))}"`;
    }
    this.parts.push(open);
    const contentStart = this.parts.length;
    this.parts.push('>');

    for (const element of type.elements) {
      if (!element.xmlAttr) this.element(element, object, path, depth);
    }

    if (this.parts.length === contentStart + 1) this.parts[contentStart] = '/>';
    else this.parts.push(`</${tag}>`);
  }

  private element(element: ElementInfo, object: JsonObject, path: string, depth: number): void {
    const present = element.slots.filter((slot) => object[slot.name] !== undefined || object[`_${slot.name}`] !== undefined);
    if (present.length > 1) {
      throw new XmlSerializationError(`More than one type given for ${element.name}[x]`, path);
    }
    const [slot] = present;
    if (slot === undefined) return;

    const itemPath = `${path}.${slot.name}`;
    const value = object[slot.name];
    const type = this.model.type(slot.typeName);

    if (type.kind === 'primitive') {
      const extras = object[`_${slot.name}`];
      if (!element.isArray) {
        this.primitive(slot, value, extras, type.json, itemPath, depth);
        return;
      }
      const values = value === undefined ? [] : expectArray(value, itemPath);
      const extraList = extras === undefined ? [] : expectArray(extras, `${path}._${slot.name}`);
      const count = Math.max(values.length, extraList.length);
      for (let i = 0; i < count; i++) {
        this.primitive(slot, values[i], extraList[i], type.json, `${itemPath}[${i}]`, depth);
      }
      return;
    }
    if (object[`_${slot.name}`] !== undefined) {
      throw new XmlSerializationError(`_${slot.name} is only allowed for primitive elements`, path);
    }

    const items = element.isArray ? expectArray(value, itemPath) : [value];
    items.forEach((item, i) => {
      const at = element.isArray ? `${itemPath}[${i}]` : itemPath;
      switch (type.kind) {
        case 'xhtml':
          this.parts.push(xhtml(item, at));
          return;
        case 'any-resource':
        case 'resource':
          this.parts.push(`<${slot.name}>`);
          this.resource(item, at, '', depth + 1);
          this.parts.push(`</${slot.name}>`);
          return;
        case 'complex':
          this.complex(slot.name, expectObject(item, at), type, at, '', depth + 1);
      }
    });
  }

  private primitive(
    slot: Slot,
    value: unknown,
    extras: unknown,
    json: 'boolean' | 'number' | 'string',
    path: string,
    depth: number,
  ): void {
    if ((value === undefined || value === null) && (extras === undefined || extras === null)) return;

    let open = `<${slot.name}`;
    let extensions: unknown[] = [];
    if (extras !== undefined && extras !== null) {
      const { id, extension, ...rest } = expectObject(extras, path);
      const unknown = Object.keys(rest)[0];
      if (unknown !== undefined) throw new XmlSerializationError(`Unknown property ${unknown} in _${slot.name}`, path);
      if (id !== undefined) open += ` id="${escapeAttribute(expectString(id, `${path}.id`))}"`;
      if (extension !== undefined) extensions = expectArray(extension, `${path}.extension`);
    }
    if (value !== undefined && value !== null) {
      open += ` value="${escapeAttribute(primitiveText(value, json, path))}"`;
    }
    if (extensions.length === 0) {
      this.parts.push(`${open}/>`);
      return;
    }
    this.parts.push(`${open}>`);
    const extensionType = this.model.type('Extension') as ComplexTypeInfo;
    extensions.forEach((ext, i) => {
      const at = `${path}.extension[${i}]`;
      this.complex('extension', expectObject(ext, at), extensionType, at, '', depth + 1);
    });
    this.parts.push(`</${slot.name}>`);
  }
}

function checkKeys(object: JsonObject, type: ComplexTypeInfo, path: string): void {
  for (const key of Object.keys(object)) {
    if (key === 'resourceType' && type.kind === 'resource') continue;
    const name = key.startsWith('_') ? key.slice(1) : key;
    if (!type.slots.has(name)) throw new XmlSerializationError(`Unknown element ${key}`, path);
  }
}

function primitiveText(value: unknown, json: 'boolean' | 'number' | 'string', path: string): string {
  if (typeof value !== json) throw new XmlSerializationError(`Expected a JSON ${json}`, path);
  if (json === 'number' && !Number.isFinite(value)) throw new XmlSerializationError('Number is not finite', path);
  const text = String(value);
  if (text === '') throw new XmlSerializationError('Empty string', path);
  if (containsNonXmlChar(text)) throw new XmlSerializationError('Character not representable in XML', path);
  return text;
}

function xhtml(value: unknown, path: string): string {
  try {
    return normalizeXhtml(expectString(value, path), path);
  } catch (error) {
    if (error instanceof FhirXmlError) throw new XmlSerializationError(error.message, path);
    throw error;
  }
}

function expectObject(value: unknown, path: string): JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new XmlSerializationError('Expected a JSON object', path);
  }
  return value as JsonObject;
}

function expectArray(value: unknown, path: string): unknown[] {
  if (!Array.isArray(value)) throw new XmlSerializationError('Expected a JSON array', path);
  return value;
}

function expectString(value: unknown, path: string): string {
  if (typeof value !== 'string') throw new XmlSerializationError('Expected a JSON string', path);
  if (containsNonXmlChar(value)) throw new XmlSerializationError('Character not representable in XML', path);
  return value;
}
