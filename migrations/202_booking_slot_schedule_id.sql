-- The Slot mirror keeps the Schedule's id only when the reference names one (R4 datatypes.html#id:
-- letters, digits, '-' and '.', at most 64 characters). A reference with anything else in its
-- last segment names no Schedule this repository can book, and its text, unbounded, would not
-- fit the GiST index (index row size) and fail the Slot's write.
CREATE OR REPLACE FUNCTION booking_mirror_slot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM booking_slot WHERE slot_id = NEW.id;
  IF NOT NEW.deleted THEN
    BEGIN
      INSERT INTO booking_slot (slot_id, schedule_id, status, during)
      SELECT NEW.id,
             substring(NEW.content->'schedule'->>'reference' from 'Schedule/([A-Za-z0-9.-]{1,64})$'),
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
