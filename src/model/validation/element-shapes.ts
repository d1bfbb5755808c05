import { tryGetDataType, type InternalTypeSchema } from '../../server-lib/medplum';
import { unrepresentableCharacter } from '../../server-lib/characters';
import { syntaxError, type Finding } from './finding';

/** More findings than this say nothing new: the body is the wrong shape. */
const MAX_FINDINGS = 20;
const MAX_DEPTH = 128;

/**
 * JSON shapes medplum's validator does not enforce (it lets `identifier: [1, 2, 3]` through, so an
 * unreadable resource got stored) or crashes on (`_gender: "x"`, `_status: [null]`): every element
 * of a complex type is a JSON object; a repeating element is a JSON array and a single one is not;
 * every primitive's extension sibling `_name` is an object or null, or for repeating primitives an
 * array of them (R4 json.html "Representing primitive elements"); and no string holds a character
 * that XML cannot carry (R4 datatypes.html: no control characters but tab, CR and LF), so that
 * whatever is stored can be read in either format.
 * Driven by the R4 type schema; unknown elements are left to the validator.
 */
export function checkElementShapes(resource: Record<string, unknown>): Finding[] {
  const findings: Finding[] = [];
  const schema = tryGetDataType(String(resource.resourceType));
  if (schema) walk(resource, schema, String(resource.resourceType), findings, 0);
  return findings;
}

function walk(value: Record<string, unknown>, schema: InternalTypeSchema, path: string, findings: Finding[], depth: number): void {
  // The JSON reader already refuses bodies nested over 100 objects: this bound is never the one that
  // stops a body, but a shape left unchecked must not pass either.
  if (depth > MAX_DEPTH) {
    findings.push(syntaxError(path, `${path} is nested deeper than ${MAX_DEPTH} elements`));
    return;
  }
  for (const [key, child] of Object.entries(value)) {
    if (findings.length >= MAX_FINDINGS) return;
    if (child === undefined || (key === 'resourceType' && schema.kind === 'resource')) continue;
    const where = `${path}.${key}`;
    if (key.startsWith('_')) {
      const base = typeCode(schema, key.slice(1));
      if (!isKnown(schema, key.slice(1))) findings.push(syntaxError(where, `Invalid additional property "${key}"`));
      else if (base && isComplex(base)) findings.push(syntaxError(where, `${where}: only a primitive element has a "_" sibling (${key.slice(1)} is a ${base})`));
      else if (primitiveExtensionIsObject(child, repeats(schema, key.slice(1)), where, findings)) {
        // What it holds is an Element's: an id and extensions, nothing else.
        const element = tryGetDataType('Element');
        const items = Array.isArray(child) ? child : [child];
        items.forEach((item, i) => item && element && walk(item as Record<string, unknown>, element, Array.isArray(child) ? `${where}[${i}]` : where, findings, depth + 1));
      }
      continue;
    }
    const code = typeCode(schema, key);
    if (!code) {
      // Unknown here, found cheaply: a body of 100,000 unknown keys costs 20 findings, not 100,000.
      if (!isKnown(schema, key)) findings.push(syntaxError(where, `Invalid additional property "${key}"`));
      continue;
    }
    if (Array.isArray(child) !== repeats(schema, key)) {
      findings.push(syntaxError(where, Array.isArray(child) ? `${where} must not be an array (the element does not repeat)` : `${where} must be a JSON array (the element repeats)`));
      continue;
    }
    if (!isComplex(code)) {
      primitiveHasJsonType(child, code, where, findings);
      continue;
    }
    const items = Array.isArray(child) ? child : [child];
    items.forEach((item, i) => {
      const at = Array.isArray(child) ? `${where}[${i}]` : where;
      if (item === null || typeof item !== 'object' || Array.isArray(item)) {
        findings.push(syntaxError(at, `${at} must be a JSON object (type ${code}), got ${Array.isArray(item) ? 'an array' : item === null ? 'null' : typeof item}`));
        return;
      }
      const inner = innerSchema(schema, key, code, item as Record<string, unknown>);
      if (inner) walk(item as Record<string, unknown>, inner, at, findings, depth + 1);
    });
  }
}

