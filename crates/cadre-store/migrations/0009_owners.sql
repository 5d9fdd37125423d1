-- cadre task store, schema version 9: a task's owners over time, for `cadre tasks show`.
-- Shared by SQLite and PostgreSQL. An adoption writes it in the same transaction as its
-- compare-and-swap: the lost owner's row (when the task has none yet) and the adopter's. A
-- task never adopted has no rows: its one owner is the one its own row names.
--   epoch           the owner epoch the owner held
--   owner_node      its node
--   owner_instance  its process (`<pid>:<start ticks>`)
--   since           when it became the owner, Unix ms (the task's creation for epoch 0)

CREATE TABLE task_owners (
    task_id        TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    epoch          BIGINT NOT NULL,
    owner_node     TEXT NOT NULL,
    owner_instance TEXT,
    since          BIGINT NOT NULL,
    PRIMARY KEY (task_id, epoch)
);
