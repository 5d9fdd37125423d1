//! Statements as the store's queries see them: `$N` placeholders and their arguments as
//! values ([`Arg`]), rows as values ([`Row`]), on whichever database the store holds.
//!
//! Writes are written once against [`WriteConn`] and reads once against `Db::fetch`.
//! PostgreSQL runs them through sqlx; SQLite through rusqlite on the store's own threads
//! (the writer, where a whole batch executes without a hand-off per statement, and the
//! readers). sqlx's SQLite driver sent every statement to a worker thread and waited for the
//! answer, which cost most of a write.

use crate::error::{StoreError, StoreResult};
use futures::future::BoxFuture;
use sqlx::PgConnection;
use std::sync::Arc;

/// A value bound to a statement. NULLs keep their type: PostgreSQL needs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Arg {
    Text(Option<String>),
    Int(Option<i64>),
    Bool(bool),
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_owned()))
    }
}

impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}

impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(Some(v.clone()))
    }
}

impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_owned))
    }
}

impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}

impl From<&Option<String>> for Arg {
    fn from(v: &Option<String>) -> Self {
        Arg::Text(v.clone())
    }
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}

impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}

impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}

/// One column's value in a [`Row`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Null,
    Int(i64),
    Text(String),
    Bool(bool),
}

/// A row a write returned (`RETURNING`, or a read inside a write).
#[derive(Debug, Clone)]
pub(crate) struct Row {
    names: Arc<[String]>,
    cells: Vec<Cell>,
}

/// Where a column is: its position or its name.
pub(crate) trait CellIndex {
    fn position(&self, names: &[String]) -> Option<usize>;
}

impl CellIndex for usize {
    fn position(&self, names: &[String]) -> Option<usize> {
        (*self < names.len()).then_some(*self)
    }
}

impl CellIndex for &str {
    fn position(&self, names: &[String]) -> Option<usize> {
        names.iter().position(|n| n == self)
    }
}

/// A Rust type a [`Cell`] decodes into.
pub(crate) trait FromCell: Sized {
    fn from_cell(cell: &Cell) -> Option<Self>;
}

impl FromCell for i64 {
    fn from_cell(cell: &Cell) -> Option<Self> {
        match cell {
            Cell::Int(v) => Some(*v),
            _ => None,
        }
    }
}

impl FromCell for String {
    fn from_cell(cell: &Cell) -> Option<Self> {
        match cell {
            Cell::Text(v) => Some(v.clone()),
            _ => None,
        }
    }
}

impl FromCell for bool {
    fn from_cell(cell: &Cell) -> Option<Self> {
        match cell {
            Cell::Bool(v) => Some(*v),
            // SQLite stores booleans as integers.
            Cell::Int(v) => Some(*v != 0),
            _ => None,
        }
    }
}

impl<T: FromCell> FromCell for Option<T> {
    fn from_cell(cell: &Cell) -> Option<Self> {
        match cell {
            Cell::Null => Some(None),
            c => T::from_cell(c).map(Some),
        }
    }
}

#[cfg(test)]
impl Row {
    /// A row of these columns, in this order.
    pub(crate) fn of(columns: Vec<(String, Cell)>) -> Self {
        let (names, cells): (Vec<String>, Vec<Cell>) = columns.into_iter().unzip();
        Row {
            names: names.into(),
            cells,
        }
    }
}

impl Row {
    /// The name of the column at `at`, if there is one.
    pub(crate) fn name_at(&self, at: usize) -> Option<&str> {
        self.names.get(at).map(String::as_str)
    }

    /// The value of a column, named as sqlx's `Row::try_get` is (so that one decoder serves
    /// sqlx rows and these).
    pub(crate) fn try_get<T: FromCell, I: CellIndex>(&self, index: I) -> StoreResult<T> {
        let bad = |what: &str| StoreError::Corrupt {
            id: "row".into(),
            reason: what.to_string(),
        };
        let at = index
            .position(&self.names)
            .ok_or_else(|| bad("a column the statement does not return"))?;
        let cell = &self.cells[at];
        T::from_cell(cell).ok_or_else(|| {
            bad(&format!(
                "column {} holds {cell:?}, not the type read",
                self.names[at]
            ))
        })
    }
}

