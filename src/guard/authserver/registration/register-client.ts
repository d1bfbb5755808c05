import crypto from 'node:crypto';
import { calculateJwkThumbprint, importJWK, type JWK } from 'jose';
import type { AppContext } from '../../../context';
import { InvalidRequest } from '../../errors';
import type { GuardSettings } from '../../settings';
import { deleteExpiredPendingClients, insertClient, type ClientRecord } from '../clients/client-store';
import { SUPPORTED_GRANT_TYPES } from '../../../protocol/oauth';

/** The attestation_type values of ZETA dynamic client registration. */
const ATTESTATION_TYPES = ['software', 'tpm', 'platform_a', 'platform_b', 'svc_attestation_token'] as const;

/**
 * Registration-time proof for one attestation_type (TPM credential activation, platform
 * attestation objects, ...). The software type has none; hardware types plug in here later.
 */
export interface RegistrationVerifier {
  attestationType: string;
  verify(body: Record<string, unknown>, ctx: AppContext): Promise<void>;
}

/** Members only hardware registrations carry; a software registration must not send them. */
const HARDWARE_MEMBERS = [
  'puk_client_sig',
  'puk_ak_sig',
  'puk_ek_enc',
  'c_ek_enc',
  'signed_hash_puk_client_sig',
  'platform_a_attestation_object',
  'platform_b_key_attestation_certificate_chain',
  'platform_b_integrity_token',
  'svc_attestation_token',
];

export interface RegistrationResponse {
  client_id: string;
  client_id_issued_at: number;
  client_name?: string;
  token_endpoint_auth_method: 'private_key_jwt';
  grant_types: string[];
  jwks: { keys: JWK[] };
  redirect_uris?: string[];
}

/** POST /register (RFC 7591): every member validated, one named step each. */
export async function registerClient(
  ctx: AppContext,
  settings: GuardSettings,
  body: unknown,
  verifiers: ReadonlyMap<string, RegistrationVerifier> = new Map(),
): Promise<RegistrationResponse> {
  const b = bodyIsObject(body);
  const attestationType = attestationTypeIsSupported(b, verifiers);
  authMethodIsPrivateKeyJwt(b);
  const grantTypes = grantTypesAreSupported(b);
  const { jwk, jkt } = await jwksHoldsOnePublicSigningKey(b);
  const clientName = clientNameIsValid(b);
  const redirectUris = redirectUrisAreValid(b);
  if (attestationType === 'software') softwareSendsNoHardwareMembers(b);
  else await verifiers.get(attestationType)!.verify(b, ctx);

  await deleteExpiredPendingClients(ctx, settings.pendingClientTtlSec);
  const now = ctx.now();
  const client: ClientRecord = {
    clientId: crypto.randomUUID(),
    jkt,
    jwks: { keys: [jwk] },
    clientName,
    grantTypes,
    redirectUris,
    attestationType,
    status: 'pending_attestation',
    issuedAt: now,
  };
  await insertClient(ctx, client);
  return {
    client_id: client.clientId,
    client_id_issued_at: Math.floor(now.getTime() / 1000),
    ...(clientName !== undefined ? { client_name: clientName } : {}),
    token_endpoint_auth_method: 'private_key_jwt',
    grant_types: grantTypes,
    jwks: client.jwks,
    ...(redirectUris ? { redirect_uris: redirectUris } : {}),
  };
}

function bodyIsObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new InvalidRequest('the registration request must be a JSON object');
  return body as Record<string, unknown>;
}

function attestationTypeIsSupported(b: Record<string, unknown>, verifiers: ReadonlyMap<string, RegistrationVerifier>): string {
  // Absent: the software/legacy form (gematik dcr-request.yaml; ZETA SDK sends none).
  const t = b.attestation_type ?? 'software';
  if (typeof t !== 'string' || !(ATTESTATION_TYPES as readonly string[]).includes(t)) {
    throw new InvalidRequest(`attestation_type must be one of ${ATTESTATION_TYPES.join(', ')}`);
  }
  if (t !== 'software' && !verifiers.has(t)) throw new InvalidRequest(`attestation_type ${t} is not supported by this server`);
  return t;
}

function authMethodIsPrivateKeyJwt(b: Record<string, unknown>): void {
  if (b.token_endpoint_auth_method !== 'private_key_jwt') throw new InvalidRequest('token_endpoint_auth_method must be private_key_jwt');
}

