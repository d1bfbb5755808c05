-- Booking (issue 3): the invariants that make double booking impossible live here, in the
-- database, so every path (the $book operation, REST writes, transaction Bundles, imports,
-- concurrent replicas) is held to them. Application code checks first to give good errors;
-- these constraints decide races (scheduling.md / security.md 5.2: exclusion constraint).

-- Mirror of the Slot resources (kept in step by the trigger below):
-- lets the booking find a schedule's slots by time range without scanning resource JSON.
-- Only a lookup aid: the booking re-reads and locks the Slot resources it uses.
CREATE TABLE booking_slot (
  slot_id     text      PRIMARY KEY,
  schedule_id text,
  status      text      NOT NULL,
  during      tstzrange NOT NULL
);
CREATE INDEX booking_slot_schedule_during ON booking_slot USING gist (schedule_id, during);

-- One row per active (booked or pending) Appointment and Schedule it books: its [start, end).
-- Two active appointments can never overlap in one schedule's time window.
CREATE TABLE booking_reservation (
  appointment_id text      NOT NULL,
  schedule_id    text      NOT NULL,
  during         tstzrange NOT NULL,
  PRIMARY KEY (appointment_id, schedule_id),
  CONSTRAINT booking_reservation_no_overlap EXCLUDE USING gist (schedule_id WITH =, during WITH &&)
);

-- One row per Slot held by an active Appointment: a slot is never held twice, whatever the
-- times inside it.
CREATE TABLE booking_slot_hold (
  slot_id        text PRIMARY KEY,
  appointment_id text NOT NULL
);
CREATE INDEX booking_slot_hold_appointment ON booking_slot_hold (appointment_id);

-- Every Slot write, whatever the path (REST, Bundle, import, the booking itself), refreshes the
-- lookup row in the same transaction.
CREATE FUNCTION booking_mirror_slot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM booking_slot WHERE slot_id = NEW.id;
  IF NOT NEW.deleted THEN
    BEGIN
      INSERT INTO booking_slot (slot_id, schedule_id, status, during)
      SELECT NEW.id,
             substring(NEW.content->'schedule'->>'reference' from 'Schedule/([^/]+)$'),
             coalesce(NEW.content->>'status', 'free'),
             tstzrange((NEW.content->>'start')::timestamptz, (NEW.content->>'end')::timestamptz, '[)')
       WHERE NEW.content->>'start' IS NOT NULL AND NEW.content->>'end' IS NOT NULL
         AND (NEW.content->>'start')::timestamptz < (NEW.content->>'end')::timestamptz;
    EXCEPTION WHEN data_exception THEN
      -- unparsable times: such a slot cannot be booked, so it needs no lookup row
      NULL;
    END;
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER booking_mirror_slot AFTER INSERT OR UPDATE ON resource
  FOR EACH ROW WHEN (NEW.resource_type = 'Slot') EXECUTE FUNCTION booking_mirror_slot();

-- Slots stored before this migration.
UPDATE resource SET deleted = deleted WHERE resource_type = 'Slot';

-- Outbox of Appointment domain events, written in the same transaction as the change it
-- describes (so an event exists if and only if the change committed).
--
-- Contract for consumers (the subscriptions part):
--   * event_type 'appointment.cancelled': the Appointment moved to status cancelled (PATCH or
--     PUT by requestor or owner, a pending one declined by an owner, the old appointment of a
--     $book with cancelled-appt-id, a deleted active appointment, a booking cancelled because
--     its patient was deactivated or deleted).
--     'appointment.updated': any other change of an existing Appointment (pending confirmed to
--     booked, re-book in place through $book, other field changes). A new booking made by
--     $book records no event: its requestor gets the result in the response.
--   * resource_id / version_id: the Appointment and the version the change produced (read it
--     with vread; a deletion's version is the deleted marker).
--   * origin: 'repository' when the repository (embedded caller, import, owners of the
--     repository, CONTRACT section 4) made the change, 'requestor' when a requesting
--     institution did. ISiK 6 requires notifications at least for repository-side changes.
--   * owner: the institution the Appointment belongs to (NULL: the repository itself).
--   * id grows monotonically in allocation order, but transactions may commit out of id order:
--     consume with `WHERE processed_at IS NULL ORDER BY id ... FOR UPDATE SKIP LOCKED`, set
--     processed_at when delivered; never use a high-water mark on id alone.
CREATE TABLE booking_outbox (
  id            bigserial   PRIMARY KEY,
  event_type    text        NOT NULL CHECK (event_type IN ('appointment.updated', 'appointment.cancelled')),
  resource_type text        NOT NULL DEFAULT 'Appointment',
  resource_id   text        NOT NULL,
  version_id    integer     NOT NULL,
  origin        text        NOT NULL CHECK (origin IN ('repository', 'requestor')),
  owner         text,
  occurred_at   timestamptz NOT NULL,
  processed_at  timestamptz
);
CREATE INDEX booking_outbox_pending ON booking_outbox (id) WHERE processed_at IS NULL;
