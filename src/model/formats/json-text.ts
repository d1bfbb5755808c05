import { FhirJsonError } from './errors';
import { MAX_DEPTH, PROTOTYPE_KEYS } from './limits';

/**
 * JSON.parse plus what it lets through: a repeated key (it keeps
 * the last), nesting deeper than MAX_DEPTH, keys named like Object.prototype members.
 * Throws FhirJsonError (400 structure).
 */
export function parseJson(text: string): unknown {
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (error) {
    throw new FhirJsonError(`Malformed JSON: ${(error as Error).message}`);
  }
  const root = typeof (parsed as { resourceType?: unknown })?.resourceType === 'string' ? (parsed as { resourceType: string }).resourceType : '$this';
  checkJsonText(body, root);
  return parsed;
}

interface Frame {
  readonly object: boolean;
  readonly keys?: Set<string>;
  key?: string;
  index: number;
  /** Objects count toward the depth (an XML element each); an array only inside an array (never FHIR). */
  readonly depth: number;
}

/**
 * One linear pass over text JSON.parse accepted, without recursion: the parser has checked the
 * syntax, so this only tracks containers, keys and strings.
 */
function checkJsonText(text: string, root = '$this'): void {
  const stack: Frame[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const end = stringEnd(text, i);
      const top = stack[stack.length - 1];
      if (top?.object && nextNonSpace(text, end + 1) === 0x3a /* : */) {
        const raw = text.slice(i + 1, end);
        const key = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
        if (PROTOTYPE_KEYS.has(key)) throw new FhirJsonError(`Property name '${key}' is not allowed (no FHIR element has it)`, pathOf(root, stack, key));
        if (top.keys!.has(key)) throw new FhirJsonError(`Duplicate property '${key}' (R4 json.html: each property appears once)`, pathOf(root, stack, key));
        top.keys!.add(key);
        top.key = key;
      }
      i = end + 1;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const parent = stack[stack.length - 1];
      const object = c === 0x7b;
      const depth = (parent?.depth ?? 0) + (object || parent?.object === false ? 1 : 0);
      if (depth > MAX_DEPTH) throw new FhirJsonError(`JSON nested deeper than ${MAX_DEPTH} levels`, pathOf(root, stack));
      stack.push({ object, keys: object ? new Set() : undefined, index: 0, depth });
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
    } else if (c === 0x2c /* , */) {
      const top = stack[stack.length - 1];
      if (top && !top.object) top.index++;
    }
    i++;
  }
}

/** Index of the closing quote of the string opening at `start`. */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  for (;;) {
    const q = text.indexOf('"', i);
    if (q < 0) return text.length;
    let backslashes = 0;
    for (let j = q - 1; text.charCodeAt(j) === 0x5c; j--) backslashes++;
    if (backslashes % 2 === 0) return q;
    i = q + 1;
  }
}

function nextNonSpace(text: string, from: number): number {
  let i = from;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return c;
    i++;
  }
  return -1;
}

/** FHIRPath-like location of the current position (only built for the error). */
function pathOf(root: string, stack: readonly Frame[], lastKey?: string): string {
  let path = root;
  stack.forEach((frame, n) => {
    if (frame.object) {
      const key = n === stack.length - 1 ? (lastKey ?? frame.key) : frame.key;
      if (key !== undefined) path += `.${key}`;
    } else {
      path += `[${frame.index}]`;
    }
  });
  return path;
}
