-- cadre task store, schema version 13: agent teams. Shared by SQLite and PostgreSQL.
-- A team is named by its lead's session and its name. Item and message numbers are small
-- per-team integers drawn from the team row's counters (the counter update also serialises
-- concurrent writers of one team on PostgreSQL).
--   teams          lead: the lead's name; next_item / next_message / next_member: the last
--                  number used.
--   team_members   one row per label; member_no: joining order (kept when it joins again);
--                  ended: the member ended (its claims were released).
--   team_messages  one row per recipient; delivered: handed over (taken) already.
--   team_board     status open | claimed | done; claimed_by: the holder (or finisher);
--                  note: why an item is open again.

CREATE TABLE teams (
    session_id    TEXT NOT NULL,
    name          TEXT NOT NULL,
    lead          TEXT NOT NULL,
    next_item     BIGINT NOT NULL DEFAULT 0,
    next_message  BIGINT NOT NULL DEFAULT 0,
    next_member   BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (session_id, name)
);

CREATE TABLE team_members (
    session_id  TEXT NOT NULL,
    team        TEXT NOT NULL,
    label       TEXT NOT NULL,
    member_no   BIGINT NOT NULL,
    agent       TEXT NOT NULL,
    task_id     TEXT,
    joined_at   BIGINT NOT NULL,
    ended       BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (session_id, team, label)
);

CREATE TABLE team_messages (
    session_id  TEXT NOT NULL,
    team        TEXT NOT NULL,
    id          BIGINT NOT NULL,
    recipient   TEXT NOT NULL,
    sender      TEXT NOT NULL,
    body        TEXT NOT NULL,
    delivered   BOOLEAN NOT NULL DEFAULT FALSE,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, team, id, recipient)
);

CREATE INDEX team_messages_undelivered
    ON team_messages (session_id, team, recipient) WHERE NOT delivered;

CREATE TABLE team_board (
    session_id  TEXT NOT NULL,
    team        TEXT NOT NULL,
    id          BIGINT NOT NULL,
    title       TEXT NOT NULL,
    detail      TEXT,
    status      TEXT NOT NULL DEFAULT 'open'
                CHECK (status = 'open' OR status = 'claimed' OR status = 'done'),
    added_by    TEXT NOT NULL,
    claimed_by  TEXT,
    result      TEXT,
    note        TEXT,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, team, id)
);
