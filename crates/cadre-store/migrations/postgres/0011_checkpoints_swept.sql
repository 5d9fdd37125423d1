-- PostgreSQL, schema version 11: an ended task's checkpoint is deleted by the sweep, in
-- bulk, no longer by a trigger on every end (see the SQLite file of this version).

DROP TRIGGER IF EXISTS tasks_checkpoint_cleanup ON tasks;
DROP FUNCTION IF EXISTS cadre_checkpoint_cleanup();
