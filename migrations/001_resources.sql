-- FHIR resource store: current version, every version, and typed search indexes written at
-- write time (extracted with the SearchParameter FHIRPath expressions).
CREATE EXTENSION IF NOT EXISTS btree_gist SCHEMA public;

CREATE TABLE resource (
  resource_type text        NOT NULL,
  id            text        NOT NULL,
  version_id    integer     NOT NULL,
  last_updated  timestamptz NOT NULL,
  deleted       boolean     NOT NULL DEFAULT false,
  -- Telematik-ID of the institution that created the resource; NULL = the repository itself.
  owner         text,
  content       jsonb       NOT NULL,
  PRIMARY KEY (resource_type, id)
);
CREATE INDEX resource_type_updated ON resource (resource_type, last_updated);

CREATE TABLE resource_version (
  resource_type text        NOT NULL,
  id            text        NOT NULL,
  version_id    integer     NOT NULL,
  last_updated  timestamptz NOT NULL,
  deleted       boolean     NOT NULL DEFAULT false,
  content       jsonb       NOT NULL,
  PRIMARY KEY (resource_type, id, version_id)
);

CREATE TABLE search_token (
  resource_type text NOT NULL,
  id            text NOT NULL,
  param         text NOT NULL,
  system        text,
  code          text
);
CREATE INDEX search_token_lookup ON search_token (resource_type, param, code, system, id);
CREATE INDEX search_token_owner ON search_token (resource_type, id);

CREATE TABLE search_reference (
  resource_type text NOT NULL,
  id            text NOT NULL,
  param         text NOT NULL,
  target_type   text,
  target_id     text,
  -- the reference as written (absolute URLs, canonicals)
  target_url    text NOT NULL
);
CREATE INDEX search_reference_lookup ON search_reference (resource_type, param, target_id, id);
CREATE INDEX search_reference_target ON search_reference (target_type, target_id);
CREATE INDEX search_reference_owner ON search_reference (resource_type, id);

CREATE TABLE search_date (
  resource_type text        NOT NULL,
  id            text        NOT NULL,
  param         text        NOT NULL,
  low           timestamptz NOT NULL,
  high          timestamptz NOT NULL
);
CREATE INDEX search_date_lookup ON search_date (resource_type, param, low, id);
CREATE INDEX search_date_owner ON search_date (resource_type, id);

CREATE TABLE search_string (
  resource_type text NOT NULL,
  id            text NOT NULL,
  param         text NOT NULL,
  -- lower-cased, accents removed: default and :contains matching
  norm          text NOT NULL,
  -- as written: :exact matching
  exact         text NOT NULL
);
CREATE INDEX search_string_lookup ON search_string (resource_type, param, norm text_pattern_ops);
CREATE INDEX search_string_owner ON search_string (resource_type, id);
