import crypto from 'node:crypto';
import os from 'node:os';
import { attestationChallenge } from '../common/attestation-challenge';
import type { EcKey } from './crypto';
import { ATTESTATION_TYPE } from '../common/attestation-types';

export interface ProductInfo {
  product_id: string;
  product_version: string;
}

export const DEFAULT_PRODUCT: ProductInfo = { product_id: 'terminus-client', product_version: '0.1.0' };

/** `client_statement` of a software client (gematik posture-software.yaml). */
export function softwareClientStatement(o: {
  clientId: string;
  clientKey: EcKey;
  nonce: string;
  product?: ProductInfo;
  now?: number;
  platform?: string;
  posture?: Record<string, unknown>;
}): Record<string, unknown> {
  const platform = o.platform ?? platformOf(process.platform);
  return {
    sub: o.clientId,
    platform,
    posture_type: ATTESTATION_TYPE.software,
    posture: {
      ...(o.product ?? DEFAULT_PRODUCT),
      os: os.type(),
      os_version: os.release(),
      arch: process.arch,
      public_key: crypto.createPublicKey(o.clientKey.privateKey).export({ type: 'spki', format: 'der' }).toString('base64'),
      attestation_challenge: attestationChallenge(o.clientKey.jkt, o.nonce),
      ...o.posture,
    },
    attestation_timestamp: o.now ?? Math.floor(Date.now() / 1000),
  };
}

/** `client_statement.platform` of this operating system. */
export function platformOf(p: NodeJS.Platform): string {
  if (p === 'linux') return 'linux';
  if (p === 'win32') return 'windows';
  if (p === 'darwin') return 'apple';
  if (p === 'android') return 'android';
  return 'other';
}
