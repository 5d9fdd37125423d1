//! Schema migrations: embedded SQL files applied in order, recorded in `cadre_schema`.
//!
//! Both backends share `migrations/0001_init.sql`, `0003_usage_cost.sql` and
//! `0004_checkpoints.sql`; PostgreSQL adds its notification triggers (`migrations/postgres/`,
//! version 2), version 5 (the checkpoint cleanup trigger) is written once per dialect, and
//! `0006_adoption.sql` (owner epochs and orphan policies), `0007_served.sql` (what `cadre
//! serve` keeps of its tasks), `0008_depth.sql` (the spawn depth of a task's child) and
//! `0009_owners.sql` (a task's owners over time) are shared again. SQLite's version 10
//! rewrites its status checks for speed (`migrations/sqlite/`). Version 11 drops the
//! checkpoint cleanup trigger in each dialect (the sweep deletes ended tasks' checkpoints in
//! bulk). `0012_parent_call.sql` (the parent's tool call a task answers), `0013_teams.sql`
//! (agent teams: members, messages, boards), `0014_turns.sql` (a run's model turns) and
//! `0015_trace_parent.sql` (the trace a task belongs to) are shared. Applying is serialised between processes: SQLite takes the write lock up front
//! (`BEGIN IMMEDIATE`), PostgreSQL a transaction-scoped advisory lock, so several `cadre`
//! processes starting at once apply each migration exactly once.
use crate::error::{StoreError, StoreResult};
use sqlx::{Connection, Executor, PgConnection, Row, SqliteConnection};

/// One embedded migration.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Version, strictly increasing.
    pub version: i64,
    /// Short name, checked against the recorded one.
    pub name: &'static str,
    /// The SQL (several statements).
    pub sql: &'static str,
}

const INIT: Migration = Migration {
    version: 1,
    name: "init",
    sql: include_str!("../../migrations/0001_init.sql"),
};

const USAGE_COST: Migration = Migration {
    version: 3,
    name: "usage_cost",
    sql: include_str!("../../migrations/0003_usage_cost.sql"),
};

const CHECKPOINTS: Migration = Migration {
    version: 4,
    name: "checkpoints",
    sql: include_str!("../../migrations/0004_checkpoints.sql"),
};

const ADOPTION: Migration = Migration {
    version: 6,
    name: "adoption",
    sql: include_str!("../../migrations/0006_adoption.sql"),
};

const SERVED: Migration = Migration {
    version: 7,
    name: "served",
    sql: include_str!("../../migrations/0007_served.sql"),
};

const DEPTH: Migration = Migration {
    version: 8,
    name: "depth",
    sql: include_str!("../../migrations/0008_depth.sql"),
};

const OWNERS: Migration = Migration {
    version: 9,
    name: "owners",
    sql: include_str!("../../migrations/0009_owners.sql"),
};

const PARENT_CALL: Migration = Migration {
    version: 12,
    name: "parent_call",
    sql: include_str!("../../migrations/0012_parent_call.sql"),
};

const TEAMS: Migration = Migration {
    version: 13,
    name: "teams",
    sql: include_str!("../../migrations/0013_teams.sql"),
};

const TURNS: Migration = Migration {
    version: 14,
    name: "turns",
    sql: include_str!("../../migrations/0014_turns.sql"),
};

const TRACE_PARENT: Migration = Migration {
    version: 15,
    name: "trace_parent",
    sql: include_str!("../../migrations/0015_trace_parent.sql"),
};

/// SQLite's own version 10: the status checks as `OR`s (a table rebuild).
const PLAIN_STATUS_CHECKS: Migration = Migration {
    version: 10,
    name: "plain_status_checks",
    sql: include_str!("../../migrations/sqlite/0010_plain_status_checks.sql"),
};

/// Version 11: no checkpoint cleanup trigger, each in its dialect.
const CHECKPOINTS_SWEPT: &str = "checkpoints_swept";

/// Migrations of the SQLite backend (version 2 is PostgreSQL's own).
pub const SQLITE_MIGRATIONS: &[Migration] = &[
    INIT,
    USAGE_COST,
    CHECKPOINTS,
    Migration {
        version: 5,
        name: "checkpoint_cleanup",
        sql: include_str!("../../migrations/sqlite/0005_checkpoint_cleanup.sql"),
    },
    ADOPTION,
    SERVED,
    DEPTH,
    OWNERS,
    PLAIN_STATUS_CHECKS,
    Migration {
        version: 11,
        name: CHECKPOINTS_SWEPT,
        sql: include_str!("../../migrations/sqlite/0011_checkpoints_swept.sql"),
    },
    PARENT_CALL,
    TEAMS,
    TURNS,
    TRACE_PARENT,
];

