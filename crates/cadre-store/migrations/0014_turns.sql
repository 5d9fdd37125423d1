-- cadre task store, schema version 14: how many model turns a task's run took, so that
-- `cadre tasks tree` can say where the turns went without reading each child's session.
-- Shared by SQLite and PostgreSQL.
--   turns  the model turns of the run that ended the task (an adopted task's last run
--          counts its turns since the checkpoint it resumed from); NULL while it runs, for
--          a task whose executor never reported them (a remote child), and for tasks
--          created before this version.

ALTER TABLE tasks ADD COLUMN turns BIGINT;
