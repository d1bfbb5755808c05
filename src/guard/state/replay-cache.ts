import { stateKey, type SharedState } from './shared-state';

/**
 * Single-use identifiers across replicas (RFC 9449 §11.1 DPoP jti, RFC 7523 §3 assertion jti):
 * true exactly once per (namespace, key) until `expiresAt`.
 */
export function consumeOnce(state: SharedState, namespace: string, rawKey: string, expiresAt: Date, now: Date): Promise<boolean> {
  return state.firstUse(stateKey(namespace, rawKey), expiresAt, now);
}
