//! The SQL implementation of [`TaskStore`]: one code path for SQLite and PostgreSQL.
//!
//! Every query is written once with `$N` placeholders and its arguments as values
//! ([`conn::Arg`]), and runs on either database: on PostgreSQL through sqlx, on SQLite
//! through rusqlite on threads of the store's own. Every write goes through the store's one
//! writer ([`writer`], the `on_writer!` macro), which runs the writes queued meanwhile in one
//! transaction: on SQLite on a connection of its own (writes of one process queue there
//! instead of spinning on the file lock; other processes are waited for with the busy
//! timeout), on PostgreSQL on a connection it keeps from the pool. Reads ([`Db::fetch`]) go
//! to SQLite's reader threads ([`readers`]) or the PostgreSQL pool.

/// Queue a write on the store's writer (see [`writer`]) and wait for its committed result:
/// `$body` runs with `$p` bound to the write connection (a [`conn::WriteConn`]) and `$a` to
/// (a reference to) the owned arguments `$args`, evaluates to the write's value and may use
/// `?`. It may run twice (again alone, when another write of its batch failed), so it must
/// not consume `$a`.
macro_rules! on_writer {
    ($db:expr, $args:expr, |$p:ident, $a:pat_param| $body:expr) => {
        $db.writer()
            .write($args, move |$p, $a| {
                Box::pin(async move { Ok::<_, $crate::error::StoreError>($body) })
            })
            .await
    };
}

mod checkpoints;
mod children;
mod conn;
mod gets;
mod liveness;
pub use liveness::{executor_died_message, executor_lost_message};
mod notify;
mod readers;
mod rows;
pub mod schema;
mod served;
mod tasks;
mod teams;
mod trait_impl;
mod writer;

use crate::config::{DEFAULT_CONNECT_TIMEOUT_SECS, StoreConfig};
use crate::error::{StoreError, StoreResult};
use crate::node::{NodeId, current_instance};
use crate::redact::redact_url;
use conn::{Arg, Row};
pub use gets::ReadStats;
use readers::Readers;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection};
use std::path::Path;
use std::time::Duration;
pub use writer::WriteStats;
use writer::Writer;

/// How long a SQLite connection waits for another process's write lock.
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Default polling interval of cancellation watches on SQLite.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(250);
/// Reader connections of the SQLite backend.
const SQLITE_READERS: usize = 4;
/// Connections of the PostgreSQL pool.
const PG_CONNECTIONS: u32 = 8;
/// How long opening a PostgreSQL store waits for its pool's other connections.
const PG_WARM_UP: Duration = Duration::from_secs(1);
/// Ids per statement of the statements that take a list of ids (heartbeats, batch delivery).
const ID_CHUNK: usize = 500;

/// `$first, $first+1, …` — `n` placeholders for an `IN (…)` list.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Which database a [`SqlStore`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// An embedded SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

#[derive(Clone)]
pub(crate) enum Db {
    Sqlite {
        writer: Writer,
        readers: Readers,
        gets: gets::Gets,
    },
    Postgres {
        writer: Writer,
        pool: PgPool,
        gets: gets::Gets,
    },
}

impl Db {
    /// The store's one writer.
    pub(crate) fn writer(&self) -> &Writer {
        match self {
            Db::Sqlite { writer, .. } | Db::Postgres { writer, .. } => writer,
        }
    }

    /// The coalesced reads of a task by id.
    pub(crate) fn gets(&self) -> &gets::Gets {
        match self {
            Db::Sqlite { gets, .. } | Db::Postgres { gets, .. } => gets,
        }
    }

    /// Run the read `sql` with `args` (bound to `$1…`): on a SQLite reader thread, or a
    /// connection of the PostgreSQL pool.
    pub(crate) async fn fetch(&self, sql: &str, args: Vec<Arg>) -> StoreResult<Vec<Row>> {
        match self {
            Db::Sqlite { readers, .. } => readers.fetch(sql.to_owned(), args).await,
            Db::Postgres { pool, .. } => conn::pg_fetch(pool, sql, &args).await,
        }
    }
}

/// A [`crate::TaskStore`] on SQLite or PostgreSQL.
pub struct SqlStore {
    db: Db,
    node: NodeId,
    instance: String,
    poll_interval: Duration,
    pg_events: tokio::sync::OnceCell<notify::PgEvents>,
}

impl std::fmt::Debug for SqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore")
            .field("backend", &self.backend())
            .field("node", &self.node)
            .finish()
    }
}

/// Open the store named by `url` (`sqlite://PATH`, `sqlite:PATH`, `postgres://...`,
/// `postgresql://...`), applying migrations. Tasks created through it are owned by `node`.
/// A database server is given the default connect timeout (5 s) to answer.
pub async fn open(url: &str, node: NodeId) -> StoreResult<SqlStore> {
    open_within(url, node, Duration::from_secs(DEFAULT_CONNECT_TIMEOUT_SECS)).await
}

