-- Token-and-date index: one row per (token, date) combination of a resource, for the parameter
-- pairs clients query together without a reference (Slot?service-type=X&start=ge..&start=le..).
-- Without it one of the two drives the search and the other is checked per candidate: every slot
-- of the service in the store, or every slot of the day in every calendar, so the cost grows with
-- the store. A GiST index over type, code and time answers the pair with one index scan. Which
-- pairs: TOKEN_DATE_INDEXES in src/store/search/parameters.ts; system and code hold the bounded
-- keys of search_token (migration 005).
CREATE TABLE search_token_date (
  resource_type text      NOT NULL,
  id            text      NOT NULL,
  system        text,
  code          text      NOT NULL,
  -- the date parameter's inclusive range
  during        tstzrange NOT NULL
);
CREATE INDEX search_token_date_lookup ON search_token_date USING gist (resource_type, code, during);
CREATE INDEX search_token_date_owner ON search_token_date (resource_type, id);

INSERT INTO search_token_date (resource_type, id, system, code, during)
SELECT t.resource_type, t.id, t.system, t.code, tstzrange(d.low, d.high, '[]')
  FROM search_token t
  JOIN search_date d ON d.resource_type = t.resource_type AND d.id = t.id AND d.param = 'start'
 WHERE t.resource_type = 'Slot' AND t.param = 'service-type' AND t.code IS NOT NULL;
