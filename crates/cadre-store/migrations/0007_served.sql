-- cadre task store, schema version 7: what `cadre serve` keeps of the tasks it serves, so
-- that every node of the store, and the same node after a restart, shows them as their
-- callers know them. Shared by SQLite and PostgreSQL, like 0001_init.sql.
--   served_task_id     the served task a row is a turn of: its first turn's id (the row's
--                      own id for the first turn); an A2A task takes a row per message
--                      that starts work
--   served_turn        the turn's position in its served task (0 for the first)
--   served_message_id  the caller's message that started the turn
--   caller_task_id     the id the caller chose (the task protocol's task_id)
--   question           JSON: the approval question the task's agent waits on its caller for
--   answer             JSON: an answer to that question another node stored, until the
--                      owner takes it

ALTER TABLE tasks ADD COLUMN served_task_id TEXT;
ALTER TABLE tasks ADD COLUMN served_turn BIGINT;
ALTER TABLE tasks ADD COLUMN served_message_id TEXT;
ALTER TABLE tasks ADD COLUMN caller_task_id TEXT;
ALTER TABLE tasks ADD COLUMN question TEXT;
ALTER TABLE tasks ADD COLUMN answer TEXT;

CREATE INDEX tasks_by_served ON tasks (served_task_id, served_turn)
    WHERE served_task_id IS NOT NULL;
CREATE INDEX tasks_by_caller_id ON tasks (caller_task_id) WHERE caller_task_id IS NOT NULL;
