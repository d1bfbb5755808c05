import { MalformedUrl } from './errors';

/**
 * The segments of a request path (`/Patient/a%2Fb` -> `['Patient', 'a/b']`), percent-decoded.
 * Broken percent-encoding (`%E0%A4%A`, `%ZZ`) is the client's fault: 400, never a URIError.
 */
export function pathSegments(pathname: string): string[] {
  return pathname
    .split('/')
    .filter(Boolean)
    .map((segment) => {
      try {
        return decodeURIComponent(segment);
      } catch {
        throw new MalformedUrl(`Malformed percent-encoding in the request path segment '${segment.slice(0, 64)}'`);
      }
    });
}

/** Raw query pairs of a request URL in order (FHIR repeats AND, commas OR: a parsed object loses both). */
export function queryPairs(originalUrl: string): [string, string][] {
  const i = originalUrl.indexOf('?');
  const pairs = i < 0 ? [] : [...new URLSearchParams(originalUrl.slice(i + 1)).entries()];
  for (const [name, value] of pairs) {
    // A parameter needs a name; NUL can be neither searched for nor stored (PostgreSQL text).
    if (name === '') throw new MalformedUrl('A query parameter has no name');
    if (name.includes('\u0000') || value.includes('\u0000')) throw new MalformedUrl(`Query parameter '${name.replace(/\u0000/g, '\\0').slice(0, 64)}' contains a NUL character`);
  }
  return pairs;
}
