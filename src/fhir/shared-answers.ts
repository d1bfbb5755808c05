/**
 * Answers built from a result that many requests share (docs/requirements.md#performance-aims). A
 * calendar window search served by the window cache returns the same frozen result to every
 * request of that shape: the searchset Bundle around it, and its bytes, are then the same too, so
 * they are built once per request shape and kept beside the result (they go when the result
 * leaves the cache). Anything not frozen is
 * built for its request alone, as before.
 */

/** Request shapes remembered per shared result (the same query written differently is another shape). */
const SHAPES_PER_RESULT = 4;

const built = new WeakMap<object, Map<string, unknown>>();

/**
 * What `build` makes from `shared` for requests of shape `key` (asked only then), made once while
 * `shared` lives when `shared` is frozen (nobody can change what it was built from), else made
 * every time.
 */
export function builtOnce<T extends object>(shared: object, shape: string | (() => string), build: () => T): T {
  if (!Object.isFrozen(shared)) return build();
  const key = typeof shape === 'string' ? shape : shape();
  let shapes = built.get(shared);
  if (!shapes) built.set(shared, (shapes = new Map()));
  const known = shapes.get(key) as T | undefined;
  if (known) return known;
  const made = Object.freeze(build());
  if (shapes.size >= SHAPES_PER_RESULT) shapes.delete(shapes.keys().next().value as string);
  shapes.set(key, made);
  return made;
}

/** A body's bytes in one format, with the entity tag the HTTP adapter would compute for them. */
export interface Encoded {
  bytes: Buffer;
  etag?: string;
}

/** `encode(body)` once per frozen body (a Bundle from `builtOnce`) and format; anything else every time. */
export function encodedOnce(body: object, format: string, encode: () => Encoded): Encoded {
  return builtOnce(body, `encoded:${format}`, encode);
}
