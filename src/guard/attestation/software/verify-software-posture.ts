import crypto from 'node:crypto';
import { calculateJwkThumbprint, exportJWK } from 'jose';
import { InvalidRequest } from '../../errors';
import { attestationChallenge } from '../../../common/attestation-challenge';
import type { AttestationContext, AttestationResult, ClientStatement, PostureVerifier } from '../index';
import { attestationResult, printableMembers, PRODUCT_MEMBERS } from '../posture-result';
import { ATTESTATION_TYPE } from '../../../common/attestation-types';

const REQUIRED = [...PRODUCT_MEMBERS, 'public_key', 'attestation_challenge'] as const;

/** Software clients carry no signature over their posture: what we can check is the binding (key, nonce) and coherence. */
export const softwarePostureVerifier: PostureVerifier = {
  async verify(statement: ClientStatement, actx: AttestationContext): Promise<AttestationResult> {
    const p = printableMembers(statement.posture, REQUIRED);
    await publicKeyIsTheClientKey(p.public_key, actx.clientJkt);
    challengeBindsKeyAndNonce(p.attestation_challenge, actx);
    platformFitsOs(statement.platform, p.os);
    return attestationResult(statement, p, { postureType: ATTESTATION_TYPE.software, result: { software: { arch: p.arch, binding_verified: true } } });
  },
};

/**
 * Thumbprints of posture keys by their text: a client sends the same key at every exchange, and
 * parsing and hashing it cost about 0.4 ms. Content-addressed, so never stale; bounded.
 */
const postureKeyThumbprints = new Map<string, string>();

async function publicKeyIsTheClientKey(publicKey: string, clientJkt: string): Promise<void> {
  let jkt = postureKeyThumbprints.get(publicKey);
  if (jkt === undefined) {
    try {
      // Base64 DER SubjectPublicKeyInfo (ZETA SDK: Base64(encoded client public key)).
      const key = crypto.createPublicKey({ key: Buffer.from(publicKey, 'base64'), format: 'der', type: 'spki' });
      jkt = await calculateJwkThumbprint(await exportJWK(key));
    } catch {
      throw new InvalidRequest('client_statement.posture.public_key is not a base64 SubjectPublicKeyInfo');
    }
    if (postureKeyThumbprints.size >= 10_000) postureKeyThumbprints.clear();
    postureKeyThumbprints.set(publicKey, jkt);
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
