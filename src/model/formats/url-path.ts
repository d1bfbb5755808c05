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
  return i < 0 ? [] : [...new URLSearchParams(originalUrl.slice(i + 1)).entries()];
}
