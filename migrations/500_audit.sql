-- The audit trail (src/audit/): every access to the repository as a FHIR AuditEvent (IHE BALP).
--
-- audit_event holds each AuditEvent's JSON exactly as hashed (`content`) and the columns its
-- search reads, derived from that JSON (`terminus audit verify` derives them again). Rows are
-- partitioned by month of `recorded`, so the retention purge drops a month's table instead of
-- deleting rows; the partitions are made ahead of time (src/audit/audit-store.ts).
--
-- Tamper evidence: a row is linked into one of the hash chains of audit_chain (`chain`, `seq`,
-- `prev_hash`, `hash` = SHA-256 over chain, seq, prev_hash and content). A write's AuditEvent
-- commits in the write's transaction unlinked (chain NULL) and is linked moments later; reads are
-- stored already linked. Linking locks the chain's row, so two replicas never fork a chain.
-- audit_checkpoint holds the signed statements of every chain's head (JWS, ES256, the guard's key),
-- each naming the previous one's hash.
CREATE TABLE audit_event (
  id uuid NOT NULL,
  recorded timestamptz NOT NULL,
  content text NOT NULL,
  chain integer,
  seq bigint,
  prev_hash bytea,
  hash bytea,
  type text NOT NULL,
  subtypes text[] NOT NULL,
  action text,
  outcome text NOT NULL,
  agents text[] NOT NULL,
  entities text[] NOT NULL,
  patients text[] NOT NULL,
  PRIMARY KEY (id, recorded)
) PARTITION BY RANGE (recorded);

CREATE INDEX audit_event_recorded ON audit_event (recorded DESC, id DESC);
CREATE INDEX audit_event_patients ON audit_event USING gin (patients);
CREATE INDEX audit_event_entities ON audit_event USING gin (entities);
CREATE INDEX audit_event_agents ON audit_event USING gin (agents);
CREATE INDEX audit_event_chain ON audit_event (chain, seq);
CREATE INDEX audit_event_unlinked ON audit_event (recorded) WHERE chain IS NULL;

CREATE TABLE audit_chain (
  chain integer PRIMARY KEY,
  head_seq bigint NOT NULL DEFAULT 0,
  head_hash bytea NOT NULL DEFAULT '\x0000000000000000000000000000000000000000000000000000000000000000'
);
-- Eight chains: concurrent linkers (replicas, a write's linking beside a read batch) take
-- different ones (FOR UPDATE SKIP LOCKED) instead of waiting for one.
INSERT INTO audit_chain (chain) SELECT generate_series(1, 8);

CREATE TABLE audit_checkpoint (
  id bigserial PRIMARY KEY,
  made_at timestamptz NOT NULL,
  jws text NOT NULL
);
