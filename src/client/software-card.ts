import crypto from 'node:crypto';
import * as pkijs from 'pkijs';
import { ADMISSION_OID, parseAdmission, type Admission } from '../common/admission';
import { signCompactJws } from './crypto';
import type { CardAlg, InstitutionCard } from './card/institution-card';

/**
 * An institution card whose key this process holds: PEM files (the development PKI) or a PKCS#12
 * file (card/p12-card.ts). Behind a Konnektor the key stays on the card (card/konnektor).
 */
export class SoftwareCard implements InstitutionCard {
  readonly certificate: crypto.X509Certificate;
  private readonly key: crypto.KeyObject;

  constructor(
    certPem: string,
    keyPem: string | crypto.KeyObject,
    private readonly chainPem: string[] = [],
    readonly describe = 'the card key in PEM files',
  ) {
    this.certificate = new crypto.X509Certificate(certPem);
    this.key = typeof keyPem === 'string' ? crypto.createPrivateKey(keyPem) : keyPem;
  }

  /** Telematik-ID and professionOID from the admission extension (undefined when the card has none). */
  get admission(): Admission | undefined {
    const ext = pkijs.Certificate.fromBER(new Uint8Array(this.certificate.raw)).extensions?.find((e) => e.extnID === ADMISSION_OID);
    return ext ? parseAdmission(ext.extnValue.valueBlock.valueHexView) : undefined;
  }

  /** ES256 for P-256, BP256R1 for brainpoolP256r1, PS256 for RSA. */
  get alg(): CardAlg {
    if (this.key.asymmetricKeyType === 'rsa') return 'PS256';
    return this.key.asymmetricKeyDetails?.namedCurve === 'brainpoolP256r1' ? 'BP256R1' : 'ES256';
  }

  /** Signs a JWT with the card key, the certificate (and chain) in `x5c`. */
  sign(payload: Record<string, unknown>, headerOverrides: Record<string, unknown> = {}): string {
    const x5c = [this.certificate.raw.toString('base64'), ...this.chainPem.map((p) => new crypto.X509Certificate(p).raw.toString('base64'))];
    return signCompactJws({ alg: this.alg, typ: 'JWT', x5c, ...headerOverrides }, payload, this.key);
  }

  async signJwt(payload: Record<string, unknown>, headerOverrides: Record<string, unknown> = {}): Promise<string> {
    return this.sign(payload, headerOverrides);
  }
}

export interface SubjectTokenOptions {
  clientId: string;
  telematikId: string;
  tokenEndpoint: string;
  nonce: string;
  clientJkt: string;
  dpopJkt: string;
  now?: number;
  claims?: Record<string, unknown>;
  header?: Record<string, unknown>;
}

/** Subject token (signed in this process). */
export function createSubjectToken(card: SoftwareCard, o: SubjectTokenOptions): string {
  return card.sign(subjectTokenClaims(o), o.header);
}

/** Subject token, signed by any card backend (a Konnektor answers asynchronously). */
export function signSubjectToken(card: InstitutionCard, o: SubjectTokenOptions): Promise<string> {
  return card.signJwt(subjectTokenClaims(o), o.header);
}

/** The subject token's claims (gemSpec_ZETA subject-token-smb): the card's Telematik-ID bound to client, DPoP key and nonce. */
function subjectTokenClaims(o: SubjectTokenOptions): Record<string, unknown> {
  const now = o.now ?? Math.floor(Date.now() / 1000);
  return {
    jti: crypto.randomUUID(),
    iss: o.clientId,
    sub: o.telematikId,
    aud: [o.tokenEndpoint],
    iat: now,
    exp: now + 120,
    nonce: o.nonce,
    client_key: { jkt: o.clientJkt },
    dpop_key: { jkt: o.dpopJkt },
    ...o.claims,
  };
}
