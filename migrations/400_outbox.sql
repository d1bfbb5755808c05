-- The outbox becomes the store's, generic: any part records domain events about a resource in
-- the transaction of the change (store/outbox.ts), any part consumes them. The booking's
-- appointment events (contract in 200_booking.sql) are its first producer; the event type and
-- origin values are the producer's vocabulary, no longer fixed by the table.
ALTER TABLE booking_outbox RENAME TO outbox;
ALTER INDEX booking_outbox_pending RENAME TO outbox_pending;
ALTER TABLE outbox DROP CONSTRAINT booking_outbox_event_type_check;
ALTER TABLE outbox DROP CONSTRAINT booking_outbox_origin_check;
ALTER TABLE outbox ALTER COLUMN resource_type DROP DEFAULT;
ALTER TABLE outbox ADD CONSTRAINT outbox_event_type_named CHECK (event_type ~ '^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$');
