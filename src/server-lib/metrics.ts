import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The process's Prometheus metrics (docs/requirements.md#practice-page-and-operations), counted
 * where things happen; `/metrics` on METRICS_PORT adds the gauges read at scrape time (queues,
 * pool, Redis). Label values come from small fixed sets (route templates, error codes, outcomes),
 * never from ids or user input.
 */
export const metricsRegistry = new Registry();

export const httpRequests = new Counter({
  name: 'terminus_http_requests_total',
  help: 'HTTP requests by method, route template and status',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [metricsRegistry],
});

export const httpDuration = new Histogram({
  name: 'terminus_http_request_duration_seconds',
  help: 'HTTP request latency by method, route template and status',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [metricsRegistry],
});

export const guardDecisions = new Counter({
  name: 'terminus_guard_decisions_total',
  help: 'Access guard answers: allowed resource requests, and refusals by wire error code',
  labelNames: ['decision', 'error'] as const,
  registers: [metricsRegistry],
});

export const bookings = new Counter({
  name: 'terminus_bookings_total',
  help: 'Appointment/$book requests by outcome',
  labelNames: ['outcome'] as const,
  registers: [metricsRegistry],
});

export const deliveries = new Counter({
  name: 'terminus_subscription_deliveries_total',
  help: 'Rest-hook notifications sent, by notification type and outcome',
  labelNames: ['type', 'outcome'] as const,
  registers: [metricsRegistry],
});

export const searchCache = new Counter({
  name: 'terminus_search_cache_total',
  help: 'Calendar window searches (store/search/window-cache.ts) answered from the cache (hit) or the store (miss)',
  labelNames: ['result'] as const,
  registers: [metricsRegistry],
});

export const storeRefusals = new Counter({
  name: 'terminus_db_refusals_total',
  help: 'Store operations that failed for want of the database: busy (no pool connection became free in time while the database answered) or unavailable (the database did not answer)',
  labelNames: ['reason'] as const,
  registers: [metricsRegistry],
});

export const dbReads = new Counter({
  name: 'terminus_db_reads_total',
  help: 'Reads and searches outside a transaction with DATABASE_READ_URL, by where they ran: replica, or primary (no replica had replayed the reader\'s last write, or all lag or are unreachable)',
  labelNames: ['target'] as const,
  registers: [metricsRegistry],
});

export const replicaLag = new Gauge({
  name: 'terminus_db_replica_lag_seconds',
  help: 'How far each read replica (DATABASE_READ_URL) was behind the primary at the last look, by WAL position; -1 while it cannot be reached',
  labelNames: ['replica'] as const,
  registers: [metricsRegistry],
});

export const trustListRefreshes = new Counter({
  name: 'terminus_trust_list_refreshes_total',
  help: 'Reads of a trust list (CARD_TSL) by outcome: ok, or why the list was refused (malformed, signature, signer, expired, rollback, unreachable)',
  labelNames: ['list', 'outcome'] as const,
  registers: [metricsRegistry],
});

export const trustListNextUpdate = new Gauge({
  name: 'terminus_trust_list_next_update_timestamp_seconds',
  help: 'NextUpdate of the trust list in use (Unix time): alert well before it passes',
  labelNames: ['list'] as const,
  registers: [metricsRegistry],
});

export const auditEvents = new Counter({
  name: 'terminus_audit_events_total',
  help: 'AuditEvents stored (src/audit/), by kind (rest, security) and outcome (0, 4, 8)',
  labelNames: ['kind', 'outcome'],
  registers: [metricsRegistry],
});

export const auditWriteSeconds = new Histogram({
  name: 'terminus_audit_write_seconds',
  help: 'From an access to its AuditEvent stored, through the group commit of reads (the delay AUDIT_MODE=sync adds to an answer)',
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  registers: [metricsRegistry],
});

export const auditFailures = new Counter({
  name: 'terminus_audit_failures_total',
  help: 'AuditEvents that could not be stored, by stage (store, link, checkpoint, purge); with AUDIT_MODE=sync the access was refused with 503',
  labelNames: ['stage'],
  registers: [metricsRegistry],
});

export const slotsRetired = new Counter({
  name: 'terminus_slots_retired_total',
  help: 'Free slots past SLOT_RETENTION_DAYS expunged with their index rows (src/booking/slot-retention.ts)',
  registers: [metricsRegistry],
});
