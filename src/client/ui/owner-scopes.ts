import type { CardChoice } from '../card/open-card';
import type { ClientSession } from '../session';

/** The scope the guard grants to REPOSITORY_OWNERS: confirm, decline, create calendars. */
export const OWNER_SCOPE = 'system/*.cruds';

const hasOwnerScope = (scope: string | undefined) => (scope ?? '').split(' ').includes(OWNER_SCOPE);

/**
 * Why the page's session cannot manage the repository, or undefined when it can. The guard grants
 * the owner scopes at the token exchange, after REPOSITORY_OWNERS as it is then, and a refresh
 * keeps the session's scopes: a session that began before the server listed the card has none,
 * though the card is an owner now. A second token exchange of the same client (kept nowhere,
 * revoked at once) tells that case from a card that is no owner.
 */
export async function ownerScopeWarning(session: ClientSession, login: CardChoice): Promise<string | undefined> {
  const scope = session.guard.tokens?.scope ?? '';
  if (hasOwnerScope(scope)) return undefined;
  if (hasOwnerScope(await scopeOfNewSession(session))) {
    return `this session has no owner scopes (${scope}): it began before the server listed this card in REPOSITORY_OWNERS, and a refresh keeps a session's scopes. Log in again to get them: terminus-client login --server ${shellWord(session.origin)} ${cardWords(login)}`;
  }
  return `this card has no owner scopes (${scope}); put its Telematik-ID into the server's REPOSITORY_OWNERS to confirm appointments and create calendars, then log in again (terminus-client login)`;
}

/** The scopes a token exchange gives this card now; undefined when the exchange fails (the warning then names the likelier cause). */
async function scopeOfNewSession(session: ClientSession): Promise<string | undefined> {
  try {
    const probe = await session.parallelSession();
    try {
      return (await probe.login()).scope;
    } finally {
      await probe.guard.revoke().catch(() => undefined);
    }
  } catch {
    return undefined;
  }
}

/** The card options of a login command line (the files, never a password). */
function cardWords(c: CardChoice): string {
  if (c.konnektor) return `--konnektor ${shellWord(c.konnektor)}`;
  if (c.p12) return `--p12 ${shellWord(c.p12)}`;
  return `--card ${shellWord(c.card ?? '')} --key ${shellWord(c.key ?? '')}`;
}

/** A word a POSIX shell reads back unchanged (IEEE Std 1003.1, 2.2.3 single quotes). */
function shellWord(v: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(v) ? v : `'${v.replace(/'/g, `'\\''`)}'`;
}
