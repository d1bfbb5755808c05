import { compactVerify } from 'jose';
import { InvalidPopp, PoppMissing } from '../errors';
import { decodeCompactJws, MalformedJws } from '../../jose/compact-jws';
import type { PepSettings } from '../settings';
import type { PoppJwks } from './popp-jwks';

const POPP_TYP = 'vnd.telematik.popp+jwt';

export interface VerifiedPopp {
  /** The payload exactly as signed (forwarded verbatim in svc-popp-token-content). */
  payloadJson: string;
  claims: Record<string, unknown>;
}

export interface PoppCheck {
  /** All `PoPP` header values (`req.headersDistinct.popp`). */
  headerValues: string[] | undefined;
  /** Telematik-ID of the access token (`sub`): the PoPP's `actorId` must be it. */
  actor: string;
  now: Date;
}

/**
 * Proof of patient presence (ngx-pep PoPP, ZETA UC15/UC17/UC22): missing → 400,
 * anything wrong → 403. One named check each.
 */
export async function verifyPopp(jwks: PoppJwks, settings: PepSettings, check: PoppCheck): Promise<VerifiedPopp> {
  const jws = exactlyOneHeader(check.headerValues);
  const [header, payloadJson] = decode(jws);
  typIsPopp(header);
  algIsEs256(header);
  const key = await jwks.key(typeof header.kid === 'string' ? header.kid : '');
  if (!key) throw new InvalidPopp('the PoPP is not signed with a key of the PoPP issuer');
  try {
    await compactVerify(jws, key, { algorithms: ['ES256'] });
  } catch {
    throw new InvalidPopp('the PoPP signature does not verify');
  }
  const claims = parseClaims(payloadJson);
  const now = Math.floor(check.now.getTime() / 1000);
  timeIsValid('iat', claims.iat, now, settings);
  timeIsValid('patientProofTime', claims.patientProofTime, now, settings);
  actorIsTheCaller(claims.actorId, check.actor);
  return { payloadJson, claims };
}

function exactlyOneHeader(values: string[] | undefined): string {
  if (!values || values.length === 0 || values[0].trim() === '') throw new PoppMissing();
  if (values.length > 1) throw new InvalidPopp('more than one PoPP header');
  return values[0].trim();
}

function decode(jws: string): [Record<string, unknown>, string] {
  try {
    const decoded = decodeCompactJws(jws);
    if (decoded.signature.length === 0) throw new MalformedJws('serialization');
    return [decoded.header, decoded.payload.toString('utf8')];
  } catch (err) {
    if (!(err instanceof MalformedJws)) throw err;
    throw new InvalidPopp(err.defect === 'serialization' ? 'the PoPP is not a compact JWS' : 'the PoPP header is not a JSON object');
  }
}

function typIsPopp(header: Record<string, unknown>): void {
  if (header.typ !== POPP_TYP) throw new InvalidPopp(`the PoPP typ must be ${POPP_TYP}`);
}

function algIsEs256(header: Record<string, unknown>): void {
  if (header.alg !== 'ES256') throw new InvalidPopp('the PoPP must be signed with ES256');
}

function parseClaims(json: string): Record<string, unknown> {
  try {
    const claims = JSON.parse(json) as unknown;
    if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) throw new Error();
    return claims as Record<string, unknown>;
  } catch {
    throw new InvalidPopp('the PoPP payload is not a JSON object');
  }
}

/** In the past (with leeway) and within the validity: the current quarter (ngx-pep default) or a fixed number of seconds. */
function timeIsValid(name: string, value: unknown, now: number, settings: PepSettings): void {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new InvalidPopp(`the PoPP has no numeric ${name}`);
  if (value > now + settings.leewaySec) throw new InvalidPopp(`the PoPP ${name} is in the future`);
  const { validity, quarterGraceSec } = settings.popp;
  const earliest = validity === 'quarter' ? quarterStart(now - quarterGraceSec) : now - validity;
  if (value < earliest) throw new InvalidPopp(`the PoPP ${name} is too old`);
}

/** Start (Unix seconds, UTC) of the calendar quarter containing t. */
function quarterStart(t: number): number {
  const d = new Date(t * 1000);
  return Date.UTC(d.getUTCFullYear(), Math.floor(d.getUTCMonth() / 3) * 3, 1) / 1000;
}

function actorIsTheCaller(actorId: unknown, actor: string): void {
  if (actorId !== actor) throw new InvalidPopp('the PoPP actorId is not the institution of the access token');
}
