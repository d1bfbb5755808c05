import type { Subscription } from '@medplum/fhirtypes';
import type { Repository } from '../store';
import type { SubscriptionStatusCode } from './backport';

/**
 * The server's own status changes (handshake answered → `active`; handshake or last delivery
 * attempt failed → `error`) written as a new version of the Subscription, so read and search show
 * them. Nothing changes when the client wrote a newer version meanwhile (`expectedVersion`): that
 * write decides.
 */
export async function setSubscriptionStatus(
  repository: Repository,
  id: string,
  expectedVersion: string | undefined,
  status: SubscriptionStatusCode,
  error?: string,
): Promise<boolean> {
  return repository.actingAs('system').withTransaction(async (tx) => {
    const row = await tx.readRow('Subscription', id, { forUpdate: true });
    if (!row || row.deleted) return false;
    const current = row.resource as Subscription;
    if (expectedVersion !== undefined && current.meta?.versionId !== expectedVersion) return false;
    if (current.status === status && (current.error ?? undefined) === error) return true;
    const next: Subscription = { ...current, status };
    if (error) next.error = error;
    else delete next.error;
    await tx.update(next);
    return true;
  });
}
