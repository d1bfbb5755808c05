-- The Slot mirror (booking_slot, migrations 200 and 202) at a fraction of its cost per Slot write.
--
-- 1. The Schedule id is matched with an unbounded repetition and its length checked apart: the
--    bounded one (`{1,64}`) made PostgreSQL's regex engine build a 64-state automaton per match,
--    38 µs a Slot, three quarters of the cost of loading a Slot's booking row. Same rows: an id
--    is taken when the reference ends in `Schedule/` and 1 to 64 of R4's id characters.
-- 2. A slot's time is found through a B-tree over its start when it lasts at most 24 hours
--    (`short`): it overlaps a window only if it starts at most a day before the window, so one
--    range scan finds it (as migrations/009 does for the search tables). Longer slots keep a GiST
--    index of their own, nearly empty. A GiST insert cost 37 µs a Slot, a B-tree's a few.
CREATE OR REPLACE FUNCTION booking_mirror_slot() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  schedule_id text;
  starts timestamptz;
  ends timestamptz;
BEGIN
  DELETE FROM booking_slot WHERE slot_id = NEW.id;
  IF NEW.deleted OR NEW.content->>'start' IS NULL OR NEW.content->>'end' IS NULL THEN
    RETURN NULL;
  END IF;
  BEGIN
    starts := (NEW.content->>'start')::timestamptz;
    ends := (NEW.content->>'end')::timestamptz;
  EXCEPTION WHEN data_exception THEN
    -- unparsable times: such a slot cannot be booked, so it needs no lookup row
    RETURN NULL;
  END;
  IF starts >= ends THEN
    RETURN NULL;
  END IF;
  schedule_id := substring(NEW.content->'schedule'->>'reference' from 'Schedule/([A-Za-z0-9.-]+)$');
  IF length(schedule_id) > 64 THEN
    schedule_id := NULL;
  END IF;
  INSERT INTO booking_slot (slot_id, schedule_id, status, during, short)
  VALUES (NEW.id, schedule_id, coalesce(NEW.content->>'status', 'free'), tstzrange(starts, ends, '[)'),
          ends <= starts + interval '24 hours');
  RETURN NULL;
END
$$;

ALTER TABLE booking_slot ADD COLUMN short boolean NOT NULL DEFAULT false;
UPDATE booking_slot SET short = true
 WHERE isfinite(lower(during)) AND isfinite(upper(during)) AND upper(during) <= lower(during) + interval '24 hours';
DROP INDEX booking_slot_schedule_during;
CREATE INDEX booking_slot_window ON booking_slot (schedule_id, lower(during)) INCLUDE (during) WHERE short;
CREATE INDEX booking_slot_long ON booking_slot USING gist (schedule_id, during) WHERE NOT short;
