-- cadre task store, schema version 4: checkpoints of a child's conversation.
-- Shared by SQLite and PostgreSQL, like 0001_init.sql. A checkpoint is the child's messages
-- in order, appended at each turn boundary (never rewritten). A compaction starts a new
-- generation holding the whole compacted conversation; older generations are then deleted.
-- Large tool outputs are not here: the message holds the offload's preview and file path.

CREATE TABLE task_checkpoints (
    task_id    TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    generation BIGINT NOT NULL,   -- bumped by each compaction of the conversation
    seq        BIGINT NOT NULL,   -- the message's position in its generation, from 0
    message    TEXT NOT NULL,     -- one cadre_types::Message, JSON
    usage      TEXT NOT NULL,     -- the run's usage totals when the message was stored, JSON
    PRIMARY KEY (task_id, generation, seq)
);