function primitiveExtensionIsObject(child: unknown, repeating: boolean, where: string, findings: Finding[]): boolean {
  const ok = (v: unknown) => v === null || (typeof v === 'object' && !Array.isArray(v));
  if (repeating ? Array.isArray(child) && child.every(ok) : ok(child)) return true;
  findings.push(syntaxError(where, repeating ? `${where} must be an array of objects holding id and extensions (the element repeats)` : `${where} must be an object holding id and extensions`));
  return false;
}

/** Whether a property (a plain element or one choice of a `[x]` element) may repeat. */
function repeats(schema: InternalTypeSchema, key: string): boolean {
  const element = schema.elements[key] ?? Object.entries(schema.elements).find(([name]) => name.endsWith('[x]') && key.startsWith(name.slice(0, -3)))?.[1];
  return Boolean(element?.isArray);
}

/** A property the type defines: a plain element or one choice of a `[x]` element. */
function isKnown(schema: InternalTypeSchema, key: string): boolean {
  if (schema.elements[key]) return true;
  return Object.entries(schema.elements).some(([name, el]) => name.endsWith('[x]') && key.startsWith(name.slice(0, -3)) && el.type.some((t) => name.slice(0, -3) + t.code.charAt(0).toUpperCase() + t.code.slice(1) === key));
}

/** R4 json.html: booleans are JSON booleans, integers and decimals JSON numbers, every other primitive a JSON string. */
function primitiveHasJsonType(child: unknown, code: string, where: string, findings: Finding[]): void {
  const expected = code === 'boolean' ? 'boolean' : NUMERIC.has(code) ? 'number' : 'string';
  const items = Array.isArray(child) ? child : [child];
  items.forEach((item, i) => {
    // null holds a place in a repeating primitive whose `_name` array carries the extension.
    if (findings.length >= MAX_FINDINGS || (item === null && Array.isArray(child))) return;
    const at = Array.isArray(child) ? `${where}[${i}]` : where;
    if (typeof item === expected) {
      const bad = typeof item === 'string' ? unrepresentableCharacter(item) : undefined;
      if (bad) findings.push(syntaxError(at, `${at} holds the character ${bad}, which FHIR strings cannot carry (R4 datatypes.html)`));
      return;
    }
    findings.push(syntaxError(at, `${at} must be a JSON ${expected} (type ${code.replace('http://hl7.org/fhirpath/System.', '')}), got ${item === null ? 'null' : Array.isArray(item) ? 'an array' : typeof item}`));
  });
}

const NUMERIC = new Set(['integer', 'decimal', 'positiveInt', 'unsignedInt', 'integer64', 'http://hl7.org/fhirpath/System.Integer', 'http://hl7.org/fhirpath/System.Decimal']);

/** The type code of a property: a plain element, or one choice of a `[x]` element (valueQuantity). */
function typeCode(schema: InternalTypeSchema, key: string): string | undefined {
  const element = schema.elements[key];
  if (element) return element.type.length === 1 ? element.type[0].code : undefined;
  for (const [name, el] of Object.entries(schema.elements)) {
    if (!name.endsWith('[x]')) continue;
    const base = name.slice(0, -3);
    if (!key.startsWith(base)) continue;
    const t = el.type.find((x) => base + x.code.charAt(0).toUpperCase() + x.code.slice(1) === key);
    if (t) return t.code;
  }
  return undefined;
}

/** Complex types start with a capital letter (Identifier, BackboneElement, Resource); primitives do not. */
function isComplex(code: string): boolean {
  return /^[A-Z]/.test(code);
}

function innerSchema(schema: InternalTypeSchema, key: string, code: string, item: Record<string, unknown>): InternalTypeSchema | undefined {
  if (code === 'BackboneElement' || code === 'Element') {
    const path = `${schema.path || schema.type}.${key}`;
    return schema.innerTypes.find((t) => t.path === path || t.name === path);
  }
  if (code === 'Resource') return typeof item.resourceType === 'string' ? tryGetDataType(item.resourceType) : undefined;
  return tryGetDataType(code);
}
