-- SQLite, schema version 11: an ended task's checkpoint is deleted by the sweep, in bulk,
-- no longer by a trigger on every end. The trigger ran on each task's end, in the write
-- that reports the end, and deleted its rows one task at a time; reads of a checkpoint now
-- ask for an active task, so an ended task's rows are never read while they wait.
-- PostgreSQL drops its trigger in its own dialect.

DROP TRIGGER IF EXISTS tasks_checkpoint_cleanup;
