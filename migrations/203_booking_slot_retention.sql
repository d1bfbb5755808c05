-- Retiring past free slots (SLOT_RETENTION_DAYS, src/booking/slot-retention.ts): the free slots in
-- order of their end, so each batch reads only the slots it removes, however many are stored.
CREATE INDEX booking_slot_free_ends ON booking_slot (upper(during), slot_id) WHERE status = 'free';
