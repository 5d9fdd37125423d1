-- PostgreSQL: a task's checkpoint goes when the task ends (whoever ends it: its owner, the
-- sweeper, restart recovery). SQLite has the same trigger in its own dialect.

CREATE OR REPLACE FUNCTION cadre_checkpoint_cleanup() RETURNS trigger AS $$
BEGIN
    DELETE FROM task_checkpoints WHERE task_id = NEW.id;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER tasks_checkpoint_cleanup
    AFTER UPDATE OF status ON tasks
    FOR EACH ROW
    WHEN (NEW.status IN ('completed', 'failed', 'cancelled'))
    EXECUTE FUNCTION cadre_checkpoint_cleanup();
