import crypto from 'node:crypto';
import { stateKey, type SharedState, type StateKey } from './shared-state';

export interface IssuedNonce {
  nonce: string;
  expiresIn: number;
}

/** 128 random bits, base64url (gemSpec A_28144). */
function newNonceValue(): string {
  return crypto.randomBytes(16).toString('base64url');
}

/** Stores a fresh nonce that `consumeNonce` accepts once, on any replica, for `ttlSec` seconds. */
export async function issueNonce(state: SharedState, now: Date, ttlSec: number): Promise<IssuedNonce> {
  const nonce = newNonceValue();
  await state.put(stateKey('nonce', nonce), new Date(now.getTime() + ttlSec * 1000));
  return { nonce, expiresIn: ttlSec };
}

/** The state key of a nonce a client sent; undefined for one that cannot be ours (wrong shape). */
export function nonceKey(nonce: string): StateKey | undefined {
  return /^[A-Za-z0-9_-]{1,64}$/.test(nonce) ? stateKey('nonce', nonce) : undefined;
}

/** Atomically removes the nonce; true when it existed and had not expired (single use). */
export async function consumeNonce(state: SharedState, nonce: string, now: Date): Promise<boolean> {
  const key = nonceKey(nonce);
  return key !== undefined && state.take(key, now);
}
