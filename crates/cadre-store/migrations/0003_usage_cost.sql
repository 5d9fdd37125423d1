-- cadre task store, schema version 3: the cache writes and the cost of a task's usage.
-- Shared by SQLite and PostgreSQL, like 0001_init.sql. Cost is kept in nano-dollars so sums
-- are exact; unpriced_calls counts model calls whose price was unknown (then the cost is
-- unknown, never 0).

ALTER TABLE tasks ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN cost_nano_usd BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN unpriced_calls BIGINT NOT NULL DEFAULT 0;

-- Tasks recorded before costs were: their cost is unknown.
UPDATE tasks SET unpriced_calls = 1 WHERE input_tokens + output_tokens > 0;
