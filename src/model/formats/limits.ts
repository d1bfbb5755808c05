/**
 * Deepest element nesting read from a body, XML or JSON: far beyond any
 * real resource, well inside what a recursive walker survives.
 */
export const MAX_DEPTH = 100;

/**
 * Names of Object.prototype's members (`__proto__`, `constructor`, `toString`, ...). No FHIR
 * element has such a name, and as a key they fool every `in` or plain-object lookup (and
 * `__proto__` any merge): a body naming one is refused.
 */
export const PROTOTYPE_KEYS: ReadonlySet<string> = new Set(Object.getOwnPropertyNames(Object.prototype));
