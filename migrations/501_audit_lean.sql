-- An audited read stores a row of about 2.3 KB, just above the size at which PostgreSQL tries to
-- compress a row before storing it (TOAST, about 2 KB): every row paid pglz's compression, a good
-- part of the store's work per audited read. lz4 compresses these rows about as small at a fraction
-- of the CPU. Partitions made from now on take the parent's method; the existing ones are set here
-- (rows already stored stay as they are). PGlite is built without lz4: there pglz stays.
DO $$
DECLARE
  part regclass;
BEGIN
  ALTER TABLE audit_event ALTER COLUMN content SET COMPRESSION lz4;
  FOR part IN SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'audit_event'::regclass LOOP
    EXECUTE format('ALTER TABLE %s ALTER COLUMN content SET COMPRESSION lz4', part);
  END LOOP;
EXCEPTION WHEN feature_not_supported THEN
  NULL;
END $$;

-- One GIN index over the three reference columns together instead of one each: every stored row
-- paid three GIN insertions (two of them, for a search's or security event's empty arrays, an
-- entry for "empty" all the same). A search names the concatenation (`src/audit/search.ts`), which
-- finds the candidate rows, and the column itself, which keeps exactly the rows it names.
DROP INDEX audit_event_patients;
DROP INDEX audit_event_entities;
DROP INDEX audit_event_agents;
CREATE INDEX audit_event_refs ON audit_event USING gin ((patients || entities || agents));
