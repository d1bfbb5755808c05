import crypto from 'node:crypto';
import { calculateJwkThumbprint, exportJWK } from 'jose';
import { InvalidRequest } from '../../errors';
import { attestationChallenge } from '../../../protocol/attestation-challenge';
import type { AttestationContext, AttestationResult, ClientStatement, PostureVerifier } from '../index';

const REQUIRED = ['product_id', 'product_version', 'os', 'os_version', 'arch', 'public_key', 'attestation_challenge'] as const;

/** Software clients carry no signature over their posture: what we can check is the binding (key, nonce) and coherence. */
export const softwarePostureVerifier: PostureVerifier = {
  postureType: 'software',
  async verify(statement: ClientStatement, actx: AttestationContext): Promise<AttestationResult> {
    const p = postureHasAllMembers(statement.posture);
    await publicKeyIsTheClientKey(p.public_key, actx.clientJkt);
    challengeBindsKeyAndNonce(p.attestation_challenge, actx);
    platformFitsOs(statement.platform, p.os);
    return {
      postureType: 'software',
      platform: statement.platform,
      productId: p.product_id,
      productVersion: p.product_version,
      os: p.os,
      osVersion: p.os_version,
      arch: p.arch,
      attestationTimestamp: statement.attestation_timestamp,
      result: { software: { arch: p.arch, binding_verified: true } },
    };
  },
};

function postureHasAllMembers(posture: Record<string, unknown>): Record<(typeof REQUIRED)[number], string> {
  for (const m of REQUIRED) {
    const v = posture[m];
    if (typeof v !== 'string' || v.length === 0 || v.length > 1024 || /[\u0000-\u001f\u007f]/.test(v)) {
      throw new InvalidRequest(`client_statement.posture.${m} must be a non-empty printable string`);
    }
  }
  return posture as Record<(typeof REQUIRED)[number], string>;
}

async function publicKeyIsTheClientKey(publicKey: string, clientJkt: string): Promise<void> {
  let jkt: string;
  try {
    // Base64 DER SubjectPublicKeyInfo (ZETA SDK: Base64(encoded client public key)).
    const key = crypto.createPublicKey({ key: Buffer.from(publicKey, 'base64'), format: 'der', type: 'spki' });
    jkt = await calculateJwkThumbprint(await exportJWK(key));
  } catch {
    throw new InvalidRequest('client_statement.posture.public_key is not a base64 SubjectPublicKeyInfo');
  }
  if (jkt !== clientJkt) throw new InvalidRequest('client_statement.posture.public_key is not the registered client instance key');
}

function challengeBindsKeyAndNonce(challenge: string, actx: AttestationContext): void {
  const expected = attestationChallenge(actx.clientJkt, actx.nonce);
  if (challenge.length !== expected.length || !crypto.timingSafeEqual(Buffer.from(challenge), Buffer.from(expected))) {
    throw new InvalidRequest('client_statement.posture.attestation_challenge does not bind the client key and the nonce');
  }
}

const OS_FAMILIES: [RegExp, string][] = [
  [/windows/i, 'windows'],
  [/android/i, 'android'],
  [/mac ?os|ios|darwin/i, 'apple'],
  [/linux|ubuntu|debian|fedora|red ?hat|suse|alpine/i, 'linux'],
];

function platformFitsOs(platform: string, os: string): void {
  const family = OS_FAMILIES.find(([re]) => re.test(os))?.[1];
  if (family && family !== platform && platform !== 'other') {
    throw new InvalidRequest('client_statement.platform does not fit posture.os');
  }
}
