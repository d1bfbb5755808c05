-- Asynchronous requests (FHIR async pattern, `Prefer: respond-async`): state and result live
-- here so any replica answers the poll, whichever replica or queue backend ran the job.
CREATE TABLE async_job (
  id             text        PRIMARY KEY,
  kind           text        NOT NULL,
  -- institution that started it (NULL: the repository itself); others get 404 on poll
  owner          text,
  state          text        NOT NULL CHECK (state IN ('queued', 'running', 'completed', 'cancelled')),
  payload        jsonb       NOT NULL,
  attempts       integer     NOT NULL DEFAULT 0,
  max_attempts   integer     NOT NULL,
  -- a running job whose lease passed is considered abandoned (worker crash) and run again
  lease_until    timestamptz,
  result_status  integer,
  result_body    jsonb,
  result_headers jsonb,
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL,
  completed_at   timestamptz,
  -- results are kept 24 h, then the poll answers 404
  expires_at     timestamptz NOT NULL
);
CREATE INDEX async_job_open ON async_job (state, lease_until) WHERE state IN ('queued', 'running');
CREATE INDEX async_job_expires ON async_job (expires_at);

-- Identity of this store: names the BullMQ queue, so replicas sharing a database share a queue
-- and stores sharing one Redis (tests, several deployments) never take each other's jobs.
CREATE TABLE job_store_identity (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  store_id  text    NOT NULL
);
INSERT INTO job_store_identity (store_id) VALUES (md5(random()::text || clock_timestamp()::text));
