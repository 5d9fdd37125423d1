-- SQLite: a task's checkpoint goes when the task ends (whoever ends it: its owner, the
-- sweeper, restart recovery). PostgreSQL has the same trigger in its own dialect.

CREATE TRIGGER tasks_checkpoint_cleanup
    AFTER UPDATE OF status ON tasks
    FOR EACH ROW
    WHEN NEW.status IN ('completed', 'failed', 'cancelled')
BEGIN
    DELETE FROM task_checkpoints WHERE task_id = NEW.id;
END;