/// A statement that writes one row, in two forms: for one row, and for many. PostgreSQL
/// runs the writes of many rows queued together as one statement (one round trip).
pub(crate) struct Shared {
    /// For one row: `$N` takes the row's Nth value.
    pub(crate) one: &'static str,
    /// For many rows: `$N` is the array of every row's Nth value, to unnest. It returns the
    /// first value of each row it changed: the row's key, which no two rows of one run share.
    pub(crate) many: &'static str,
}

/// The connection a write runs on.
pub(crate) trait WriteConn: Send {
    /// Run `sql` with `args` bound to `$1…`; the number of rows it changed.
    fn execute<'a>(&'a mut self, sql: &'a str, args: &'a [Arg]) -> BoxFuture<'a, StoreResult<u64>>;
    /// Run `sql` with `args` bound to `$1…`; the rows it returned.
    fn fetch<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg],
    ) -> BoxFuture<'a, StoreResult<Vec<Row>>>;
    /// Whether a transaction is open on the connection, when the connection can tell
    /// (SQLite can; a PostgreSQL connection is let go after any failed transaction
    /// statement instead).
    fn in_transaction(&self) -> Option<bool> {
        None
    }
    /// Write the rows `rows` (each row's values; no two share the first, the key) by
    /// `shared` as one statement: the rows each changed. `None` where each row's statement
    /// runs in turn instead (SQLite: no round trip to save).
    fn execute_shared<'a>(
        &'a mut self,
        _shared: &'static Shared,
        _rows: &'a [&'a [Arg]],
    ) -> Option<BoxFuture<'a, StoreResult<Vec<u64>>>> {
        None
    }
}

fn pg_query<'a>(
    sql: &'a str,
    args: &'a [Arg],
) -> sqlx::query::Query<'a, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let mut q = sqlx::query(sql);
    for a in args {
        q = match a {
            Arg::Text(v) => q.bind(v.as_deref()),
            Arg::Int(v) => q.bind(*v),
            Arg::Bool(v) => q.bind(*v),
        };
    }
    q
}

/// `sql` with its `$N` bound to the array of every row's Nth value (each column's type is
/// its values' type, which every row must share).
fn pg_columns<'a>(
    sql: &'a str,
    rows: &'a [&'a [Arg]],
) -> StoreResult<sqlx::query::Query<'a, sqlx::Postgres, sqlx::postgres::PgArguments>> {
    let mismatch = |n: usize| StoreError::Corrupt {
        id: "statement".into(),
        reason: format!("the rows of {sql:?} differ in the type of value {}", n + 1),
    };
    let width = rows.first().map_or(0, |r| r.len());
    let mut q = sqlx::query(sql);
    for n in 0..width {
        let column = rows.iter().map(|r| r.get(n));
        q = match rows[0].get(n) {
            Some(Arg::Text(_)) => q.bind(
                column
                    .map(|v| match v {
                        Some(Arg::Text(t)) => Ok(t.as_deref()),
                        _ => Err(mismatch(n)),
                    })
                    .collect::<StoreResult<Vec<Option<&str>>>>()?,
            ),
            Some(Arg::Int(_)) => q.bind(
                column
                    .map(|v| match v {
                        Some(Arg::Int(i)) => Ok(*i),
                        _ => Err(mismatch(n)),
                    })
                    .collect::<StoreResult<Vec<Option<i64>>>>()?,
            ),
            Some(Arg::Bool(_)) => q.bind(
                column
                    .map(|v| match v {
                        Some(Arg::Bool(b)) => Ok(*b),
                        _ => Err(mismatch(n)),
                    })
                    .collect::<StoreResult<Vec<bool>>>()?,
            ),
            None => return Err(mismatch(n)),
        };
    }
    Ok(q)
}

