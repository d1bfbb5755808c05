import crypto from 'node:crypto';
import { calculateJwkThumbprint, importJWK, type JWK } from 'jose';
import type { AppContext } from '../../../context';
import { DEFAULT_ATTESTATION_TYPE, type AttestationMethod, type AttestationMethods } from '../../attestation';
import { Conflict, InvalidRequest, ResourceNotFound } from '../../errors';
import { clientKeyIsRegistered, deleteExpiredPendingClients, insertClient, type ClientRecord, type ClientStatus } from '../clients/client-store';
import { GRANT_AUTHORIZATION_CODE } from '../../../common/oauth';
import type { GuardDeps } from '../deps';
import { answerTransaction, findTransaction, openTransaction } from './registration-transactions';
import { EMAIL_CHALLENGE, emailCodeAnswer, mailerFor, MESSAGE_ID, normalizeEmail, openEmailChallenge, resendEmailCode } from './email-code';
import { keyEncryptionFor } from '../../keys/key-encryption';
import type { SharedState } from '../../state/shared-state';
import { TPM_ACTIVATION } from '../../../common/attestation-types';

export interface RegistrationResponse {
  client_id: string;
  client_id_issued_at: number;
  client_name?: string;
  token_endpoint_auth_method: 'private_key_jwt';
  grant_types: string[];
  jwks: { keys: JWK[] };
  redirect_uris?: string[];
  status: ClientStatus;
}

/** The 202 answer of a registration that waits for a challenge (docs/requirements.md, Hardware attestation). */
export interface PendingRegistrationResponse {
  transaction_id: string;
  status: 'pending_verification';
  expires_in: number;
  challenge_type: string;
  [member: string]: string | number;
}

export type RegistrationOutcome = { status: 201; body: RegistrationResponse } | { status: 202; body: PendingRegistrationResponse };

/**
 * POST /register (RFC 7591): every member validated, one named step each; then the proof of the
 * attestation method. A proof with a challenge opens a transaction (202) instead of registering.
 * The attestation types and grant types are those of the guard's registries.
 */
export async function registerClient(deps: Pick<GuardDeps, 'ctx' | 'settings' | 'attestation' | 'grants' | 'state'>, body: unknown): Promise<RegistrationOutcome> {
  const { ctx, settings, attestation: methods, state } = deps;
  const b = bodyIsObject(body);
  const method = attestationTypeIsSupported(b, methods);
  const attestationType = method.type;
  authMethodIsPrivateKeyJwt(b);
  const grantTypes = grantTypesAreSupported(b, deps.grants.types());
  const { jwk, jkt } = await jwksHoldsOnePublicSigningKey(b);
  const clientName = clientNameIsValid(b);
  const redirectUris = redirectUrisAreValid(b);
  if (grantTypes.includes(GRANT_AUTHORIZATION_CODE) && !redirectUris?.length) throw new InvalidRequest('redirect_uris must name at least one URL for the authorization_code grant');
  if (method.registration === 'none') carriesNoProof(b, method, methods);
  const email = userEmailFor(b, method);
  const proof = method.registration === 'none' ? undefined : await method.registration!.verify(b, { jwk, jkt }, ctx);

  await deleteExpiredPendingClients(ctx, settings.pendingClientTtlSec);
  const client: ClientRecord = {
    clientId: crypto.randomUUID(),
    jkt,
    jwks: { keys: [jwk] },
    clientName,
    grantTypes,
    redirectUris,
    attestationType,
    attestation: proof?.attestation,
    status: proof?.status ?? 'pending_attestation',
    issuedAt: ctx.now(),
  };
  if (proof?.userEmail === 'required' && email === undefined) throw new InvalidRequest('user_email is required: a phone registration is bound to an e-mail address');
  if (email !== undefined) {
    // A mobile user (docs/requirements.md, Patients (authorization code flow)): the client is registered once the mailed code comes back.
    if (await clientKeyIsRegistered(ctx, jkt)) throw new Conflict('a client with this client instance key is already registered');
    const challenge = await openEmailChallenge(ctx, keyEncryptionFor(ctx), mailerFor(ctx), client, email, state);
    return {
      status: 202,
      body: { transaction_id: challenge.transactionId, status: 'pending_verification', expires_in: challenge.expiresIn, challenge_type: EMAIL_CHALLENGE, message_id: MESSAGE_ID },
    };
  }
  if (proof?.challenge) {
    // Answering the challenge must not be the first time a known key is found out.
    if (await clientKeyIsRegistered(ctx, jkt)) throw new Conflict('a client with this client instance key is already registered');
    const ttl = ctx.config.registrationTtlSec;
    const transactionId = await openTransaction(ctx, proof.challenge.type, proof.challenge.answer, client, ttl);
    return {
      status: 202,
      body: { transaction_id: transactionId, status: 'pending_verification', expires_in: ttl, challenge_type: proof.challenge.type, ...proof.challenge.response },
    };
  }
  await insertClient(ctx, client);
  return { status: 201, body: registrationRecord(client) };
}

/**
 * `user_email` asks for the e-mail binding of a mobile registration (docs/requirements.md, Patients (authorization code flow)): a software
 * client (a phone app) may send it; the hardware types of stationary clients may not.
 */
function userEmailFor(b: Record<string, unknown>, method: AttestationMethod): string | undefined {
  if (b.user_email === undefined) return undefined;
  if (method.userEmail === 'refused') throw new InvalidRequest(`user_email belongs to mobile registrations, not to attestation_type ${method.type}`);
  return normalizeEmail(b.user_email);
}

