-- cadre task store, schema version 8: the spawn depth of a task's child, so that a node
-- adopting the task rebuilds the child at the depth it ran at (a child at the depth cap
-- must not come back with delegation tools). Shared by SQLite and PostgreSQL.
--   depth  1 for a child of the top-level agent, its parent's depth + 1 below; NULL for
--          tasks created before this version (an adopter treats it as the cap: the
--          narrowest rebuild).

ALTER TABLE tasks ADD COLUMN depth BIGINT;
