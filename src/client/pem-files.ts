import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SoftwareCard } from './software-card';
import { institutionCardChecks } from './card/card-checks';
import { ClientInputError } from './input-error';

export { ClientInputError };

type Kind = 'certificate' | 'private key';

/** RFC 7468 §5 (certificates), §10-11 (PKCS #8), and the SEC 1 and PKCS #1 labels OpenSSL writes. */
const LABELS: Record<Kind, string[]> = {
  certificate: ['CERTIFICATE'],
  'private key': ['PRIVATE KEY', 'EC PRIVATE KEY', 'RSA PRIVATE KEY'],
};

interface Pem {
  text: string;
  /** How an error names it: `file X` (with its absolute path when X is relative) or `PEM text`. */
  source: string;
}

/**
 * PEM given as text or as a file path (resolved against the working directory): checked to hold a
 * PEM block of the expected kind, or a `ClientInputError` naming the option, the file and what was
 * expected.
 */
export function readPem(value: string, o: { option: string; what: string; kind: Kind }): Pem {
  if (!value) throw new ClientInputError(o.option, `${o.what}: no file given (option ${o.option})`);
  const isText = value.includes('-----BEGIN');
  const abs = path.resolve(process.cwd(), value);
  const source = isText ? 'PEM text' : `file ${value}${abs === value ? '' : ` (${abs})`}`;
  const fail = (problem: string) => new ClientInputError(o.option, `${o.what} ${source} ${problem}`);
  let text = value;
  if (!isText) {
    try {
      text = fs.readFileSync(abs, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') throw fail(`does not exist (a relative path is resolved against the working directory ${process.cwd()})`);
      if (code === 'EISDIR') throw fail(`is a folder, not a PEM ${o.kind} file`);
      throw fail(`cannot be read (${code ?? (err as Error).message})`);
    }
  }
  const labels = [...text.matchAll(/-----BEGIN ([A-Z0-9 ]+)-----/g)].map((m) => m[1]).filter((l) => l !== 'EC PARAMETERS');
  if (labels.length === 0) throw fail(`is not PEM (no "-----BEGIN" line): expected a PEM ${o.kind}`);
  if (!LABELS[o.kind].includes(labels[0])) {
    if (labels[0] === 'ENCRYPTED PRIVATE KEY' && o.kind === 'private key') throw fail('is an encrypted private key: the client needs it unencrypted (openssl pkey -in KEY -out PLAIN_KEY)');
    const swapped = (o.kind === 'certificate') === /PRIVATE KEY/.test(labels[0]) ? ' (certificate and key swapped?)' : '';
    throw fail(`holds a PEM ${labels[0]}, expected a ${o.kind}${swapped}`);
  }
  return { text, source };
}

/**
 * The institution card from its certificate and key (file paths or PEM text), with every check a
 * login would otherwise fail on deep inside: PEM of the right kind, parseable, the key belonging to
 * the certificate, the admission extension (gemSpec_PKI: Telematik-ID and professionOID) present.
 */
export function loadCard(card: string | undefined, key: string | undefined): SoftwareCard {
  if (!card || !key) throw new ClientInputError(card ? 'key' : 'card', 'this needs the institution card: pass --card CERT.pem and --key KEY.pem (library: the card and key options)');
  const cert = readPem(card, { option: 'card', what: 'the card certificate', kind: 'certificate' });
  const priv = readPem(key, { option: 'key', what: 'the card key', kind: 'private key' });
  let x509: crypto.X509Certificate;
  try {
    x509 = new crypto.X509Certificate(cert.text);
  } catch (err) {
    throw new ClientInputError('card', `the card certificate ${cert.source} is not a valid X.509 certificate (${(err as Error).message})`);
  }
  let keyObject: crypto.KeyObject;
  try {
    keyObject = crypto.createPrivateKey(priv.text);
  } catch (err) {
    throw new ClientInputError('key', `the card key ${priv.source} is not a valid private key (${(err as Error).message})`);
  }
  const spki = (k: crypto.KeyObject) => k.export({ type: 'spki', format: 'der' });
  if (!spki(crypto.createPublicKey(keyObject)).equals(spki(x509.publicKey))) {
    throw new ClientInputError('key', `the card key ${priv.source} does not belong to the card certificate ${cert.source}`);
  }
  return institutionCardChecks(new SoftwareCard(cert.text, priv.text), `the card certificate ${cert.source}`, 'card');
}
