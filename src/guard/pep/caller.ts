import crypto from 'node:crypto';
import { patientOwner, type Caller } from '../../common/identity';
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
