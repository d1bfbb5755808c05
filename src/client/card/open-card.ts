import { ClientInputError } from '../input-error';
import { loadCard } from '../pem-files';
import type { InstitutionCard } from './institution-card';
import { readP12Card } from './p12-card';

/** Where the institution card's key is: PEM files, a PKCS#12 file, or the card behind a Konnektor. */
export interface CardChoice {
  /** PEM certificate and key: file paths or PEM text. */
  card?: string;
  key?: string;
  /** A PKCS#12 file; its password from `p12Password` or TERMINUS_CLIENT_P12_PASSWORD. */
  p12?: string;
  p12Password?: string;
  /** A `.kon` file: the SMC-B behind the practice's Konnektor. */
  konnektor?: string;
}

/** The card of `o`: exactly one backend, each checked as far as it can be before a login. */
export async function openCard(o: CardChoice): Promise<InstitutionCard> {
  const chosen = [o.card || o.key ? 'card' : undefined, o.p12 ? 'p12' : undefined, o.konnektor ? 'konnektor' : undefined].filter((c) => c !== undefined);
  if (chosen.length > 1) throw new ClientInputError(chosen[1]!, `choose one card: PEM files (card and key), a PKCS#12 file (p12) or a Konnektor (konnektor), not ${chosen.join(' and ')}`);
  // SOAP and XML are loaded only by clients that reach their card through a Konnektor.
  if (o.konnektor) return (await import('./konnektor/konnektor-card')).openKonnektorCard(o.konnektor);
  if (o.p12) return readP12Card(o.p12, o.p12Password ?? process.env.TERMINUS_CLIENT_P12_PASSWORD);
  return loadCard(o.card, o.key);
}
