-- The additional security layer (ASL, CONTRACT 12). Server key sets: the static ECDH P-256 and
-- ML-KEM-768 keys every replica answers handshakes with, their signed public part as signed, the
-- private part sealed with GUARD_KEY_SECRET, and the CertData of their signer.
CREATE TABLE asl_server_key (
  id              text        PRIMARY KEY,
  signed_pub_keys bytea       NOT NULL,
  signature       bytea       NOT NULL,
  cert_hash       bytea       NOT NULL,
  cdv             integer     NOT NULL,
  private_keys    text        NOT NULL,
  kek_id          text        NOT NULL,
  cert_data       bytea       NOT NULL,
  created_at      timestamptz NOT NULL,
  rotate_at       timestamptz NOT NULL,
  expires_at      timestamptz NOT NULL
);
CREATE INDEX asl_server_key_cert ON asl_server_key (cert_hash, cdv);

-- Sessions by connection id: a handshake (M2 sent, M3 awaited) or an established session (its
-- keys), sealed; `enc_ctr` numbers the server's response frames (their IV) across replicas.
CREATE TABLE asl_session (
  cid        text        PRIMARY KEY,
  state      text        NOT NULL CHECK (state IN ('handshaking', 'established')),
  sealed     text        NOT NULL,
  enc_ctr    bigint      NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX asl_session_expiry ON asl_session (expires_at);
