import crypto from 'node:crypto';
import * as pkijs from 'pkijs';
import { ADMISSION_OID, parseAdmission, type Admission } from '../common/admission';
import { signCompactJws } from './crypto';

/**
 * An institution card held in software (the dev PKI's PEM files): stands in for the connector's
 * ReadCardCertificate and ExternalAuthenticate.
 */
export class SoftwareCard {
  readonly certificate: crypto.X509Certificate;
  private readonly key: crypto.KeyObject;

  constructor(certPem: string, keyPem: string, private readonly chainPem: string[] = []) {
    this.certificate = new crypto.X509Certificate(certPem);
    this.key = crypto.createPrivateKey(keyPem);
  }

  /** Telematik-ID and professionOID from the admission extension (undefined when the card has none). */
  get admission(): Admission | undefined {
    const ext = pkijs.Certificate.fromBER(new Uint8Array(this.certificate.raw)).extensions?.find((e) => e.extnID === ADMISSION_OID);
    return ext ? parseAdmission(ext.extnValue.valueBlock.valueHexView) : undefined;
  }

  /** ES256 for P-256, BP256R1 for brainpoolP256r1, PS256 for RSA. */
  get alg(): 'ES256' | 'BP256R1' | 'PS256' {
    if (this.key.asymmetricKeyType === 'rsa') return 'PS256';
    return this.key.asymmetricKeyDetails?.namedCurve === 'brainpoolP256r1' ? 'BP256R1' : 'ES256';
  }

  /** Signs a JWT with the card key, the certificate (and chain) in `x5c`. */
  sign(payload: Record<string, unknown>, headerOverrides: Record<string, unknown> = {}): string {
    const x5c = [this.certificate.raw.toString('base64'), ...this.chainPem.map((p) => new crypto.X509Certificate(p).raw.toString('base64'))];
    return signCompactJws({ alg: this.alg, typ: 'JWT', x5c, ...headerOverrides }, payload, this.key);
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

/** Subject token. */
export function createSubjectToken(card: SoftwareCard, o: SubjectTokenOptions): string {
  const now = o.now ?? Math.floor(Date.now() / 1000);
  return card.sign(
    {
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
    },
    o.header,
  );
}
