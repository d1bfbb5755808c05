import type { Db } from '../../../store';

/**
 * Raises the client's stored App Attest counter to `signCount`, in the statement that checks it is
 * above the stored one (a replay on another replica loses too): whether it was raised.
 */
export async function raiseAssertionCounter(db: Db, clientId: string, signCount: number): Promise<boolean> {
  const raised = await db.query(
    `UPDATE guard_client SET attestation = jsonb_set(attestation, '{platform_a,counter}', to_jsonb($2::bigint))
      WHERE client_id = $1 AND (attestation #>> '{platform_a,counter}')::bigint < $2 RETURNING client_id`,
    [clientId, signCount],
  );
  return raised.rows.length > 0;
}