/// [`open`], giving a database server `connect_timeout` to answer.
async fn open_within(url: &str, node: NodeId, connect_timeout: Duration) -> StoreResult<SqlStore> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return open_postgres(url, node, connect_timeout).await;
    }
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .filter(|p| !p.is_empty() && !p.contains(":memory:"));
    match path {
        Some(p) => open_sqlite(Path::new(p.split('?').next().unwrap_or(p)), node).await,
        None => Err(StoreError::BadUrl(redact_url(url))),
    }
}

/// Open the store a `[store]` section describes for `workspace` (URL from
/// `CADRE_STORE_URL`, `url` or the default file; node id from `node_id` or detected).
pub async fn open_config(cfg: &StoreConfig, workspace: &Path) -> StoreResult<SqlStore> {
    cfg.validate()?;
    open_within(
        &cfg.effective_url(workspace),
        cfg.node_id(workspace),
        cfg.connect_timeout(),
    )
    .await
}

fn sqlite_options(path: &Path) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(SQLITE_BUSY_TIMEOUT)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
}

fn is_sqlite_busy(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => d
            .code()
            .and_then(|c| c.parse::<i32>().ok())
            .is_some_and(|c| matches!(c & 0xff, 5 | 6)),
        _ => false,
    }
}

/// Open (creating if needed) a SQLite database file in WAL mode and apply migrations.
pub async fn open_sqlite(path: &Path, node: NodeId) -> StoreResult<SqlStore> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(dir).await?;
    }
    // Switching a new file to WAL takes a lock the busy timeout does not wait for, so a
    // process racing another one on a fresh file retries for a while.
    let boot = sqlite_options(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal);
    let mut attempt = 0u32;
    let mut conn = loop {
        match boot.connect().await {
            Ok(c) => break c,
            Err(e) if is_sqlite_busy(&e) && attempt < 100 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    schema::migrate_sqlite(&mut conn).await?;
    conn.close().await?;
    // WAL is a property of the file now; connections only set per-connection pragmas.
    // Each connection prepares the statements every task makes as it opens, as PostgreSQL's
    // do: a run's first tasks otherwise paid for parsing them on every connection (about
    // 40 µs for a statement naming every column of a task).
    let writer =
        Writer::start_sqlite(path, SQLITE_BUSY_TIMEOUT, tasks::hot_writes_sqlite()).await?;
    let readers = Readers::start(
        path,
        SQLITE_READERS,
        SQLITE_BUSY_TIMEOUT,
        &tasks::hot_reads_sqlite(),
    )
    .await?;
    // Half the readers, so that the other reads keep theirs.
    let gets = gets::Gets::start(gets::Source::Sqlite(readers.clone()), SQLITE_READERS / 2)?;
    Ok(SqlStore::new(
        Db::Sqlite {
            writer,
            readers,
            gets,
        },
        node,
    ))
}

/// Connect to PostgreSQL and apply migrations. A server that refuses the connection, or
/// does not answer within `connect_timeout`, is reported as [`StoreError::Unreachable`]
/// naming the host and port (a pool would keep retrying and say only "pool timed out").
pub async fn open_postgres(
    url: &str,
    node: NodeId,
    connect_timeout: Duration,
) -> StoreResult<SqlStore> {
    let options: PgConnectOptions = url.parse()?;
    let endpoint = format!("{}:{}", options.get_host(), options.get_port());
    // The first connection is made directly, so its error is the one reported; the
    // migrations run on it.
    let mut first = match tokio::time::timeout(connect_timeout, options.connect()).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(sqlx::Error::Io(e))) => {
            return Err(StoreError::Unreachable {
                endpoint,
                reason: io_reason(&e),
            });
        }
        Ok(Err(e)) => return Err(e.into()),
        Err(_) => {
            return Err(StoreError::Unreachable {
                endpoint,
                reason: format!(
                    "no answer within {}",
                    humantime::format_duration(connect_timeout)
                ),
            });
        }
    };
    schema::migrate_postgres(&mut first).await?;
    first.close().await?;
    // A connection is waited for no longer than the first one was: a database that is down
    // fails a read or write within that time, and the writes of a task's life are tried
    // again over it (create_retrying, transition_retrying), so a restart is waited out
    // while a caller still hears of an outage in seconds, not sqlx's default 30.
    //
    // Each connection prepares the statements every task makes as it opens (best effort:
    // a statement that cannot be prepared is prepared on first use instead).
    let pool = PgPoolOptions::new()
        .max_connections(PG_CONNECTIONS)
        .acquire_timeout(connect_timeout)
        .after_connect(|conn, _| Box::pin(prepare_hot(conn)))
        .connect_with(options)
        .await?;
    open_the_rest(&pool).await;
    let writer = Writer::start_postgres(pool.clone());
    // Half the pool, so that the writer, the other reads and the notifications keep theirs.
    let gets = gets::Gets::start(
        gets::Source::Postgres(pool.clone()),
        PG_CONNECTIONS as usize / 2,
    )?;
    Ok(SqlStore::new(Db::Postgres { writer, pool, gets }, node))
}

