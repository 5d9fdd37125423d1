-- PostgreSQL only: notifications for cross-node control, sent by triggers so that every
-- writer (request_cancel, transitions, the sweeper, restart recovery) is covered and the
-- notification is delivered only if the change commits.
--   cadre_task_cancel  payload: task id, when a non-terminal task's cancel flag is set
--   cadre_task_done    payload: task id, when a task reaches a terminal state

CREATE OR REPLACE FUNCTION cadre_notify_cancel() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('cadre_task_cancel', NEW.id);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION cadre_notify_done() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('cadre_task_done', NEW.id);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER tasks_cancel_requested
    AFTER UPDATE OF cancel_requested ON tasks
    FOR EACH ROW
    WHEN (NEW.cancel_requested AND NEW.status IN ('pending', 'running'))
    EXECUTE FUNCTION cadre_notify_cancel();

CREATE TRIGGER tasks_terminal
    AFTER UPDATE OF status ON tasks
    FOR EACH ROW
    WHEN (NEW.status IN ('completed', 'failed', 'cancelled')
          AND OLD.status NOT IN ('completed', 'failed', 'cancelled'))
    EXECUTE FUNCTION cadre_notify_done();
