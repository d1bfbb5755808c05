-- E-mail one-time codes of mobile registrations (CONTRACT 10). A transaction counts its own wrong
-- answers (TPM activation 3, e-mail codes 5) and, for e-mail codes, the mails sent and when; the
-- address is kept sealed (for a resend) and as a keyed hash, so one client key and address have at
-- most one open challenge.
ALTER TABLE guard_registration_transaction ADD COLUMN max_failures integer NOT NULL DEFAULT 3;
ALTER TABLE guard_registration_transaction ADD COLUMN client_jkt text;
ALTER TABLE guard_registration_transaction ADD COLUMN email_mac bytea;
ALTER TABLE guard_registration_transaction ADD COLUMN email_sealed text;
ALTER TABLE guard_registration_transaction ADD COLUMN mails integer NOT NULL DEFAULT 0;
ALTER TABLE guard_registration_transaction ADD COLUMN last_mail_at timestamptz;
CREATE UNIQUE INDEX guard_registration_transaction_one_email_challenge
  ON guard_registration_transaction (client_jkt, email_mac) WHERE email_mac IS NOT NULL;
