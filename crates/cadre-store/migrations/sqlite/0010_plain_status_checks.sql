-- SQLite, schema version 10: the `tasks` table's status check and the checkpoint cleanup
-- trigger's condition written as `OR`s instead of `IN (…)` lists. SQLite builds a temporary
-- b-tree for a constant `IN` list of three or more values each time it evaluates one, and
-- these two ran on every task: the check on each insert and status change, the trigger's
-- condition on each status change. They cost a fifth of a task's insert and a third of its
-- terminal update. The rules are the same.
--
-- A check cannot be altered in SQLite, so the table is rebuilt (SQLite's documented
-- procedure; the migration runs with foreign keys off and checks them before it commits):
-- the same columns in the same order, its rows copied, its indexes and trigger made again.
-- PostgreSQL evaluates such lists well and keeps its schema.

CREATE TABLE tasks_rebuilt (
    id                  TEXT PRIMARY KEY NOT NULL,
    agent_id            TEXT NOT NULL,
    parent_agent_id     TEXT,
    parent_session_id   TEXT NOT NULL,
    child_session_id    TEXT,
    user_id             TEXT,
    status              TEXT NOT NULL
        CHECK (status = 'pending' OR status = 'running' OR status = 'completed'
               OR status = 'failed' OR status = 'cancelled'),
    prompt              TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    result              TEXT,
    error               TEXT,
    end_state           TEXT,
    cancel_requested    BOOLEAN NOT NULL DEFAULT FALSE,
    background          BOOLEAN NOT NULL DEFAULT FALSE,
    delivered           BOOLEAN NOT NULL DEFAULT FALSE,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    heartbeat_at        BIGINT,
    owner_node          TEXT NOT NULL,
    owner_instance      TEXT,
    transport           TEXT NOT NULL DEFAULT 'local',
    remote_task_id      TEXT,
    remote_headers      TEXT NOT NULL DEFAULT '{}',
    input_tokens        BIGINT NOT NULL DEFAULT 0,
    output_tokens       BIGINT NOT NULL DEFAULT 0,
    cached_input_tokens BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens  BIGINT NOT NULL DEFAULT 0,
    cost_nano_usd       BIGINT NOT NULL DEFAULT 0,
    unpriced_calls      BIGINT NOT NULL DEFAULT 0,
    owner_epoch         BIGINT NOT NULL DEFAULT 0,
    on_orphan           TEXT NOT NULL DEFAULT 'fail'
        CHECK (on_orphan = 'fail' OR on_orphan = 'resume'),
    resumes             BIGINT NOT NULL DEFAULT 0,
    served_task_id      TEXT,
    served_turn         BIGINT,
    served_message_id   TEXT,
    caller_task_id      TEXT,
    question            TEXT,
    answer              TEXT,
    depth               BIGINT
);

INSERT INTO tasks_rebuilt (
    id, agent_id, parent_agent_id, parent_session_id, child_session_id, user_id, status,
    prompt, description, result, error, end_state, cancel_requested, background, delivered,
    created_at, updated_at, heartbeat_at, owner_node, owner_instance, transport,
    remote_task_id, remote_headers, input_tokens, output_tokens, cached_input_tokens,
    cache_write_tokens, cost_nano_usd, unpriced_calls, owner_epoch, on_orphan, resumes,
    served_task_id, served_turn, served_message_id, caller_task_id, question, answer, depth)
SELECT
    id, agent_id, parent_agent_id, parent_session_id, child_session_id, user_id, status,
    prompt, description, result, error, end_state, cancel_requested, background, delivered,
    created_at, updated_at, heartbeat_at, owner_node, owner_instance, transport,
    remote_task_id, remote_headers, input_tokens, output_tokens, cached_input_tokens,
    cache_write_tokens, cost_nano_usd, unpriced_calls, owner_epoch, on_orphan, resumes,
    served_task_id, served_turn, served_message_id, caller_task_id, question, answer, depth
FROM tasks;

DROP TABLE tasks;
ALTER TABLE tasks_rebuilt RENAME TO tasks;

CREATE INDEX tasks_by_session ON tasks (parent_session_id, created_at);
CREATE INDEX tasks_by_created ON tasks (created_at);
CREATE INDEX tasks_active ON tasks (owner_node, status) WHERE status IN ('pending', 'running');
CREATE INDEX tasks_by_served ON tasks (served_task_id, served_turn)
    WHERE served_task_id IS NOT NULL;
CREATE INDEX tasks_by_caller_id ON tasks (caller_task_id) WHERE caller_task_id IS NOT NULL;

CREATE TRIGGER tasks_checkpoint_cleanup
    AFTER UPDATE OF status ON tasks
    FOR EACH ROW
    WHEN NEW.status = 'completed' OR NEW.status = 'failed' OR NEW.status = 'cancelled'
BEGIN
    DELETE FROM task_checkpoints WHERE task_id = NEW.id;
END;
