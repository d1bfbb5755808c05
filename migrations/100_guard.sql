-- Access guard (authorization server): signing keys, registered clients, single-use state,
-- refresh-token families and rate-limit counters. Everything a replica needs lives here (or in
-- Redis when REDIS_URL is set), so replicas stay stateless.

CREATE TABLE guard_signing_key (
  kid            text        PRIMARY KEY,
  public_jwk     jsonb       NOT NULL,
  -- AES-256-GCM(iv || ciphertext || tag) of the PKCS#8 private key, base64; see src/guard/keys
  private_enc    text        NOT NULL,
  -- which key-encryption key sealed it (fingerprint), so a replica skips keys it cannot open
  kek_id         text        NOT NULL,
  created_at     timestamptz NOT NULL,
  -- stop signing with it after this instant
  retire_at      timestamptz NOT NULL,
  -- stop publishing it after this instant (retire_at + longest token lifetime)
  unpublish_at   timestamptz NOT NULL
);

CREATE TABLE guard_client (
  client_id            text        PRIMARY KEY,
  -- RFC 7638 thumbprint of the client instance key: one registration per key
  jkt                  text        NOT NULL UNIQUE,
  jwks                 jsonb       NOT NULL,
  client_name          text,
  grant_types          text[]      NOT NULL,
  redirect_uris        text[],
  attestation_type     text        NOT NULL,
  status               text        NOT NULL CHECK (status IN ('pending_attestation', 'active', 'pending_user_binding')),
  -- platform recorded at the first attested exchange; later statements must match it
  platform             text,
  issued_at            timestamptz NOT NULL,
  last_attested_at     timestamptz
);
CREATE INDEX guard_client_pending ON guard_client (issued_at) WHERE status = 'pending_attestation';

CREATE TABLE guard_nonce (
  nonce      text        PRIMARY KEY,
  expires_at timestamptz NOT NULL
);
CREATE INDEX guard_nonce_expiry ON guard_nonce (expires_at);

-- Single-use identifiers (DPoP jti, client-assertion jti, subject-token jti), per namespace.
CREATE TABLE guard_seen (
  namespace  text        NOT NULL,
  key        text        NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (namespace, key)
);
CREATE INDEX guard_seen_expiry ON guard_seen (expires_at);

-- A refresh-token family = one session (sid) of one client with one DPoP key.
CREATE TABLE guard_session (
  sid          text        PRIMARY KEY,
  client_id    text        NOT NULL REFERENCES guard_client (client_id) ON DELETE CASCADE,
  jkt          text        NOT NULL,
  -- identity and client data copied into every access token of the family
  claims       jsonb       NOT NULL,
  policy_input jsonb       NOT NULL,
  created_at   timestamptz NOT NULL,
  -- family lifetime cap: no refresh token of the family outlives it
  expires_at   timestamptz NOT NULL,
  revoked_at   timestamptz,
  revoked_why  text
);
CREATE INDEX guard_session_client ON guard_session (client_id);

CREATE TABLE guard_refresh_token (
  -- SHA-256 of the opaque token; the token itself is never stored
  token_hash  text        PRIMARY KEY,
  sid         text        NOT NULL REFERENCES guard_session (sid) ON DELETE CASCADE,
  issued_at   timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  consumed_at timestamptz
);
CREATE INDEX guard_refresh_token_sid ON guard_refresh_token (sid);

CREATE TABLE guard_rate_counter (
  key          text        NOT NULL,
  window_start bigint      NOT NULL,
  count        integer     NOT NULL,
  expires_at   timestamptz NOT NULL,
  PRIMARY KEY (key, window_start)
);
CREATE INDEX guard_rate_counter_expiry ON guard_rate_counter (expires_at);
