-- Subscriptions (issue 4): R5 topic-based subscriptions backported to R4 (ISiKSubscriptionTermin).
-- The Subscription resource stays the source of truth for what the client asked for (criteria,
-- channel, status); the rows below are what delivery needs and the resource must not show.

-- One row per Subscription, kept in step with the resource by the trigger below (so every write
-- path, REST, transaction Bundle or PATCH, is covered), plus the delivery state:
--   * headers_sealed: the real channel.header values, AES-GCM sealed (the resource keeps only the
--     masked form, ISiK "Funktionen und Interaktionen" point 9).
--   * events_since_start: the backport `events-since-subscription-start` counter; each matched
--     outbox event takes the next number.
--   * delivered_through: highest event number the endpoint acknowledged (2xx); events above it
--     are delivered in order, one notification at a time.
--   * failures / next_attempt_at: consecutive failed attempts and when to try again (backoff);
--     after the last attempt the subscription turns `error`.
--   * lease_until: a replica delivering to this endpoint holds it until then (one sender per
--     subscription keeps notifications in order; an expired lease means the sender died).
CREATE TABLE subscription_channel (
  id                 text        PRIMARY KEY,
  owner              text,
  deleted            boolean     NOT NULL DEFAULT false,
  status             text        NOT NULL,
  topic              text        NOT NULL,
  filter             text,
  endpoint           text,
  payload            text,
  heartbeat_s        integer,
  timeout_s          integer,
  max_count          integer,
  -- R4 Subscription.end: no events are numbered after it; the server turns it off once passed
  ends_at            timestamptz,
  headers_sealed     text,
  events_since_start bigint      NOT NULL DEFAULT 0,
  delivered_through  bigint      NOT NULL DEFAULT 0,
  failures           integer     NOT NULL DEFAULT 0,
  next_attempt_at    timestamptz,
  last_success_at    timestamptz,
  error_code         text,
  lease_until        timestamptz
);
CREATE INDEX subscription_channel_topic ON subscription_channel (topic) WHERE NOT deleted;
CREATE INDEX subscription_channel_due ON subscription_channel (status) WHERE NOT deleted;

-- Every event a subscription matched, numbered per subscription: serves notifications and
-- `$events` (eventsSinceNumber / eventsUntilNumber). outbox_id makes the fan-out idempotent.
CREATE TABLE subscription_event (
  subscription_id text        NOT NULL,
  event_number    bigint      NOT NULL,
  topic           text        NOT NULL,
  focus_type      text        NOT NULL,
  focus_id        text        NOT NULL,
  focus_version   integer     NOT NULL,
  deleted         boolean     NOT NULL DEFAULT false,
  occurred_at     timestamptz NOT NULL,
  outbox_id       bigint      NOT NULL,
  PRIMARY KEY (subscription_id, event_number),
  UNIQUE (subscription_id, outbox_id)
);

-- Mirror of the Subscription resources. Client writes pass the sealed headers through the
-- transaction-local setting `terminus.subscription_headers` (set by the subscriptions write hook
-- right before the write, consumed here); server-side writes (status changes) leave it unset and
-- keep the sealed headers. A Subscription moved (back) to `requested` starts a new handshake; one
-- coming from off or error skips the events numbered meanwhile (the client recovers them with
-- $events), one that was active keeps its undelivered events.
CREATE FUNCTION subscription_mirror() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  staged  text := nullif(current_setting('terminus.subscription_headers', true), '');
  c       jsonb := NEW.content;
  ch      jsonb := NEW.content->'channel';
  prev    subscription_channel%ROWTYPE;
BEGIN
  PERFORM set_config('terminus.subscription_headers', '', true);
  SELECT * INTO prev FROM subscription_channel WHERE id = NEW.id FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO subscription_channel (id, owner, deleted, status, topic) VALUES (NEW.id, NEW.owner, NEW.deleted, coalesce(c->>'status', 'requested'), coalesce(c->>'criteria', ''));
    SELECT * INTO prev FROM subscription_channel WHERE id = NEW.id FOR UPDATE;
    prev.status := NULL;
  END IF;
  UPDATE subscription_channel SET
    owner          = NEW.owner,
    deleted        = NEW.deleted,
    status         = coalesce(c->>'status', 'requested'),
    topic          = coalesce(c->>'criteria', ''),
    filter         = (SELECT e->>'valueString' FROM jsonb_array_elements(coalesce(c->'_criteria'->'extension', '[]'::jsonb)) e
                       WHERE e->>'url' = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-filter-criteria' LIMIT 1),
    endpoint       = ch->>'endpoint',
    payload        = ch->>'payload',
    heartbeat_s    = (SELECT (e->>'valueUnsignedInt')::integer FROM jsonb_array_elements(coalesce(ch->'extension', '[]'::jsonb)) e
                       WHERE e->>'url' = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-heartbeat-period' LIMIT 1),
    timeout_s      = (SELECT (e->>'valueUnsignedInt')::integer FROM jsonb_array_elements(coalesce(ch->'extension', '[]'::jsonb)) e
                       WHERE e->>'url' = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-timeout' LIMIT 1),
    max_count      = (SELECT (e->>'valuePositiveInt')::integer FROM jsonb_array_elements(coalesce(ch->'extension', '[]'::jsonb)) e
                       WHERE e->>'url' = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-max-count' LIMIT 1),
    ends_at        = (c->>'end')::timestamptz,
    headers_sealed = coalesce(staged, prev.headers_sealed)
  WHERE id = NEW.id;
  IF coalesce(c->>'status', 'requested') = 'requested' AND prev.status IS DISTINCT FROM 'requested' THEN
    -- A new handshake now, not after the backoff of the old channel. Only a subscription coming
    -- back from off or error skips its backlog; one that was active (a new header, endpoint or
    -- payload) keeps it and gets it after the handshake: nothing it was owed is dropped.
    UPDATE subscription_channel SET
      delivered_through = CASE WHEN prev.status IN ('off', 'error') THEN events_since_start ELSE delivered_through END,
      failures = 0, next_attempt_at = NULL, error_code = NULL, last_success_at = NULL
    WHERE id = NEW.id;
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER subscription_mirror AFTER INSERT OR UPDATE ON resource
  FOR EACH ROW WHEN (NEW.resource_type = 'Subscription') EXECUTE FUNCTION subscription_mirror();

-- Subscriptions stored before this migration.
UPDATE resource SET deleted = deleted WHERE resource_type = 'Subscription';