/// Migrations of the PostgreSQL backend.
pub const POSTGRES_MIGRATIONS: &[Migration] = &[
    INIT,
    Migration {
        version: 2,
        name: "notify",
        sql: include_str!("../../migrations/postgres/0002_notify.sql"),
    },
    USAGE_COST,
    CHECKPOINTS,
    Migration {
        version: 5,
        name: "checkpoint_cleanup",
        sql: include_str!("../../migrations/postgres/0005_checkpoint_cleanup.sql"),
    },
    ADOPTION,
    SERVED,
    DEPTH,
    OWNERS,
    Migration {
        version: 11,
        name: CHECKPOINTS_SWEPT,
        sql: include_str!("../../migrations/postgres/0011_checkpoints_swept.sql"),
    },
    PARENT_CALL,
    TEAMS,
    TURNS,
    TRACE_PARENT,
];

/// Advisory lock key for migrations ("cadre" in ASCII).
const PG_MIGRATION_LOCK: i64 = 0x63_6164_7265;

const SCHEMA_TABLE: &str = "CREATE TABLE IF NOT EXISTS cadre_schema (\
     version BIGINT PRIMARY KEY NOT NULL, name TEXT NOT NULL, applied_at BIGINT NOT NULL)";

/// Which migrations still have to be applied, given the recorded ones.
fn pending(
    all: &'static [Migration],
    applied: &[(i64, String)],
) -> StoreResult<Vec<&'static Migration>> {
    let newest = all.iter().map(|m| m.version).max().unwrap_or(0);
    for (v, name) in applied {
        match all.iter().find(|m| m.version == *v) {
            Some(m) if m.name == name => {}
            Some(m) => {
                return Err(StoreError::Migration(format!(
                    "version {v} is recorded as {name:?} but this build calls it {:?}",
                    m.name
                )));
            }
            None if *v > newest => {
                return Err(StoreError::Migration(format!(
                    "the database has schema version {v}, newer than this build ({newest})"
                )));
            }
            None => {}
        }
    }
    Ok(all
        .iter()
        .filter(|m| !applied.iter().any(|(v, _)| *v == m.version))
        .collect())
}

macro_rules! apply_steps {
    ($conn:expr, $all:expr) => {{
        (&mut *$conn).execute(SCHEMA_TABLE).await?;
        let rows = sqlx::query("SELECT version, name FROM cadre_schema")
            .fetch_all(&mut *$conn)
            .await?;
        let mut applied = Vec::with_capacity(rows.len());
        for r in &rows {
            applied.push((r.try_get::<i64, _>(0)?, r.try_get::<String, _>(1)?));
        }
        for m in pending($all, &applied)? {
            // A plain string runs unprepared: several statements in one go.
            (&mut *$conn)
                .execute(m.sql)
                .await
                .map_err(|e| StoreError::Migration(format!("{} ({}): {e}", m.version, m.name)))?;
            sqlx::query("INSERT INTO cadre_schema (version, name, applied_at) VALUES ($1, $2, $3)")
                .bind(m.version)
                .bind(m.name)
                .bind(crate::sql::now_ms())
                .execute(&mut *$conn)
                .await?;
        }
        Ok::<(), StoreError>(())
    }};
}

/// Apply the SQLite migrations on `conn` inside one `BEGIN IMMEDIATE` transaction.
///
/// Foreign keys are off meanwhile, as SQLite's procedure for rebuilding a table asks (with
/// them on, dropping `tasks` would delete its checkpoints and owners), and checked before
/// the transaction commits.
pub(crate) async fn migrate_sqlite(conn: &mut SqliteConnection) -> StoreResult<()> {
    // Outside a transaction: SQLite ignores this pragma inside one.
    conn.execute("PRAGMA foreign_keys = OFF").await?;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    apply_steps!(tx, SQLITE_MIGRATIONS)?;
    let broken = sqlx::query("PRAGMA foreign_key_check")
        .fetch_all(&mut *tx)
        .await?;
    if let Some(row) = broken.first() {
        let table: String = row.try_get(0)?;
        return Err(StoreError::Migration(format!(
            "{} rows of {table} (and maybe other tables) name a row that does not exist",
            broken.len()
        )));
    }
    tx.commit().await?;
    conn.execute("PRAGMA foreign_keys = ON").await?;
    Ok(())
}

/// Apply the PostgreSQL migrations on `conn` inside one transaction holding the advisory lock.
pub(crate) async fn migrate_postgres(conn: &mut PgConnection) -> StoreResult<()> {
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(PG_MIGRATION_LOCK)
        .execute(&mut *tx)
        .await?;
    apply_steps!(tx, POSTGRES_MIGRATIONS)?;
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_checks_names_and_versions() {
        let all = POSTGRES_MIGRATIONS;
        assert_eq!(pending(all, &[]).unwrap().len(), 14);
        assert_eq!(pending(all, &[(1, "init".into())]).unwrap()[0].version, 2);
        // SQLite has no version 2: a database at 1 gets 3 to 15.
        let sqlite = pending(SQLITE_MIGRATIONS, &[(1, "init".into())]).unwrap();
        assert_eq!(
            sqlite.iter().map(|m| m.version).collect::<Vec<_>>(),
            [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
        );
        assert!(pending(all, &[(1, "other".into())]).is_err());
        assert!(pending(all, &[(16, "future".into())]).is_err());
    }
}