/// A PostgreSQL row as [`Cell`]s, by each column's type.
fn pg_row(row: &sqlx::postgres::PgRow, names: &Arc<[String]>) -> StoreResult<Row> {
    use sqlx::{Column, Row as _, TypeInfo};
    let mut cells = Vec::with_capacity(names.len());
    for (i, col) in row.columns().iter().enumerate() {
        let cell = match col.type_info().name() {
            "INT8" => row.try_get::<Option<i64>, _>(i)?.map(Cell::Int),
            "INT4" => row
                .try_get::<Option<i32>, _>(i)?
                .map(|v| Cell::Int(i64::from(v))),
            "INT2" => row
                .try_get::<Option<i16>, _>(i)?
                .map(|v| Cell::Int(i64::from(v))),
            "BOOL" => row.try_get::<Option<bool>, _>(i)?.map(Cell::Bool),
            _ => row.try_get::<Option<String>, _>(i)?.map(Cell::Text),
        };
        cells.push(cell.unwrap_or(Cell::Null));
    }
    Ok(Row {
        names: names.clone(),
        cells,
    })
}

/// Run `sql` with `args` on PostgreSQL (a connection or the pool); the rows as [`Row`]s.
pub(crate) async fn pg_fetch<'e, E: sqlx::PgExecutor<'e>>(
    executor: E,
    sql: &'e str,
    args: &'e [Arg],
) -> StoreResult<Vec<Row>> {
    pg_rows(&pg_query(sql, args).fetch_all(executor).await?)
}

/// Run the read `sql` once for many `rows` of arguments, each value bound as an array of
/// that value in every row (as the `many` statement of a [`Shared`] is).
pub(crate) async fn pg_fetch_columns<'e, E: sqlx::PgExecutor<'e>>(
    executor: E,
    sql: &'e str,
    rows: &'e [&'e [Arg]],
) -> StoreResult<Vec<Row>> {
    pg_rows(&pg_columns(sql, rows)?.fetch_all(executor).await?)
}

/// PostgreSQL rows as [`Row`]s (the column names shared).
fn pg_rows(rows: &[sqlx::postgres::PgRow]) -> StoreResult<Vec<Row>> {
    use sqlx::{Column, Row as _};
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let names: Arc<[String]> = first
        .columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    rows.iter().map(|r| pg_row(r, &names)).collect()
}

impl WriteConn for PgConnection {
    fn execute<'a>(&'a mut self, sql: &'a str, args: &'a [Arg]) -> BoxFuture<'a, StoreResult<u64>> {
        Box::pin(async move { Ok(pg_query(sql, args).execute(self).await?.rows_affected()) })
    }

    /// One statement for every row: a round trip for all of them.
    fn execute_shared<'a>(
        &'a mut self,
        shared: &'static Shared,
        rows: &'a [&'a [Arg]],
    ) -> Option<BoxFuture<'a, StoreResult<Vec<u64>>>> {
        Some(Box::pin(async move {
            use sqlx::Row as _;
            let written = pg_columns(shared.many, rows)?.fetch_all(self).await?;
            let mut keys = std::collections::HashSet::with_capacity(written.len());
            for row in &written {
                keys.insert(row.try_get::<String, _>(0)?);
            }
            Ok(rows
                .iter()
                .map(|values| match values.first() {
                    Some(Arg::Text(Some(key))) => u64::from(keys.contains(key)),
                    _ => 0,
                })
                .collect())
        }))
    }

    fn fetch<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg],
    ) -> BoxFuture<'a, StoreResult<Vec<Row>>> {
        Box::pin(pg_fetch(self, sql, args))
    }
}

/// Start a thread of the store (the SQLite writer or a reader) named `name`. A panic there
/// is logged: the thread's callers only see their requests fail (`PoolClosed`) from then on.
pub(crate) fn spawn_thread(
    name: String,
    body: impl FnOnce() + Send + 'static,
) -> std::io::Result<()> {
    let label = name.clone();
    std::thread::Builder::new().name(name).spawn(move || {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).is_err() {
            tracing::error!(
                "the task store's {label} thread panicked; its requests fail from now on"
            );
        }
    })?;
    Ok(())
}

/// A SQLite connection (rusqlite) of the writer's or a reader's thread, used there only.
pub(crate) struct SqliteConn(pub(crate) rusqlite::Connection);

impl rusqlite::ToSql for Arg {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Arg::Text(Some(v)) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
            Arg::Int(Some(v)) => ToSqlOutput::Owned(rusqlite::types::Value::Integer(*v)),
            Arg::Bool(v) => ToSqlOutput::Owned(rusqlite::types::Value::Integer(i64::from(*v))),
            Arg::Text(None) | Arg::Int(None) => ToSqlOutput::Owned(rusqlite::types::Value::Null),
        })
    }
}