/// Prepare the statements every task makes on a new PostgreSQL connection; one that fails
/// is logged, and prepared on first use.
async fn prepare_hot(conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    use sqlx::Executor;
    for sql in tasks::hot_writes_pg().iter().chain(&tasks::hot_reads_pg()) {
        if let Err(e) = conn.prepare(sql.as_str()).await {
            tracing::warn!(error = %e, "store: preparing a statement on a new connection failed");
        }
    }
    Ok(())
}

/// Open the pool's other connections now, at once, for up to [`PG_WARM_UP`]: a new server
/// connection costs PostgreSQL more than many statements, and the first fan-out would
/// otherwise wait for each as it needs it (a fan-out of a hundred paid 0.2–0.3 ms a task
/// for them). Opening neither fails for them nor waits longer: a server with few free
/// connections serves the store on fewer, and the rest open on first use.
async fn open_the_rest(pool: &PgPool) {
    let all_open = std::sync::Arc::new(tokio::sync::Barrier::new(PG_CONNECTIONS as usize));
    let opening: Vec<_> = (0..PG_CONNECTIONS)
        .map(|_| {
            let (pool, all_open) = (pool.clone(), all_open.clone());
            tokio::spawn(async move {
                if let Ok(conn) = pool.acquire().await {
                    // Held until all are open (or the wait is over), so each is one of its own.
                    let _ = tokio::time::timeout(PG_WARM_UP, all_open.wait()).await;
                    drop(conn);
                }
            })
        })
        .collect();
    // The wait ends, the openings go on: an acquire dropped half-way through its connect left
    // the pool unable to serve on a server with few free connections.
    let all = futures::future::join_all(opening);
    if tokio::time::timeout(PG_WARM_UP, all).await.is_err() {
        tracing::debug!("store: not every connection of the pool opened at once");
    }
}

/// What a failed connect says, in lower case: `connection refused`, or the error's text.
fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
        std::io::ErrorKind::TimedOut => "connection timed out".to_string(),
        _ => e.to_string(),
    }
}

impl SqlStore {
    fn new(db: Db, node: NodeId) -> Self {
        SqlStore {
            db,
            node,
            instance: current_instance(),
            poll_interval: DEFAULT_POLL_INTERVAL,
            pg_events: tokio::sync::OnceCell::new(),
        }
    }

    /// Poll interval of SQLite cancellation watches (default 250 ms).
    pub fn with_poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every.max(Duration::from_millis(10));
        self
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        match self.db {
            Db::Sqlite { .. } => Backend::Sqlite,
            Db::Postgres { .. } => Backend::Postgres,
        }
    }

    /// The process instance recorded as owner of tasks created through this handle.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// What the writer has done so far: how many writes it ran in how many batches.
    pub fn write_stats(&self) -> WriteStats {
        self.db.writer().stats()
    }

    /// What the coalesced reads of a task by id have done so far.
    pub fn read_stats(&self) -> ReadStats {
        self.db.gets().stats()
    }

    /// Close the pools (waits for connections in use).
    pub async fn close(&self) {
        match &self.db {
            Db::Sqlite {
                writer, readers, ..
            } => {
                writer.close().await;
                readers.close().await;
            }
            Db::Postgres { writer, pool, .. } => {
                writer.close().await;
                pool.close().await;
            }
        }
    }

    /// Column names of a table, in order (for schema checks).
    pub async fn table_columns(&self, table: &str) -> StoreResult<Vec<String>> {
        let sql = match self.backend() {
            Backend::Sqlite => "SELECT name FROM pragma_table_info($1) ORDER BY cid",
            Backend::Postgres => {
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_name = $1 AND table_schema = current_schema() \
                 ORDER BY ordinal_position"
            }
        };
        let rows = self.db.fetch(sql, vec![table.into()]).await?;
        rows.iter().map(|r| r.try_get::<String, _>(0)).collect()
    }

    /// `PRAGMA integrity_check` on SQLite (`ok` when healthy); `ok` on PostgreSQL.
    pub async fn integrity_check(&self) -> StoreResult<String> {
        match self.backend() {
            Backend::Sqlite => {
                let rows = self.db.fetch("PRAGMA integrity_check", Vec::new()).await?;
                let first = rows.first().ok_or_else(|| StoreError::Corrupt {
                    id: "integrity_check".into(),
                    reason: "no answer".into(),
                })?;
                first.try_get::<String, _>(0)
            }
            Backend::Postgres => Ok("ok".to_string()),
        }
    }
}

/// The current time as stored: Unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    i64::try_from(cadre_types::unix_millis()).unwrap_or(i64::MAX)
}

/// Milliseconds in a duration, saturating.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn open_futures_are_send() {
        // Not awaited: only the types are checked.
        assert_send(&open("sqlite:///nonexistent/x.db", NodeId::new("n")));
        assert_send(&open_config(&StoreConfig::default(), Path::new("/w")));
    }
}
