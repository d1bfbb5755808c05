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
  -- compound rows there of resources with an owner: while a window has none, every viewer sees
  -- the same result (shared/owner.ts), so one cached result serves them all
  owned         bigint  NOT NULL DEFAULT 0,
  PRIMARY KEY (resource_type, ref, day)
);

INSERT INTO search_generation (resource_type, ref, day, generation, owned)
SELECT c.resource_type, c.ref, floor(extract(epoch FROM lower(c.during)) / 86400)::int, 1, count(*) FILTER (WHERE r.owner IS NOT NULL)
  FROM search_compound c JOIN resource r ON r.resource_type = c.resource_type AND r.id = c.id
 WHERE isfinite(lower(c.during))
 GROUP BY 1, 2, 3;
