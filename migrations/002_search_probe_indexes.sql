-- Search evaluates its most selective filter through a lookup index and checks every other
-- filter per candidate id. These indexes make that per-id probe an index-only scan (all the
-- columns a probe tests are in the index); they replace the plain (resource_type, id) indexes.
DROP INDEX IF EXISTS search_token_owner;
DROP INDEX IF EXISTS search_reference_owner;
DROP INDEX IF EXISTS search_date_owner;
DROP INDEX IF EXISTS search_string_owner;
CREATE INDEX search_token_probe ON search_token (resource_type, id, param, code, system);
CREATE INDEX search_reference_probe ON search_reference (resource_type, id, param, target_type, target_id);
CREATE INDEX search_date_probe ON search_date (resource_type, id, param, low, high);
CREATE INDEX search_string_probe ON search_string (resource_type, id, param, norm);
