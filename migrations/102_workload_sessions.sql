-- Workload token exchange (CONTRACT 11): a service's session belongs to no registered client. Its
-- client_id names the workload (`issuer#sub`); the foreign key to guard_client (and its cascade on
-- a client's deletion) moves to a column that only registered clients' sessions fill.
ALTER TABLE guard_session ADD COLUMN workload boolean NOT NULL DEFAULT false;
ALTER TABLE guard_session ADD COLUMN registered_client_id text REFERENCES guard_client (client_id) ON DELETE CASCADE;
UPDATE guard_session SET registered_client_id = client_id;
ALTER TABLE guard_session DROP CONSTRAINT guard_session_client_id_fkey;
ALTER TABLE guard_session ADD CONSTRAINT guard_session_client_registered
  CHECK ((workload AND registered_client_id IS NULL) OR (NOT workload AND registered_client_id IS NOT DISTINCT FROM client_id));
-- The cascade from guard_client looks sessions up by it.
CREATE INDEX guard_session_registered_client ON guard_session (registered_client_id);