/**
 * POST /register/resend (docs/requirements.md, Patients (authorization code flow)): a new e-mail code for a pending registration, 202
 * `{transaction_id, expires_in}`; 429 with Retry-After inside a minute of the last mail or after
 * the third.
 */
export async function resendRegistrationCode(ctx: AppContext, body: unknown, state?: SharedState): Promise<{ transaction_id: string; status: 'pending_verification'; expires_in: number }> {
  const b = bodyIsObject(body);
  if (typeof b.transaction_id !== 'string' || b.transaction_id === '') throw new InvalidRequest('transaction_id is required');
  const c = await resendEmailCode(ctx, keyEncryptionFor(ctx), mailerFor(ctx), b.transaction_id, state);
  return { transaction_id: c.transactionId, status: 'pending_verification', expires_in: c.expiresIn };
}

/**
 * POST /register/verify (docs/requirements.md, Hardware attestation; Mobile clients and e-mail codes): the answer to the challenge of a pending registration.
 * Right: the client is registered (201). Wrong: 400; the third wrong TPM answer or the fifth wrong
 * e-mail code ends the transaction. Unknown, expired or used: 404. A key registered meanwhile: 409.
 */
export async function verifyRegistration(ctx: AppContext, body: unknown): Promise<RegistrationResponse> {
  const b = bodyIsObject(body);
  if (typeof b.transaction_id !== 'string' || b.transaction_id === '') throw new InvalidRequest('transaction_id is required');
  if (typeof b.verify_type !== 'string' || b.verify_type === '') throw new InvalidRequest('verify_type is required');
  const transaction = await findTransaction(ctx, b.transaction_id);
  if (!transaction) throw new ResourceNotFound('no pending registration with this transaction_id (unknown, expired or used)');
  if (b.verify_type !== transaction.challengeType) throw new InvalidRequest(`verify_type must be ${transaction.challengeType}`);
  const answer = answerOf(ctx, b, transaction.challengeType);
  const outcome = await answerTransaction(ctx, b.transaction_id, answer);
  if (outcome.kind === 'gone') throw new ResourceNotFound('no pending registration with this transaction_id (unknown, expired or used)');
  if (outcome.kind === 'wrong') {
    const token = transaction.challengeType === EMAIL_CHALLENGE ? 'invalid_otp: the code' : 'invalid_activation_secret: the answer';
    throw new InvalidRequest(`${token} is wrong${outcome.triesLeft > 0 ? ` (${outcome.triesLeft} tries left)` : '; the registration is closed'}`);
  }
  const client = { ...outcome.transaction.client, issuedAt: ctx.now() };
  await insertClient(ctx, client);
  return registrationRecord(client);
}

function answerOf(ctx: AppContext, b: Record<string, unknown>, challengeType: string): Buffer {
  if (challengeType === EMAIL_CHALLENGE) {
    // Shape first: a malformed code is a client bug, not a guess, and costs no try.
    if (typeof b.code !== 'string' || !/^\d{6}$/.test(b.code)) throw new InvalidRequest('code must be the 6 digits of the mail');
    return emailCodeAnswer(keyEncryptionFor(ctx), b.transaction_id as string, b.code);
  }
  const v = b.tpm_decrypted_secret;
  if (challengeType !== TPM_ACTIVATION) throw new InvalidRequest('unsupported challenge');
  if (typeof v !== 'string' || !/^[A-Za-z0-9+/_-]{1,256}={0,2}$/.test(v)) throw new InvalidRequest('tpm_decrypted_secret must be base64');
  return Buffer.from(v, v.includes('-') || v.includes('_') ? 'base64url' : 'base64');
}

function registrationRecord(client: ClientRecord): RegistrationResponse {
  return {
    client_id: client.clientId,
    client_id_issued_at: Math.floor(client.issuedAt.getTime() / 1000),
    ...(client.clientName !== undefined ? { client_name: client.clientName } : {}),
    token_endpoint_auth_method: 'private_key_jwt',
    grant_types: client.grantTypes,
    jwks: client.jwks,
    ...(client.redirectUris ? { redirect_uris: client.redirectUris } : {}),
    status: client.status,
  };
}

function bodyIsObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new InvalidRequest('the registration request must be a JSON object');
  return body as Record<string, unknown>;
}

function attestationTypeIsSupported(b: Record<string, unknown>, methods: AttestationMethods): AttestationMethod {
  const t = b.attestation_type ?? DEFAULT_ATTESTATION_TYPE;
  const method = typeof t === 'string' ? methods.get(t) : undefined;
  if (!method) throw new InvalidRequest(`attestation_type must be one of ${methods.types().join(', ')}`);
  if (!method.registration) throw new InvalidRequest(`attestation_type ${method.type} is not supported by this server`);
  return method;
}

function authMethodIsPrivateKeyJwt(b: Record<string, unknown>): void {
  if (b.token_endpoint_auth_method !== 'private_key_jwt') throw new InvalidRequest('token_endpoint_auth_method must be private_key_jwt');
}

function grantTypesAreSupported(b: Record<string, unknown>, supported: readonly string[]): string[] {
  const g = b.grant_types;
  if (!Array.isArray(g) || g.length === 0 || !g.every((x) => typeof x === 'string')) throw new InvalidRequest('grant_types must be a non-empty array of strings');
  const unsupported = g.filter((x: string) => !supported.includes(x));
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

/** A registration that proves nothing must not carry the members of one that does: its client would believe they counted. */
function carriesNoProof(b: Record<string, unknown>, method: AttestationMethod, methods: AttestationMethods): void {
  const present = methods.proofFields().filter((m) => m in b);
  if (present.length > 0) throw new InvalidRequest(`a ${method.type} registration must not carry ${present.join(', ')}`);
}
