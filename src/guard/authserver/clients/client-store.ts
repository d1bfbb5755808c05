import type { JWK } from 'jose';
import type { AppContext } from '../../../context';
import { sqlState, SqlState } from '../../../store';
import { Conflict } from '../../errors';

export type ClientStatus = 'pending_attestation' | 'active' | 'pending_user_binding';

/** Client registration record plus what the AS keeps about it. */
export interface ClientRecord {
  clientId: string;
  jkt: string;
  jwks: { keys: JWK[] };
  clientName?: string;
  grantTypes: string[];
  redirectUris?: string[];
  attestationType: string;
  /** What the client proved at registration (`{tpm: {ak_public, ak_jkt, ek_certificate}}`), if anything. */
  attestation?: Record<string, unknown>;
  status: ClientStatus;
  platform?: string;
  issuedAt: Date;
  lastAttestedAt?: Date;
}

interface Row {
  client_id: string;
  jkt: string;
  jwks: { keys: JWK[] };
  client_name: string | null;
  grant_types: string[];
  redirect_uris: string[] | null;
  attestation_type: string;
  attestation: Record<string, unknown> | null;
  status: ClientStatus;
  platform: string | null;
  issued_at: Date;
  last_attested_at: Date | null;
}

/** Inserts the client; 409 `conflict` when its key (thumbprint) is registered already. */
export async function insertClient(ctx: AppContext, c: ClientRecord): Promise<void> {
  try {
    await ctx.db.query(
      `INSERT INTO guard_client (client_id, jkt, jwks, client_name, grant_types, redirect_uris, attestation_type, attestation, status, issued_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [
        c.clientId, c.jkt, JSON.stringify(c.jwks), c.clientName ?? null, c.grantTypes, c.redirectUris ?? null, c.attestationType,
        c.attestation ? JSON.stringify(c.attestation) : null, c.status, c.issuedAt,
      ],
    );
  } catch (err) {
    if (sqlState(err) === SqlState.uniqueViolation) throw new Conflict('a client with this client instance key is already registered');
    throw err;
  }
}

/** Whether a client with this key thumbprint is registered (pending ones included). */
export async function clientKeyIsRegistered(ctx: AppContext, jkt: string): Promise<boolean> {
  const r = await ctx.db.query('SELECT 1 FROM guard_client WHERE jkt = $1', [jkt]);
  return r.rows.length > 0;
}

/** The client, unless it is a pending registration older than `pendingTtlSec` (those expire unused). */
export async function findClient(ctx: AppContext, clientId: string, pendingTtlSec: number): Promise<ClientRecord | undefined> {
  // client_ids are UUIDs we issued; anything else cannot be one (and never reaches SQL).
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(clientId)) return undefined;
  const r = await ctx.db.query<Row>('SELECT * FROM guard_client WHERE client_id = $1', [clientId]);
  const row = r.rows[0];
  if (!row) return undefined;
  const client = fromRow(row);
  if (client.status === 'pending_attestation' && ctx.now().getTime() - client.issuedAt.getTime() > pendingTtlSec * 1000) return undefined;
  return client;
}

/**
 * Active clients by id, for client authentication on every token request. What authentication
 * and a refresh read of a client (its id, key and grant types) never changes once it is active
 * (clients are never deactivated; only pending registrations expire), so an entry needs no
 * invalidation across replicas. `fresh` (every grant that attests the client) reads the row: its
 * attestation state (the platform_a counter, last_attested_at) changes. Bounded; a full cache
 * starts over.
 */
export class ActiveClients {
  private readonly active = new Map<string, ClientRecord>();
  constructor(private readonly size = 10_000) {}

  async find(ctx: AppContext, clientId: string, pendingTtlSec: number, fresh: boolean): Promise<ClientRecord | undefined> {
    const known = fresh ? undefined : this.active.get(clientId);
    if (known) return known;
    const client = await findClient(ctx, clientId, pendingTtlSec);
    if (client?.status === 'active') {
      if (this.active.size >= this.size) this.active.clear();
      this.active.set(clientId, client);
    }
    return client;
  }
}

/** Removes pending registrations that were never used. */
export async function deleteExpiredPendingClients(ctx: AppContext, pendingTtlSec: number): Promise<number> {
  const r = await ctx.db.query("DELETE FROM guard_client WHERE status = 'pending_attestation' AND issued_at < $1", [
    new Date(ctx.now().getTime() - pendingTtlSec * 1000),
  ]);
  return r.rowCount;
}

/**
 * pending_attestation -> active after the first successful attested exchange (seed section 3):
 * the statement, given the SQL of its three values, for the statement that starts the session.
 */
export function recordAttestationSql(clientId: string, platform: string, at: string): string {
  return `UPDATE guard_client SET status = 'active', platform = COALESCE(platform, ${platform}), last_attested_at = ${at} WHERE client_id = ${clientId}`;
}

function fromRow(row: Row): ClientRecord {
  return {
    clientId: row.client_id,
    jkt: row.jkt,
    jwks: row.jwks,
    clientName: row.client_name ?? undefined,
    grantTypes: row.grant_types,
    redirectUris: row.redirect_uris ?? undefined,
    attestationType: row.attestation_type,
    attestation: row.attestation ?? undefined,
    status: row.status,
    platform: row.platform ?? undefined,
    issuedAt: new Date(row.issued_at),
    lastAttestedAt: row.last_attested_at ? new Date(row.last_attested_at) : undefined,
  };
}
