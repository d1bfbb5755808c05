import path from 'node:path';
import { parseArgs } from 'node:util';
import { createDevPki, DevPkiExists, writeDevPki } from '../guard';

const USAGE = 'usage: terminus dev-pki DIR [--force] [--ocsp-url URL]';

/**
 * `terminus dev-pki DIR`: a card CA and P-256 + brainpoolP256r1 institution cards as PEM; with
 * `--ocsp-url` the cards name that OCSP responder and a responder certificate is written too.
 */
export async function runDevPki(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args, allowPositionals: true, options: { force: { type: 'boolean' }, 'ocsp-url': { type: 'string' } } });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const [dir, ...rest] = parsed.positionals;
  const ocspUrl = parsed.values['ocsp-url'];
  if (!dir || rest.length > 0 || (ocspUrl !== undefined && !/^https?:\/\/\S+$/.test(ocspUrl))) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const pki = createDevPki({ ocspUrl });
  let written: string[];
  try {
    written = writeDevPki(path.resolve(dir), pki, { force: parsed.values.force });
  } catch (err) {
    if (err instanceof DevPkiExists) {
      process.stderr.write(`terminus dev-pki: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  process.stdout.write(
    `${written.map((p) => `wrote ${p}`).join('\n')}\n` +
      `trust the CA with CARD_TRUST_ANCHORS=${path.join(path.resolve(dir), 'card-ca.pem')}\n` +
      pki.cards.map((c) => `card ${c.curve}: Telematik-ID ${c.telematikId}, professionOID ${c.professionOid}`).join('\n') +
      '\n' +
      (ocspUrl
        ? `OCSP responder: openssl ocsp -index ${dir}/ocsp-index.txt -CA ${dir}/card-ca.pem -rsigner ${dir}/ocsp-responder.pem -rkey ${dir}/ocsp-responder.key.pem -port PORT\n`
        : ''),
  );
  return 0;
}
