import { isFhirId } from '../../server-lib/fhir-id';
import { PROTOTYPE_KEYS } from '../formats/limits';
import { isResourceType } from '../../server-lib/medplum';
import { syntaxError, type Finding } from './finding';


/**
 * The checks that decide whether the body is a FHIR resource at all, before any definition is
 * consulted: a JSON object with a known, concrete `resourceType`.
 */
export function checkResourceShape(resource: unknown): Finding[] {
  if (resource === null || typeof resource !== 'object' || Array.isArray(resource)) {
    return [syntaxError('$this', 'The body is not a JSON object (R4 json.html: a resource is a JSON object)')];
  }
  const type = (resource as { resourceType?: unknown }).resourceType;
  if (type === undefined) {
    return [syntaxError('resourceType', 'Missing resourceType (R4 json.html: every resource names its type)')];
  }
  if (typeof type !== 'string' || !isResourceType(type)) {
    return [syntaxError('resourceType', `Unknown resourceType ${JSON.stringify(type)}`)];
  }
  return [];
}

/**
 * JSON rules medplum's validator lets through: empty strings (R4 json.html: "string property
 * values can never be empty") and malformed ids, in the resource and every nested resource.
 */
export function checkJsonRules(resource: Record<string, unknown>): Finding[] {
  const findings: Finding[] = [];
  walk(resource, String(resource.resourceType), findings, true);
  return findings;
}

function walk(value: unknown, path: string, findings: Finding[], isResource: boolean): void {
  if (typeof value === 'string') {
    if (value === '') findings.push(syntaxError(path, 'Empty string: omit the element instead (R4 json.html)'));
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((item, i) => walk(item, `${path}[${i}]`, findings, false));
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const object = value as Record<string, unknown>;
  const nestedResource = isResource || typeof object.resourceType === 'string';
  if (nestedResource && object.id !== undefined && (typeof object.id !== 'string' || !isFhirId(object.id))) {
    findings.push(syntaxError(`${path}.id`, `Invalid id ${JSON.stringify(object.id)} (R4 datatypes.html#id)`, 'value'));
  }
  for (const [key, child] of Object.entries(object)) {
    if (key === 'resourceType') continue;
    walk(child, `${path}.${key}`, findings, false);
  }
}

/**
 * Keys named like Object.prototype members (`__proto__`, `constructor`, `toString`, ...): no FHIR
 * element has one, and a definition lookup by plain object would find the prototype's member
 * instead of "unknown element". Checked before any definition is consulted;
 * XML bodies and patch results come here too, not only JSON text. Iterative: any depth.
 */
export function checkPropertyNames(resource: Record<string, unknown>): Finding[] {
  const findings: Finding[] = [];
  const pending: [unknown, string][] = [[resource, String(resource.resourceType)]];
  while (pending.length) {
    const [value, path] = pending.pop()!;
    if (Array.isArray(value)) {
      value.forEach((item, i) => pending.push([item, `${path}[${i}]`]));
    } else if (value !== null && typeof value === 'object') {
      for (const key of Object.keys(value)) {
        if (PROTOTYPE_KEYS.has(key)) findings.push(syntaxError(`${path}.${key}`, `Property name '${key}' is not allowed (no FHIR element has it)`));
        else pending.push([(value as Record<string, unknown>)[key], `${path}.${key}`]);
      }
    }
  }
  return findings;
}
