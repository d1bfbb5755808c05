/**
 * PostgreSQL bounds: with the database partitioned away, a request gets its 503 within 5 s instead
 * of waiting for TCP to give up. A pooled connection (or a free slot in the pool) must come within
 * STORE_CONNECT_TIMEOUT_MS, a statement's answer within STORE_QUERY_TIMEOUT_MS; a connection that
 * missed its answer is destroyed, never reused (`pg-pool.ts`).
 */
export const STORE_CONNECT_TIMEOUT_MS = 3000;
export const STORE_QUERY_TIMEOUT_MS = 3000;
/**
 * The server gives up a little before the client does: a statement the client stopped waiting
 * for must not commit afterwards (a refresh token consumed after its client was told 503).
 */
export const STORE_STATEMENT_TIMEOUT_MS = 2800;
