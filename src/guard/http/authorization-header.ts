import { InvalidRequest } from '../errors';

/**
 * The one Authorization header: it is not a list header (RFC 9110 §11.6.2), and Node would keep
 * only the first of two silently, so a second one is refused instead of ignored.
 */
export function oneAuthorization(value: string | readonly string[] | undefined): string | undefined {
  if (typeof value === 'string' || value === undefined) return value;
  if (value.length > 1) throw new InvalidRequest('send one Authorization header, not several');
  return value[0];
}
