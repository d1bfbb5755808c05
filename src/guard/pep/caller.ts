import crypto from 'node:crypto';
import { patientOwner, type Caller } from '../../common/identity';
import { KVID_SYSTEM, TELEMATIK_ID_SYSTEM } from '../../common/vocabulary';
import type { AuditParties } from '../../server-lib/audit-port';
import type { AccessTokenPayload } from '../authserver/tokens/access-token';

/** The verified caller as the FHIR layer sees it (`res.locals.caller`). */
export function callerOf(token: AccessTokenPayload, repositoryOwners: readonly string[]): Caller {
  // A workload's subject is its issuer's to choose: it never passes for an institution's
  // Telematik-ID (its own resources are its `issuer#sub`) nor for a repository owner.
  const workload = token.platform === 'workload';
  const scopes = token.scope.split(' ').filter(Boolean);
  // A patient owns what they book under their KVNR; never an owner either
  // (docs/requirements.md#identity-scopes-and-ownership).
  if (token.kvnr !== undefined) return { institution: patientOwner(token.kvnr), clientId: token.client_id, scopes, isOwner: false, patient: token.kvnr };
  return {
    institution: workload ? token.client_id : token.sub,
    professionOid: token.profession_oid,
    clientId: token.client_id,
    scopes,
    isOwner: !workload && repositoryOwners.includes(token.sub),
  };
}

/**
 * What the access log may carry of a client (ZETA Telemetrie check 54): a
 * one-way hash, stable across replicas so a client's requests can still be correlated.
 */
export function logHash(value: string): string {
  return crypto.createHash('sha256').update(`terminus-log:${value}`).digest('base64url').slice(0, 16);
}

/**
 * Who a token speaks for, as the audit trail names them (IHE BALP agents): the user (a
 * Telematik-ID with the card's name and profession, a patient's KVNR, a workload's subject) and
 * the client (client_id, product and version, how its posture was attested).
 */
export function auditPartiesOf(token: AccessTokenPayload): AuditParties {
  const workload = token.platform === 'workload';
  const user = token.kvnr !== undefined
    ? { identifier: { system: KVID_SYSTEM, value: token.kvnr }, name: token.common_name || undefined }
    : workload
      ? { identifier: { system: token.client_id.slice(0, Math.max(0, token.client_id.lastIndexOf('#'))) || token.iss, value: token.sub } }
      : { identifier: { system: TELEMATIK_ID_SYSTEM, value: token.sub }, name: token.organization_name ?? token.common_name, professionOid: token.profession_oid || undefined };
  return {
    user,
    client: { clientId: token.client_id, product: token.product_id || undefined, version: token.product_version || undefined, attestation: token.platform || undefined },
  };
}
