import type crypto from 'node:crypto';
import type { Admission } from '../../common/admission';

/** JWS algorithms of institution cards: ES256 (P-256), BP256R1 (brainpoolP256r1, as gematik's IDP names it), PS256 (RSA). */
export type CardAlg = 'ES256' | 'BP256R1' | 'PS256';

/**
 * The institution card (SMC-B) a login signs its subject token with, whichever holds its key: PEM
 * files or a PKCS#12 file in this process (software-card.ts), or the card itself behind the
 * practice's Konnektor (konnektor/konnektor-card.ts), whose key never leaves it.
 */
export interface InstitutionCard {
  /** The authentication certificate (C.AUT), as the subject token's x5c[0]. */
  readonly certificate: crypto.X509Certificate;
  /** Telematik-ID and professionOID from its admission extension; undefined without one. */
  readonly admission: Admission | undefined;
  readonly alg: CardAlg;
  /** Where the key is, for messages and `status` (never a secret). */
  readonly describe: string;
  /** A compact JWS (RFC 7515 §7.1) of `payload` signed with the card key, `x5c` naming the certificate. */
  signJwt(payload: Record<string, unknown>, headerOverrides?: Record<string, unknown>): Promise<string>;
}
