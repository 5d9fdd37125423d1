-- cadre task store, schema version 1.
-- Written in the subset of SQL that SQLite and PostgreSQL both accept, so both backends
-- share this file. Times are Unix milliseconds; booleans are BOOLEAN (0/1 in SQLite).

CREATE TABLE tasks (
    id                  TEXT PRIMARY KEY NOT NULL,      -- task_<uuid>
    agent_id            TEXT NOT NULL,
    parent_agent_id     TEXT,
    parent_session_id   TEXT NOT NULL,
    child_session_id    TEXT,
    user_id             TEXT,
    status              TEXT NOT NULL
        CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    prompt              TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    result              TEXT,
    error               TEXT,
    end_state           TEXT,                           -- completed | failed | cancelled | limit_reached:<limit>
    cancel_requested    BOOLEAN NOT NULL DEFAULT FALSE,
    background          BOOLEAN NOT NULL DEFAULT FALSE,
    delivered           BOOLEAN NOT NULL DEFAULT FALSE,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    heartbeat_at        BIGINT,
    owner_node          TEXT NOT NULL,
    owner_instance      TEXT,                           -- <pid>:<start ticks> of the owning process
    transport           TEXT NOT NULL DEFAULT 'local',  -- local | remote URL (no user info)
    remote_task_id      TEXT,
    remote_headers      TEXT NOT NULL DEFAULT '{}',     -- JSON object, references only
    input_tokens        BIGINT NOT NULL DEFAULT 0,
    output_tokens       BIGINT NOT NULL DEFAULT 0,
    cached_input_tokens BIGINT NOT NULL DEFAULT 0
);

CREATE INDEX tasks_by_session ON tasks (parent_session_id, created_at);
CREATE INDEX tasks_by_created ON tasks (created_at);
-- Only unfinished tasks: serves heartbeats, cancellation polls, sweeps and recovery, stays
-- small however many finished tasks accumulate, and costs little to maintain.
CREATE INDEX tasks_active ON tasks (owner_node, status) WHERE status IN ('pending', 'running');

CREATE TABLE live_children (
    agent_key         TEXT PRIMARY KEY NOT NULL,        -- agent:<id>:<uuid>
    parent_session_id TEXT NOT NULL,
    label             TEXT,
    agent_id          TEXT NOT NULL,
    child_session_id  TEXT NOT NULL,
    depth             BIGINT NOT NULL,
    created_at        BIGINT NOT NULL
);

-- Labels are unique per parent session, case-insensitively (NULL labels never collide).
CREATE UNIQUE INDEX live_children_label ON live_children (parent_session_id, lower(label));
CREATE INDEX live_children_by_session ON live_children (parent_session_id, created_at);
