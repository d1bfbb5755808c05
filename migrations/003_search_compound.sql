-- Compound search index: one row per (reference, token, date) combination of a resource, for
-- parameter triples that clients query together (ISiK: Slot?schedule=X&status=free&start=ge..&
-- start=le..). A GiST index over all four columns answers such a query with one index scan
-- instead of one probe per slot of the schedule. Which triples: COMPOUND_INDEXES in
-- src/store/search/parameters.ts.
CREATE TABLE search_compound (
  resource_type text      NOT NULL,
  id            text      NOT NULL,
  -- `Type/id` of the reference parameter's target
  ref           text      NOT NULL,
  -- the token parameter's code (its system is not kept: filters with a system are not served here)
  code          text      NOT NULL,
  -- the date parameter's inclusive range
  during        tstzrange NOT NULL
);
CREATE INDEX search_compound_lookup ON search_compound USING gist (resource_type, ref, code, during);
CREATE INDEX search_compound_owner ON search_compound (resource_type, id);

INSERT INTO search_compound (resource_type, id, ref, code, during)
SELECT r.resource_type, r.id, r.target_type || '/' || r.target_id, t.code, tstzrange(d.low, d.high, '[]')
  FROM search_reference r
  JOIN search_token t ON t.resource_type = r.resource_type AND t.id = r.id AND t.param = 'status' AND t.code IS NOT NULL
  JOIN search_date d ON d.resource_type = r.resource_type AND d.id = r.id AND d.param = 'start'
 WHERE r.resource_type = 'Slot' AND r.param = 'schedule' AND r.target_type IS NOT NULL AND r.target_id IS NOT NULL;
