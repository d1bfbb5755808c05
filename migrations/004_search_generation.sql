-- Generations of the compound index (issue 15): one counter per (type, reference target, UTC day
-- of the date parameter), raised in the statement that writes, changes or deletes a resource
-- with a compound row there (src/store/repository.ts). A cached search result of a window
-- (src/store/search/window-cache.ts) is valid while the sum of the counters of its days is
-- unchanged: every replica asks the same table, inside the writer's transaction, so no replica
-- answers from a result another one has already made stale. Rows are never deleted (the sum only
-- grows); one row per schedule and day with slots.
CREATE TABLE search_generation (
  resource_type text    NOT NULL,
  ref           text    NOT NULL,
  -- days since 1970-01-01 (UTC) of the date parameter's lower bound
  day           integer NOT NULL,
  generation    bigint  NOT NULL,
  PRIMARY KEY (resource_type, ref, day)
);
