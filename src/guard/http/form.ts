import { InvalidRequest } from '../errors';

/**
 * application/x-www-form-urlencoded body into a Map; a repeated parameter is 400 (RFC 6749 §3.2:
 * "Request and response parameters MUST NOT be included more than once").
 */
export function parseForm(body: string): Map<string, string> {
  const params = new Map<string, string>();
  if (body.length === 0) return params;
  for (const pair of body.split('&')) {
    if (pair === '') continue;
    const i = pair.indexOf('=');
    const [rawKey, rawValue] = i === -1 ? [pair, ''] : [pair.slice(0, i), pair.slice(i + 1)];
    let key: string;
    let value: string;
    try {
      key = decodeURIComponent(rawKey.replace(/\+/g, ' '));
      value = decodeURIComponent(rawValue.replace(/\+/g, ' '));
    } catch {
      throw new InvalidRequest('the request body is not valid form encoding');
    }
    if (params.has(key)) throw new InvalidRequest('request parameters must not be included more than once');
    params.set(key, value);
  }
  return params;
}
