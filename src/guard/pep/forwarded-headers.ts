import type { IncomingHttpHeaders } from 'node:http';
import type { AccessTokenPayload } from '../authserver/tokens/access-token';
import { InvalidPopp } from './errors';
import type { PepSettings } from './settings';

/** ZETA A_25669-01: lower-case names, base64url JSON values. */
export const USER_INFO = 'svc-user-info';
export const CLIENT_DATA = 'svc-client-data';
export const POPP_CONTENT = 'svc-popp-token-content';
const IDENTITY_HEADERS = [USER_INFO, CLIENT_DATA, POPP_CONTENT] as const;

/** A client must never set these itself (A_25669-01): removed before anything else looks at the request. */
export function stripIdentityHeaders(headers: IncomingHttpHeaders): void {
  for (const name of IDENTITY_HEADERS) delete headers[name];
}

type Field = { name: string; value: string | undefined; optional?: boolean; shortenable?: boolean };

/**
 * `svc-user-info` (A_26589-01): identifier = AT `sub`, professionOID,
 * commonName, organizationName (optional), at most 250 bytes.
 */
export function userInfoHeader(token: AccessTokenPayload, caps: PepSettings['headerCaps']): string {
  return encodeWithin(caps.userInfo, [
    { name: 'identifier', value: token.sub },
    { name: 'professionOID', value: token.profession_oid },
    { name: 'commonName', value: token.common_name ?? '', shortenable: true },
    { name: 'organizationName', value: token.organization_name, optional: true, shortenable: true },
  ]);
}

/** `svc-client-data` (A_26590-02): client_id, product_id, product_version, platform; at most 250 bytes. */
export function clientDataHeader(token: AccessTokenPayload, caps: PepSettings['headerCaps']): string {
  return encodeWithin(caps.clientData, [
    { name: 'client_id', value: token.client_id },
    { name: 'product_id', value: token.product_id ?? '', shortenable: true },
    { name: 'product_version', value: token.product_version ?? '', shortenable: true },
    { name: 'platform', value: token.platform, optional: true },
  ]);
}

/** `svc-popp-token-content`: the PoPP payload verbatim, at most 450 bytes (a larger proof cannot be forwarded: 403). */
export function poppContentHeader(payloadJson: string, caps: PepSettings['headerCaps']): string {
  const value = Buffer.from(payloadJson, 'utf8').toString('base64url');
  if (value.length > caps.poppContent) throw new InvalidPopp(`the PoPP payload exceeds the ${caps.poppContent}-byte header limit`);
  return value;
}

/**
 * Base64url (no padding) of the compact JSON object, within `cap` bytes: optional members go
 * first, then the longest shortenable string is cut. Identifiers are never cut.
 */
export function encodeWithin(cap: number, fields: Field[]): string {
  let current = fields.filter((f) => f.value !== undefined).map((f) => ({ ...f, value: f.value as string }));
  const encode = () => Buffer.from(JSON.stringify(Object.fromEntries(current.map((f) => [f.name, f.value]))), 'utf8').toString('base64url');
  let out = encode();
  for (const f of [...current].reverse()) {
    if (out.length <= cap) return out;
    if (f.optional) {
      current = current.filter((x) => x !== f);
      out = encode();
    }
  }
  while (out.length > cap) {
    const longest = current.filter((f) => f.shortenable && f.value.length > 0).sort((a, b) => b.value.length - a.value.length)[0];
    if (!longest) throw new Error(`identity header cannot be fitted into ${cap} bytes`);
    const chars = Array.from(longest.value);
    const cut = Math.max(1, Math.ceil(((out.length - cap) * 3) / 4));
    longest.value = chars.slice(0, Math.max(0, chars.length - cut)).join('');
    out = encode();
  }
  return out;
}
