-- cadre task store, schema version 6: what adopting an orphan needs.
-- Shared by SQLite and PostgreSQL, like 0001_init.sql.
--   owner_epoch  the fencing epoch: bumped by every adoption, so a write that carries an
--                older epoch (a stale owner that came back) matches no row and is refused;
--   on_orphan    what the sweeper does with the task once its owner is lost: 'fail' it, or
--                leave it to be adopted ('resume');
--   resumes      how many times the task was adopted.

ALTER TABLE tasks ADD COLUMN owner_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN on_orphan TEXT NOT NULL DEFAULT 'fail'
    CHECK (on_orphan IN ('fail', 'resume'));
ALTER TABLE tasks ADD COLUMN resumes BIGINT NOT NULL DEFAULT 0;
