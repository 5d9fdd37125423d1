-- cadre task store, schema version 15: the trace a task belongs to, so that a node adopting
-- it after a crash continues that trace instead of starting a new one. Shared by SQLite and
-- PostgreSQL.
--   trace_parent  the W3C `traceparent` of the span the task was started under (the
--                 spawning tool call's, or the served request's); NULL when telemetry was
--                 off then, and for tasks created before this version.

ALTER TABLE tasks ADD COLUMN trace_parent TEXT;
