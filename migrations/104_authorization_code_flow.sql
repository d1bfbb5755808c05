-- Authorization code with PAR and PKCE (CONTRACT 10). Each step of a patient's login leaves one
-- row, keyed by the SHA-256 of the handle it gave out and used at most once:
--   request_uri  POST /par, redeemed by GET /authorize (60 s);
--   login        the upstream IdP round trip, found by its `state` at the redirection endpoint;
--   code         this guard's authorization code, redeemed at the token endpoint (60 s).
-- `sid` is the session a code's tokens started: a second redemption revokes it, and marks
-- `reused_at` so a first redemption still finishing revokes its own session itself.
CREATE TABLE guard_authorization (
  handle_hash text        PRIMARY KEY,
  kind        text        NOT NULL CHECK (kind IN ('request_uri', 'login', 'code')),
  client_id   text        NOT NULL REFERENCES guard_client (client_id) ON DELETE CASCADE,
  data        jsonb       NOT NULL,
  created_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz,
  reused_at   timestamptz,
  sid         text
);
CREATE INDEX guard_authorization_expiry ON guard_authorization (expires_at);
CREATE INDEX guard_authorization_client ON guard_authorization (client_id);
