import crypto from 'node:crypto';
import fs from 'node:fs';
import tls from 'node:tls';

/** What the server presents: the PEM chain and key as read, and the certificates it names. */
export interface TlsCredentials {
  cert: string;
  key: string;
  leaf: crypto.X509Certificate;
  /** The certificate after the server's in the chain: the issuer an OCSP request names. */
  issuer?: crypto.X509Certificate;
  /** Changes whenever either file's content does. */
  version: string;
}

/** TLS files that cannot serve (unreadable, no certificate, a key of another certificate); the message names the file. */
export class TlsFilesUnusable extends Error {
  constructor(
    readonly variable: 'TLS_CERT_FILE' | 'TLS_KEY_FILE',
    message: string,
  ) {
    super(message);
  }
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** Reads and checks the pair: the server certificate first, then its chain; the key must be the certificate's. */
export function readTlsCredentials(certFile: string, keyFile: string): TlsCredentials {
  const cert = readText('TLS_CERT_FILE', certFile);
  const key = readText('TLS_KEY_FILE', keyFile);
  const pems = cert.match(PEM_CERTIFICATE) ?? [];
  if (pems.length === 0) throw new TlsFilesUnusable('TLS_CERT_FILE', `no PEM certificate (-----BEGIN CERTIFICATE-----) in ${certFile}`);
  const [leaf, issuer] = pems.slice(0, 2).map((pem, i) => {
    try {
      return new crypto.X509Certificate(pem);
    } catch (err) {
      throw new TlsFilesUnusable('TLS_CERT_FILE', `certificate ${i + 1} in ${certFile} does not parse: ${(err as Error).message}`);
    }
  });
  let privateKey: crypto.KeyObject;
  try {
    privateKey = crypto.createPrivateKey(key);
  } catch {
    throw new TlsFilesUnusable('TLS_KEY_FILE', `${keyFile} holds no PEM private key`);
  }
  if (!leaf.checkPrivateKey(privateKey)) throw new TlsFilesUnusable('TLS_KEY_FILE', `the key in ${keyFile} does not belong to the first certificate in ${certFile}`);
  try {
    tls.createSecureContext({ cert, key });
  } catch (err) {
    throw new TlsFilesUnusable('TLS_CERT_FILE', `${certFile} and ${keyFile} do not make a TLS context: ${(err as Error).message}`);
  }
  const version = crypto.createHash('sha256').update(cert).update('\0').update(key).digest('hex').slice(0, 16);
  return { cert, key, leaf, issuer, version };
}

function readText(variable: TlsFilesUnusable['variable'], file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new TlsFilesUnusable(variable, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}
