/**
 * Freezes `value` and everything reachable from it, for objects that many requests share (a
 * cached search result, a parsed query): whoever holds one cannot change it for the others.
 */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const x of Object.values(value)) deepFreeze(x);
  }
  return value;
}

/**
 * A bounded memo of a pure function of a string key: the least recently used key goes first.
 * Throws are not remembered (the function runs again for that key and throws again).
 */
export class Memo<T> {
  private readonly known = new Map<string, T>();

  constructor(private readonly maxEntries: number) {}

  get(key: string, make: () => T): T {
    const hit = this.known.get(key);
    if (hit !== undefined) {
      this.known.delete(key);
      this.known.set(key, hit);
      return hit;
    }
    const made = make();
    this.known.set(key, made);
    if (this.known.size > this.maxEntries) this.known.delete(this.known.keys().next().value as string);
    return made;
  }
}
