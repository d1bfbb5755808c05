import crypto from 'node:crypto';

/**
 * Index keys bounded in bytes. A btree entry must fit in a third of a page (2,704 bytes on
 * PostgreSQL's 8 kB pages; "index row size exceeds btree version 4 maximum"), and a value a client
 * writes (an identifier, a name, a reference's type) has no such bound: PostgreSQL compresses a
 * repetitive value below the limit, but a few thousand random or multibyte characters do not
 * compress. So every text that lands in an indexed column of the search tables goes through
 * `indexKey`, on the write side and on the query side alike:
 *
 * - a value of at most KEY_BYTES UTF-8 bytes is its own key (nearly every real code, system, name and
 *   reference is), so equality, ordering and prefix matching on the column are unchanged;
 * - a longer value is its first PREFIX_CHARS characters, `:` and the SHA-256 of its UTF-8 bytes in
 *   hex: at most 4 * 64 + 65 = 321 bytes, and always more than KEY_BYTES (a value of over 64
 *   characters keeps at least 64 bytes of them, a shorter one all its bytes), so it can never
 *   equal the key of a short value. Equality on keys is equality of values (up to SHA-256).
 *
 * Prefix and substring matches need the whole value: the tables keep it in a `*_full` column
 * (unindexed, NULL when the key is the value), see `fullValue`.
 *
 * The SQL of migration 005 computes the same key for rows written before (`left` counts code
 * points, as `Array.from` does).
 */
export const KEY_BYTES = 128;
export const PREFIX_CHARS = 64;

export function indexKey(value: string): string {
  // A UTF-16 unit is at most 3 UTF-8 bytes: short strings need no count.
  if (value.length <= KEY_BYTES / 3 || Buffer.byteLength(value, 'utf8') <= KEY_BYTES) return value;
  return `${leadingChars(value, PREFIX_CHARS)}:${crypto.createHash('sha256').update(value, 'utf8').digest('hex')}`;
}

/** `indexKey` for a nullable column. */
export function nullableKey(value: string | null): string | null {
  return value === null ? null : indexKey(value);
}

/** The value to keep beside its key: NULL when the key is the value itself. */
export function fullValue(value: string | null): string | null {
  return value === null || indexKey(value) === value ? null : value;
}

/** The first `n` characters (code points, as PostgreSQL's `left` counts them in UTF-8). */
export function leadingChars(value: string, n: number): string {
  let out = '';
  let count = 0;
  for (const ch of value) {
    if (count++ === n) break;
    out += ch;
  }
  return out;
}
