-- Indexes a load into an empty store dropped to build them again after it (src/store/deferred-indexes.ts):
-- written before they are dropped, deleted as each is built again. A load that stopped before its
-- indexes were rebuilt (the process killed) leaves its rows here, and the next migration run
-- (every start) builds them.
CREATE TABLE deferred_index (
  name text PRIMARY KEY,
  definition text NOT NULL
);