impl SqliteConn {
    /// The cached statement for `sql` with `args` bound by number: `$N` takes `args[N-1]`
    /// wherever it appears (SQLite numbers named parameters by first appearance instead).
    fn bound(&self, sql: &str, args: &[Arg]) -> StoreResult<rusqlite::CachedStatement<'_>> {
        let mut stmt = self.0.prepare_cached(sql)?;
        for i in 1..=stmt.parameter_count() {
            let n = stmt
                .parameter_name(i)
                .and_then(|name| name.strip_prefix('$'))
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| StoreError::Corrupt {
                    id: "statement".into(),
                    reason: format!("parameter {i} of {sql:?} is not written $N"),
                })?;
            // An argument not given is NULL, as sqlx has it.
            match args.get(n - 1) {
                Some(a) => stmt.raw_bind_parameter(i, a)?,
                None => stmt.raw_bind_parameter(i, rusqlite::types::Null)?,
            }
        }
        Ok(stmt)
    }

    /// Open the store's file at `path` (its schema applied already): the busy timeout for
    /// other processes' locks, the durability every connection of the store uses, foreign
    /// keys on, `statements` kept prepared.
    pub(crate) fn open(
        path: &std::path::Path,
        busy_timeout: std::time::Duration,
        statements: usize,
    ) -> StoreResult<Self> {
        use rusqlite::OpenFlags;
        let conn = rusqlite::Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(busy_timeout)?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.set_prepared_statement_cache_capacity(statements);
        Ok(SqliteConn(conn))
    }

    /// Prepare `statements` now, into this connection's cache, so that the first tasks do
    /// not parse them (a statement naming every column of a task takes longer to prepare
    /// than to run). Best effort: a statement that cannot be prepared is logged and prepared
    /// on first use. How many failed.
    pub(crate) fn prepare_ahead(&self, statements: &[String]) -> usize {
        let mut failed = 0;
        for sql in statements {
            if let Err(e) = self.0.prepare_cached(sql) {
                tracing::warn!(error = %e, sql, "store: preparing a statement ahead failed");
                failed += 1;
            }
        }
        failed
    }

    /// Keep at most `kib` KiB of database pages cached on this connection.
    pub(crate) fn limit_page_cache(&self, kib: u32) -> StoreResult<()> {
        // A negative cache_size is a size in KiB rather than a number of pages.
        self.0.pragma_update(None, "cache_size", -i64::from(kib))?;
        Ok(())
    }

    fn execute_now(&self, sql: &str, args: &[Arg]) -> StoreResult<u64> {
        let mut stmt = self.bound(sql, args)?;
        Ok(stmt.raw_execute()? as u64)
    }

    pub(crate) fn fetch_now(&self, sql: &str, args: &[Arg]) -> StoreResult<Vec<Row>> {
        use rusqlite::types::ValueRef;
        let mut stmt = self.bound(sql, args)?;
        let names: Arc<[String]> = stmt.column_names().into_iter().map(String::from).collect();
        let mut rows = stmt.raw_query();
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let mut cells = Vec::with_capacity(names.len());
            for i in 0..names.len() {
                cells.push(match r.get_ref(i)? {
                    ValueRef::Null => Cell::Null,
                    ValueRef::Integer(v) => Cell::Int(v),
                    ValueRef::Real(v) => Cell::Text(v.to_string()),
                    ValueRef::Text(t) | ValueRef::Blob(t) => {
                        Cell::Text(String::from_utf8_lossy(t).into_owned())
                    }
                });
            }
            out.push(Row {
                names: names.clone(),
                cells,
            });
        }
        Ok(out)
    }
}

impl WriteConn for SqliteConn {
    fn in_transaction(&self) -> Option<bool> {
        Some(!self.0.is_autocommit())
    }

    fn execute<'a>(&'a mut self, sql: &'a str, args: &'a [Arg]) -> BoxFuture<'a, StoreResult<u64>> {
        let r = self.execute_now(sql, args);
        Box::pin(std::future::ready(r))
    }

    fn fetch<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg],
    ) -> BoxFuture<'a, StoreResult<Vec<Row>>> {
        let r = self.fetch_now(sql, args);
        Box::pin(std::future::ready(r))
    }
}
