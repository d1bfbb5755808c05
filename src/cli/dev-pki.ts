import path from 'node:path';
import { createDevPki, writeDevPki } from '../guard';

/** `terminus dev-pki DIR`: a card CA and P-256 + brainpoolP256r1 institution cards as PEM. */
export async function runDevPki(args: string[]): Promise<number> {
  const dir = args[0];
  if (!dir || args.length > 1) {
    process.stderr.write('usage: terminus dev-pki DIR\n');
    return 2;
  }
  const pki = createDevPki();
  const written = writeDevPki(path.resolve(dir), pki);
  process.stdout.write(
    `${written.map((p) => `wrote ${p}`).join('\n')}\n` +
      `trust the CA with CARD_TRUST_ANCHORS=${path.join(path.resolve(dir), 'card-ca.pem')}\n` +
      pki.cards.map((c) => `card ${c.curve}: Telematik-ID ${c.telematikId}, professionOID ${c.professionOid}`).join('\n') +
      '\n',
  );
  return 0;
}
