-- Index keys bounded in bytes (src/store/search/index-key.ts): a btree entry must fit in a third
-- of a page (2,704 bytes), and a text a client writes has no such bound. Every text in an indexed
-- column of the search tables is its bounded key: the value itself up to 128 UTF-8 bytes, else
-- its first 64 characters, ':' and the SHA-256 of its UTF-8 bytes in hex (at most 321 bytes).
-- The whole code, system and normalised string stay in unindexed columns for prefix and substring
-- matches. Rows written before whose values were long but compressed below the limit get their
-- keys here.
ALTER TABLE search_token ADD COLUMN code_full text, ADD COLUMN system_full text;
ALTER TABLE search_string ADD COLUMN norm_full text;

CREATE FUNCTION pg_temp.index_key(v text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN v IS NULL OR octet_length(v) <= 128 THEN v
              ELSE left(v, 64) || ':' || encode(sha256(convert_to(v, 'UTF8')), 'hex') END
$$;

UPDATE search_token SET code_full = code, code = pg_temp.index_key(code) WHERE octet_length(code) > 128;
UPDATE search_token SET system_full = system, system = pg_temp.index_key(system) WHERE octet_length(system) > 128;
UPDATE search_string SET norm_full = norm, norm = pg_temp.index_key(norm) WHERE octet_length(norm) > 128;
UPDATE search_reference SET target_type = pg_temp.index_key(target_type) WHERE octet_length(target_type) > 128;
UPDATE search_reference SET target_id = pg_temp.index_key(target_id) WHERE octet_length(target_id) > 128;
UPDATE search_compound SET code = pg_temp.index_key(code) WHERE octet_length(code) > 128;
