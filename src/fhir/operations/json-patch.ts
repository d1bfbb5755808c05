import type { Resource } from '@medplum/fhirtypes';
import { malformed, PatchError, unappliable } from './patch-error';

/** JSON Patch (RFC 6902) on a copy of the document: add, remove, replace, move, copy, test. */
export function applyJsonPatch<T>(document: T, patch: unknown): T {
  if (!Array.isArray(patch)) throw malformed('A JSON Patch is an array of operations', undefined, 'structure');
  let doc: unknown = structuredClone(document);
  patch.forEach((op: unknown, i) => {
    doc = applyOne(doc, op, i);
  });
  return doc as T;
}

/** Elements a PATCH may not touch: the store owns them. */
const PROTECTED = ['/id', '/resourceType', '/meta/versionId', '/meta/lastUpdated'];

/** JSON Patch of a FHIR resource: as applyJsonPatch, with id, type and version left alone. */
export function applyJsonPatchToResource<T extends Resource>(resource: T, patch: unknown): T {
  if (Array.isArray(patch)) {
    for (const [i, op] of patch.entries()) {
      for (const pointer of [(op as { path?: unknown })?.path, (op as { from?: unknown })?.from]) {
        if (typeof pointer === 'string' && PROTECTED.some((p) => pointer === p || pointer.startsWith(`${p}/`)) && (op as { op?: string }).op !== 'test') {
          throw unappliable(`operation ${i}: ${pointer} is managed by the server and cannot be patched`, pointer, 'invalid');
        }
      }
    }
  }
  return applyJsonPatch(resource, patch);
}

interface Op {
  op: string;
  path: string;
  from?: string;
  value?: unknown;
}

function applyOne(doc: unknown, raw: unknown, i: number): unknown {
  const op = raw as Op;
  if (!op || typeof op !== 'object' || typeof op.op !== 'string' || typeof op.path !== 'string') {
    throw malformed(`operation ${i}: op and path are required`, undefined, 'required');
  }
  const needsValue = op.op === 'add' || op.op === 'replace' || op.op === 'test';
  if (needsValue && !('value' in op)) throw malformed(`operation ${i}: ${op.op} needs a value`, op.path, 'required');
  if ((op.op === 'move' || op.op === 'copy') && typeof op.from !== 'string') throw malformed(`operation ${i}: ${op.op} needs from`, op.path, 'required');
  switch (op.op) {
    case 'add':
      return add(doc, pointer(op.path, i), structuredClone(op.value), i);
    case 'remove':
      return remove(doc, pointer(op.path, i), i).doc;
    case 'replace':
      get(doc, pointer(op.path, i), i);
      return add(remove(doc, pointer(op.path, i), i).doc, pointer(op.path, i), structuredClone(op.value), i);
    case 'move': {
      if (op.path.startsWith(`${op.from}/`)) throw unappliable(`operation ${i}: cannot move ${op.from} into its own child`, op.path);
      const taken = remove(doc, pointer(op.from!, i), i);
      return add(taken.doc, pointer(op.path, i), taken.value, i);
    }
    case 'copy':
      return add(doc, pointer(op.path, i), structuredClone(get(doc, pointer(op.from!, i), i)), i);
    case 'test':
      if (!deepEqual(get(doc, pointer(op.path, i), i), op.value)) throw new PatchError(409, 'conflict', `operation ${i}: test failed at ${op.path}`, op.path);
      return doc;
    default:
      throw malformed(`operation ${i}: unknown op "${op.op}"`, op.path, 'code-invalid');
  }
}

/** RFC 6901 JSON Pointer to reference tokens. */
function pointer(path: string, i: number): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw malformed(`operation ${i}: "${path}" is not a JSON Pointer`, path);
  return path
    .slice(1)
    .split('/')
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function get(doc: unknown, tokens: string[], i: number): unknown {
  let node = doc;
  for (const t of tokens) {
    node = child(node, t, i, tokens);
  }
  return node;
}

function child(node: unknown, token: string, i: number, tokens: string[]): unknown {
  if (Array.isArray(node)) {
    const idx = arrayIndex(token, node.length - 1, i, tokens);
    return node[idx];
  }
  if (node && typeof node === 'object' && Object.prototype.hasOwnProperty.call(node, token)) return (node as Record<string, unknown>)[token];
  throw unappliable(`operation ${i}: path /${tokens.join('/')} does not exist`, `/${tokens.join('/')}`);
}

function arrayIndex(token: string, max: number, i: number, tokens: string[]): number {
  if (!/^(0|[1-9][0-9]*)$/.test(token) || Number(token) > max) throw unappliable(`operation ${i}: index ${token} out of range at /${tokens.join('/')}`, `/${tokens.join('/')}`);
  return Number(token);
}

function add(doc: unknown, tokens: string[], value: unknown, i: number): unknown {
  if (tokens.length === 0) return value;
  const parent = get(doc, tokens.slice(0, -1), i);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) {
    const idx = last === '-' ? parent.length : arrayIndex(last, parent.length, i, tokens);
    parent.splice(idx, 0, value);
  } else if (parent && typeof parent === 'object') {
    if (last === '__proto__') throw malformed(`operation ${i}: "__proto__" is not a member name`, `/${tokens.join('/')}`);
    (parent as Record<string, unknown>)[last] = value;
  } else {
    throw unappliable(`operation ${i}: path /${tokens.slice(0, -1).join('/')} is not a container`, `/${tokens.join('/')}`);
  }
  return doc;
}

function remove(doc: unknown, tokens: string[], i: number): { doc: unknown; value: unknown } {
  if (tokens.length === 0) return { doc: undefined, value: doc };
  const parent = get(doc, tokens.slice(0, -1), i);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) {
    const idx = arrayIndex(last, parent.length - 1, i, tokens);
    return { doc, value: parent.splice(idx, 1)[0] };
  }
  const value = child(parent, last, i, tokens);
  delete (parent as Record<string, unknown>)[last];
  return { doc, value };
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, k) => deepEqual(v, b[k]));
  if (a && b && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
  }
  return false;
}
