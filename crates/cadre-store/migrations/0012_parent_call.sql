-- cadre task store, schema version 12: the parent's tool call a task answers, so that a
-- parent resumed after a crash finds the child its interrupted `task` call started (and
-- takes its end as that call's result) instead of delegating the same job again. Shared by
-- SQLite and PostgreSQL.
--   parent_call_id  the id of the parent's tool call that created the task; NULL for tasks
--                   started otherwise (a live child's message, `cadre serve`, a direct run)
--                   and for tasks created before this version.

ALTER TABLE tasks ADD COLUMN parent_call_id TEXT;
