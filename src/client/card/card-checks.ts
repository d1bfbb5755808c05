import { ClientInputError } from '../input-error';
import type { InstitutionCard } from './institution-card';

/**
 * What every card backend checks before a login would fail on it deep inside the guard: the
 * certificate's admission extension (gemSpec_PKI: Telematik-ID and professionOID) is there and
 * readable. `certificate` names it in messages, `option` where the card came from (`card`, `p12`, `konnektor`).
 */
export function institutionCardChecks<C extends InstitutionCard>(card: C, certificate: string, option: string): C {
  let admission: unknown;
  try {
    admission = card.admission;
  } catch (err) {
    throw new ClientInputError(option, `${certificate} has an unreadable admission extension (${(err as Error).message})`);
  }
  if (!admission) throw new ClientInputError(option, `${certificate} has no admission extension (Telematik-ID): not an institution card`);
  return card;
}