function grantTypesAreSupported(b: Record<string, unknown>): string[] {
  const g = b.grant_types;
  if (!Array.isArray(g) || g.length === 0 || !g.every((x) => typeof x === 'string')) throw new InvalidRequest('grant_types must be a non-empty array of strings');
  const unsupported = g.filter((x: string) => !(SUPPORTED_GRANT_TYPES as readonly string[]).includes(x));
  if (unsupported.length > 0) throw new InvalidRequest(`unsupported grant_types: ${unsupported.length} value(s)`);
  return [...new Set(g as string[])];
}

async function jwksHoldsOnePublicSigningKey(b: Record<string, unknown>): Promise<{ jwk: JWK; jkt: string }> {
  const jwks = b.jwks;
  if (typeof jwks !== 'object' || jwks === null || !Array.isArray((jwks as { keys?: unknown }).keys)) throw new InvalidRequest('jwks must be an object with a keys array');
  const keys = (jwks as { keys: unknown[] }).keys;
  if (keys.length !== 1) throw new InvalidRequest('jwks must hold exactly one key: the client instance key');
  const k = keys[0] as Record<string, unknown>;
  if (typeof k !== 'object' || k === null) throw new InvalidRequest('jwks.keys[0] must be a JWK object');
  if (k.kty !== 'EC' || k.crv !== 'P-256') throw new InvalidRequest('the client instance key must be kty EC, crv P-256');
  if ('d' in k) throw new InvalidRequest('jwks must not contain private key members');
  if (k.use !== undefined && k.use !== 'sig') throw new InvalidRequest('the client instance key use must be sig');
  if (k.alg !== undefined && k.alg !== 'ES256') throw new InvalidRequest('the client instance key alg must be ES256');
  if (k.kid !== undefined && (typeof k.kid !== 'string' || k.kid.length === 0 || k.kid.length > 128 || /[\u0000-\u001f\u007f]/.test(k.kid))) {
    throw new InvalidRequest('kid must be a printable string of at most 128 characters');
  }
  const coord = (v: unknown) => typeof v === 'string' && /^[A-Za-z0-9_-]{43}$/.test(v);
  if (!coord(k.x) || !coord(k.y)) throw new InvalidRequest('x and y must be base64url 32-byte coordinates');
  const jwk: JWK = { kty: 'EC', crv: 'P-256', x: k.x as string, y: k.y as string };
  try {
    await importJWK(jwk, 'ES256');
  } catch {
    throw new InvalidRequest('the client instance key is not a valid P-256 point');
  }
  const jkt = await calculateJwkThumbprint(jwk);
  return { jwk: { ...jwk, use: 'sig', alg: 'ES256', kid: typeof k.kid === 'string' ? k.kid : jkt }, jkt };
}

function clientNameIsValid(b: Record<string, unknown>): string | undefined {
  if (b.client_name === undefined) return undefined;
  if (typeof b.client_name !== 'string' || b.client_name.length === 0 || b.client_name.length > 200 || /[\u0000-\u001f]/.test(b.client_name)) {
    throw new InvalidRequest('client_name must be a string of 1 to 200 printable characters');
  }
  return b.client_name;
}

function redirectUrisAreValid(b: Record<string, unknown>): string[] | undefined {
  if (b.redirect_uris === undefined) return undefined;
  const r = b.redirect_uris;
  if (!Array.isArray(r) || r.length > 10) throw new InvalidRequest('redirect_uris must be an array of at most 10 URLs');
  for (const u of r) {
    if (typeof u !== 'string' || u.length > 2000 || /[\u0000-\u0020\u007f]/.test(u)) throw new InvalidRequest('redirect_uris must hold absolute URLs');
    let url: URL;
    try {
      url = new URL(String(u));
    } catch {
      throw new InvalidRequest('redirect_uris must hold absolute URLs');
    }
    const loopback = url.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
    if (typeof u !== 'string' || (url.protocol !== 'https:' && !loopback) || url.hash) throw new InvalidRequest('redirect_uris must be https URLs without fragment');
  }
  return r as string[];
}

function softwareSendsNoHardwareMembers(b: Record<string, unknown>): void {
  const present = HARDWARE_MEMBERS.filter((m) => m in b);
  if (present.length > 0) throw new InvalidRequest(`a software registration must not carry ${present.join(', ')}`);
}
