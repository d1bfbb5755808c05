import crypto from 'node:crypto';
import * as pkijs from 'pkijs';
import { nodeCryptoEngine } from '../../common/pki/node-crypto-engine';

/** A certificate path that RFC 5280 validation refused; the message says which check. */
export class PathValidationError extends Error {}

const engine = nodeCryptoEngine;

/** Extensions this guard understands; any other critical extension makes a certificate unusable (RFC 5280 §4.2). */
const KNOWN_EXTENSIONS = new Set([
  '2.5.29.14', // subjectKeyIdentifier
  '2.5.29.35', // authorityKeyIdentifier
  '2.5.29.15', // keyUsage
  '2.5.29.37', // extKeyUsage
  '2.5.29.19', // basicConstraints
  '2.5.29.17', // subjectAltName
  '2.5.29.32', // certificatePolicies
  '2.5.29.31', // cRLDistributionPoints
  '1.3.6.1.5.5.7.1.1', // authorityInfoAccess
  '2.5.29.9', // subjectDirectoryAttributes
  '1.3.36.8.3.3', // admission (Common PKI)
]);

export interface ValidatedPath {
  /** Leaf first, trust anchor last. */
  path: pkijs.Certificate[];
  leaf: pkijs.Certificate;
}

/**
 * RFC 5280 path validation by pkijs (CertificateChainValidationEngine: path building, signatures,
 * validity at `at`, name chaining, CA flag and keyCertSign of every issuer, policies and name
 * constraints), plus the two checks that engine leaves out: pathLenConstraint of each issuer and
 * unknown critical extensions in any certificate of the path.
 */
export async function validatePath(leafDer: Buffer, intermediatesDer: Buffer[], anchorsDer: Buffer[], at: Date): Promise<ValidatedPath> {
  let leaf: pkijs.Certificate;
  let intermediates: pkijs.Certificate[];
  let anchors: pkijs.Certificate[];
  try {
    leaf = pkijs.Certificate.fromBER(new Uint8Array(leafDer));
    intermediates = intermediatesDer.map((d) => pkijs.Certificate.fromBER(new Uint8Array(d)));
    anchors = anchorsDer.map((d) => pkijs.Certificate.fromBER(new Uint8Array(d)));
  } catch {
    throw new PathValidationError('a certificate does not parse as DER X.509');
  }
  const validation = new pkijs.CertificateChainValidationEngine({ trustedCerts: anchors, certs: [...intermediates, leaf], checkDate: at });
  let result: pkijs.CertificateChainValidationEngineVerifyResult;
  try {
    result = await validation.verify({}, engine);
  } catch (err) {
    throw new PathValidationError(`no valid path to a trust anchor: ${describe(err)}`);
  }
  if (!result.result || !result.certificatePath) throw new PathValidationError(`no valid path to a trust anchor: ${result.resultMessage}`);
  const path = result.certificatePath;
  pathLengthsAreWithinConstraints(path);
  noUnknownCriticalExtension(path);
  return { path, leaf: path[0] };
}

function pathLengthsAreWithinConstraints(path: pkijs.Certificate[]): void {
  // path[0] is the leaf; path[i] (i ≥ 1) has i - 1 intermediate CAs below it.
  for (let i = 1; i < path.length; i++) {
    const bc = path[i].extensions?.find((e) => e.extnID === '2.5.29.19')?.parsedValue as pkijs.BasicConstraints | undefined;
    const limit = bc?.pathLenConstraint;
    const below = i - 1;
    // A self-issued anchor at the top does not count (RFC 5280 §6.1.4 (l)); ours are never between.
    if (typeof limit === 'number' && bc?.cA && below > limit) throw new PathValidationError(`a CA certificate allows ${limit} intermediate(s) below it, the path has ${below}`);
  }
}

function noUnknownCriticalExtension(path: pkijs.Certificate[]): void {
  for (const cert of path) {
    for (const ext of cert.extensions ?? []) {
      if (ext.critical && !KNOWN_EXTENSIONS.has(ext.extnID)) throw new PathValidationError(`a certificate carries the unknown critical extension ${ext.extnID}`);
    }
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === 'object' && err && 'resultMessage' in err) return String((err as { resultMessage: unknown }).resultMessage);
  return String(err);
}

/** The extended key usages of a certificate (OIDs), empty when it has none. */
export function extendedKeyUsages(cert: pkijs.Certificate): string[] {
  const ext = cert.extensions?.find((e) => e.extnID === '2.5.29.37');
  return (ext?.parsedValue as pkijs.ExtKeyUsage | undefined)?.keyPurposes ?? [];
}

/** DER SubjectPublicKeyInfo of a certificate as a Node key. */
export function certificatePublicKey(cert: pkijs.Certificate): crypto.KeyObject {
  return crypto.createPublicKey({ key: Buffer.from(cert.subjectPublicKeyInfo.toSchema().toBER(false)), format: 'der', type: 'spki' });
}
