-- Hardware attestation (CONTRACT section 8): what a client proved at registration (the TPM's AK and
-- EK certificate, ...) and the registrations that wait for a challenge answer.
ALTER TABLE guard_client ADD COLUMN attestation jsonb;

-- A registration waiting for its challenge (TPM credential activation; later e-mail codes):
-- single use (consumed by DELETE ... RETURNING), a few wrong answers, then gone.
CREATE TABLE guard_registration_transaction (
  transaction_id  uuid        PRIMARY KEY,
  challenge_type  text        NOT NULL,
  -- SHA-256 of the expected answer; the answer itself is never stored
  answer_hash     bytea       NOT NULL,
  failures        integer     NOT NULL DEFAULT 0,
  -- the client record to insert once the answer is right
  client          jsonb       NOT NULL,
  expires_at      timestamptz NOT NULL
);
CREATE INDEX guard_registration_transaction_expiry ON guard_registration_transaction (expires_at);
