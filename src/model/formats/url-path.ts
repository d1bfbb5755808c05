import { MalformedBody, MalformedUrl } from './errors';

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
  return i < 0 ? [] : namedPairs(originalUrl.slice(i + 1), 'query', (message) => new MalformedUrl(message));
}

/**
 * The parameters of an `application/x-www-form-urlencoded` body (`POST [type]/_search`, FHIR R4
 * §3.1.1.3: they count as the query's), held to the query's rules; a broken one is the body's fault.
 */
export function formPairs(body: string): [string, string][] {
  return namedPairs(body, 'form', (message) => new MalformedBody(message));
}

function namedPairs(encoded: string, where: 'query' | 'form', fail: (message: string) => Error): [string, string][] {
  const pairs = [...new URLSearchParams(encoded).entries()];
  for (const [name, value] of pairs) {
    // A parameter needs a name; NUL can be neither searched for nor stored (PostgreSQL text).
    if (name === '') throw fail(`A ${where} parameter has no name`);
    if (name.includes('\u0000') || value.includes('\u0000')) throw fail(`${where === 'query' ? 'Query' : 'Form'} parameter '${name.replace(/\u0000/g, '\\0').slice(0, 64)}' contains a NUL character`);
  }
  return pairs;
}
