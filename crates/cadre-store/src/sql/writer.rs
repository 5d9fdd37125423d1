//! The store's one writer: a task (PostgreSQL) or a thread (SQLite) that owns the write
//! connection and runs the writes queued while it was busy as one transaction (group
//! commit), so many children's writes share one commit instead of paying one each.
//!
//! What a caller is told was written is committed: its answer is sent only after the commit
//! of its batch. A write that fails inside a batch rolls the batch back, and the batch's
//! writes then run again one by one, each in its own transaction, so every write gets its own
//! answer and none is lost or changed by another's failure (on PostgreSQL a failed statement
//! aborts the whole transaction). A failed commit is reported to every write of its batch.
//! A write alone runs without an explicit transaction.
//!
//! Writes of one row by a [`Shared`] statement (a task created, a task's transition) that
//! follow each other in a batch run as one statement for all their rows on PostgreSQL, where
//! every statement is a round trip to the server; SQLite runs each row's statement.

use super::conn::{Arg, Shared, SqliteConn, WriteConn, spawn_thread};
use crate::error::{StoreError, StoreResult};
use futures::future::BoxFuture;
use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};

/// The most writes one transaction takes.
pub(crate) const MAX_BATCH: usize = 256;
/// Writes that may wait for the writer; a caller beyond this waits to queue its write.
const QUEUE: usize = 4096;
/// Statements the SQLite writer keeps prepared (rusqlite keeps 16 by default; the store has
/// about 30 distinct writes, some with a text per list length).
const SQLITE_STATEMENTS: usize = 64;

/// A queued write with its result and the caller waiting for it, type-erased.
trait Job: Send {
    /// Run the write on `conn`.
    fn run<'c>(&'c mut self, conn: &'c mut dyn WriteConn) -> BoxFuture<'c, Ran>;
    /// Forget the result of a run that was rolled back.
    fn reset(&mut self);
    /// Tell the caller: its own result, unless the batch failed as a whole (`batch`).
    fn answer(self: Box<Self>, batch: Option<&StoreError>);
    /// The statement and values of a write of one row by a [`Shared`] statement.
    fn row(&self) -> Option<(&'static Shared, &[Arg])> {
        None
    }
    /// The result of a row's part in a statement run for many rows: the rows it changed.
    fn ran_shared(&mut self, _affected: u64) {}
}

/// A write of arguments `A` by the statement function `F`, answering `T`.
struct Write<A, T, F> {
    args: A,
    op: F,
    result: Option<StoreResult<T>>,
    reply: oneshot::Sender<StoreResult<T>>,
}

impl<A, T, F> Job for Write<A, T, F>
where
    A: Send + Sync + 'static,
    T: Send + 'static,
    F: for<'c> Fn(&'c mut dyn WriteConn, &'c A) -> BoxFuture<'c, StoreResult<T>> + Send + 'static,
{
    fn run<'c>(&'c mut self, conn: &'c mut dyn WriteConn) -> BoxFuture<'c, Ran> {
        let Write {
            args, op, result, ..
        } = self;
        Box::pin(async move { keep(result, op(conn, args).await) })
    }

    fn reset(&mut self) {
        self.result = None;
    }

    fn answer(self: Box<Self>, batch: Option<&StoreError>) {
        reply(self.reply, self.result, batch);
    }
}

/// A write of one row by a [`Shared`] statement: the row's values; it answers the rows it
/// changed.
struct RowWrite {
    shared: &'static Shared,
    values: Vec<Arg>,
    result: Option<StoreResult<u64>>,
    reply: oneshot::Sender<StoreResult<u64>>,
}

impl Job for RowWrite {
    fn run<'c>(&'c mut self, conn: &'c mut dyn WriteConn) -> BoxFuture<'c, Ran> {
        Box::pin(async move {
            let r = conn.execute(self.shared.one, &self.values).await;
            keep(&mut self.result, r)
        })
    }

    fn reset(&mut self) {
        self.result = None;
    }

    fn answer(self: Box<Self>, batch: Option<&StoreError>) {
        reply(self.reply, self.result, batch);
    }

    fn row(&self) -> Option<(&'static Shared, &[Arg])> {
        Some((self.shared, &self.values))
    }

    fn ran_shared(&mut self, affected: u64) {
        self.result = Some(Ok(affected));
    }
}

/// Keep a write's result `r` for its answer; how it went.
fn keep<T>(result: &mut Option<StoreResult<T>>, r: StoreResult<T>) -> Ran {
    let ran = match &r {
        Ok(_) => Ran::Ok,
        Err(e) => Ran::Failed {
            suspect: connection_suspect(e),
        },
    };
    *result = Some(r);
    ran
}

/// Send a write its answer: its own result, unless its batch failed as a whole (`batch`).
fn reply<T>(
    to: oneshot::Sender<StoreResult<T>>,
    result: Option<StoreResult<T>>,
    batch: Option<&StoreError>,
) {
    let answer = match (batch, result) {
        (None, Some(r)) => r,
        (Some(e), _) => Err(batch_failed(e)),
        (None, None) => Err(StoreError::Db(sqlx::Error::WorkerCrashed)),
    };
    let _ = to.send(answer);
}

/// How a write went.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ran {
    Ok,
    /// It failed; `suspect` when the error may have come from a broken connection.
    Failed {
        suspect: bool,
    },
}

/// True for an error that may mean the connection is broken: a database error other than a
/// constraint violation (which is an answer about the data).
fn connection_suspect(e: &StoreError) -> bool {
    match e {
        StoreError::Db(sqlx::Error::Database(d)) => {
            !(d.is_unique_violation() || d.is_foreign_key_violation())
        }
        StoreError::Db(_) => true,
        // SQLite's connection is a file handle of this process: it does not break.
        _ => false,
    }
}

/// What a write of a failed batch is told: the batch's error, as a transient failure (the
/// write was not made; trying again may succeed).
fn batch_failed(e: &StoreError) -> StoreError {
    StoreError::Db(sqlx::Error::Io(std::io::Error::other(format!(
        "the store's write batch failed: {e}"
    ))))
}

enum Msg {
    Write(Box<dyn Job>),
    /// Close the connection after the writes queued before; answer when done.
    Close(oneshot::Sender<()>),
}

/// Where a writer's connection comes from.
trait Source: Send {
    /// The connection to run the next write on.
    async fn conn(&mut self) -> StoreResult<&mut dyn WriteConn>;
    /// After a failure that may have broken the connection.
    fn after_failure(&mut self);
    /// Close the connection.
    async fn close(&mut self);
}

/// SQLite's writer: a connection of its own, on the writer's thread.
struct Owned(Option<SqliteConn>);

impl Source for Owned {
    async fn conn(&mut self) -> StoreResult<&mut dyn WriteConn> {
        match &mut self.0 {
            Some(c) => Ok(c),
            None => Err(StoreError::Db(sqlx::Error::PoolClosed)),
        }
    }

    fn after_failure(&mut self) {}

    async fn close(&mut self) {
        if let Some(SqliteConn(c)) = self.0.take()
            && let Err((_, e)) = c.close()
        {
            tracing::warn!("closing the store's write connection: {e}");
        }
    }
}

/// PostgreSQL's writer: a connection taken from the pool and kept while it works.
struct Pooled {
    pool: PgPool,
    /// The connection in use; dropped after a failure, taken again on the next batch.
    held: Option<PoolConnection<Postgres>>,
}

impl Source for Pooled {
    async fn conn(&mut self) -> StoreResult<&mut dyn WriteConn> {
        if self.held.is_none() {
            self.held = Some(self.pool.acquire().await?);
        }
        match &mut self.held {
            Some(c) => Ok(&mut **c),
            None => Err(StoreError::Db(sqlx::Error::PoolClosed)),
        }
    }

    /// A connection that may be broken is let go (closed, not returned to the pool) and a
    /// fresh one taken for the next batch.
    fn after_failure(&mut self) {
        if let Some(c) = self.held.take() {
            drop(c.detach());
        }
    }

    async fn close(&mut self) {
        self.held = None;
    }
}

/// What a store's writer has done so far (see [`crate::SqlStore::write_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Writes run (a write run again after its batch was rolled back counts once).
    pub writes: u64,
    /// Batches run: one transaction each (a batch of one write, none of its own).
    pub batches: u64,
    /// The most writes one batch held.
    pub largest_batch: u64,
    /// Times writes ran on the connection: a write's own run, or one statement run for the
    /// rows of many writes (see [`Shared`]). Transaction statements are not counted.
    pub runs: u64,
    /// Writes queued now, waiting for the writer.
    pub queued: u64,
}

#[derive(Default)]
struct Counters {
    writes: AtomicU64,
    runs: AtomicU64,
    batches: AtomicU64,
    largest: AtomicU64,
}

/// The handle callers queue writes on. Cloning it shares the one writer.
#[derive(Clone)]
pub(crate) struct Writer {
    tx: mpsc::Sender<Msg>,
    counters: Arc<Counters>,
}

impl Writer {
    /// The counters so far.
    pub(crate) fn stats(&self) -> WriteStats {
        let c = &self.counters;
        WriteStats {
            writes: c.writes.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            largest_batch: c.largest.load(Ordering::Relaxed),
            runs: c.runs.load(Ordering::Relaxed),
            queued: (self.tx.max_capacity() - self.tx.capacity()) as u64,
        }
    }

    /// Start PostgreSQL's writer: a task that takes its connection from `pool`. It ends when
    /// [`close`](Self::close) is called or every handle is dropped.
    pub(crate) fn start_postgres(pool: PgPool) -> Self {
        let (tx, mut rx) = mpsc::channel(QUEUE);
        let counters = Arc::<Counters>::default();
        let mut source = Pooled { pool, held: None };
        let c = counters.clone();
        tokio::spawn(async move {
            let mut msgs = Vec::with_capacity(MAX_BATCH);
            while rx.recv_many(&mut msgs, MAX_BATCH).await > 0 {
                if run_queued(&mut source, "BEGIN", &mut msgs, &c).await == Flow::Closed {
                    return;
                }
            }
        });
        Writer { tx, counters }
    }

    /// Start SQLite's writer on the database file at `path`: a thread of its own that runs
    /// each batch on its connection without waiting on anything else, the statements
    /// `prepared` prepared as it opens. It ends when
    /// [`close`](Self::close) is called or every handle is dropped.
    pub(crate) async fn start_sqlite(
        path: &Path,
        busy_timeout: std::time::Duration,
        prepared: Vec<String>,
    ) -> StoreResult<Self> {
        let (tx, mut rx) = mpsc::channel::<Msg>(QUEUE);
        let counters = Arc::<Counters>::default();
        let (opened, open_result) = oneshot::channel();
        let path = path.to_path_buf();
        let c = counters.clone();
        spawn_thread("cadre-store-writer".into(), move || {
            let conn = match SqliteConn::open(&path, busy_timeout, SQLITE_STATEMENTS) {
                Ok(conn) => {
                    conn.prepare_ahead(&prepared);
                    let _ = opened.send(Ok(()));
                    conn
                }
                Err(e) => {
                    let _ = opened.send(Err(e));
                    return;
                }
            };
            let mut source = Owned(Some(conn));
            let mut msgs = Vec::with_capacity(MAX_BATCH);
            // IMMEDIATE: a batch takes the file's write lock first, so another
            // process's write is waited for (busy timeout) instead of failing the
            // batch when it upgrades a read. The writes never wait on anything but
            // SQLite, so each batch runs to its end in one poll.
            while rx.blocking_recv_many(&mut msgs, MAX_BATCH) > 0 {
                let queued = run_queued(&mut source, "BEGIN IMMEDIATE", &mut msgs, &c);
                if futures::executor::block_on(queued) == Flow::Closed {
                    return;
                }
            }
        })?;
        match open_result.await {
            Ok(Ok(())) => Ok(Writer { tx, counters }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(StoreError::Db(sqlx::Error::WorkerCrashed)),
        }
    }

    /// Run `op` on the write connection with `args`, in the next batch; its result once the
    /// batch is committed.
    pub(crate) async fn write<A, T, F>(&self, args: A, op: F) -> StoreResult<T>
    where
        A: Send + Sync + 'static,
        T: Send + 'static,
        F: for<'c> Fn(&'c mut dyn WriteConn, &'c A) -> BoxFuture<'c, StoreResult<T>>
            + Send
            + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Write {
            args,
            op,
            result: None,
            reply,
        };
        self.queue(Box::new(job), answer).await
    }

    /// Write one row by the statement `shared` with `values`, in the next batch; the rows it
    /// changed, once the batch is committed.
    pub(crate) async fn write_row(
        &self,
        shared: &'static Shared,
        values: Vec<Arg>,
    ) -> StoreResult<u64> {
        let (reply, answer) = oneshot::channel();
        let job = RowWrite {
            shared,
            values,
            result: None,
            reply,
        };
        self.queue(Box::new(job), answer).await
    }

    /// Queue `job` for the next batch; its answer.
    async fn queue<T>(
        &self,
        job: Box<dyn Job>,
        answer: oneshot::Receiver<StoreResult<T>>,
    ) -> StoreResult<T> {
        let closed = || StoreError::Db(sqlx::Error::PoolClosed);
        self.tx.send(Msg::Write(job)).await.map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }

    /// Close the write connection once the writes queued before are done; later writes fail
    /// with `PoolClosed`.
    pub(crate) async fn close(&self) {
        let (done, closed) = oneshot::channel();
        if self.tx.send(Msg::Close(done)).await.is_ok() {
            let _ = closed.await;
        }
    }
}

/// Whether the writer goes on.
#[derive(PartialEq, Eq)]
enum Flow {
    Open,
    Closed,
}

/// Run the writes of `msgs` as one batch, then a close if one was queued.
async fn run_queued<S: Source>(
    source: &mut S,
    begin: &'static str,
    msgs: &mut Vec<Msg>,
    counters: &Counters,
) -> Flow {
    let mut jobs = Vec::with_capacity(msgs.len());
    let mut close = None;
    for m in msgs.drain(..) {
        match m {
            Msg::Write(j) => jobs.push(j),
            Msg::Close(done) => close = Some(done),
        }
    }
    if !jobs.is_empty() {
        let n = jobs.len() as u64;
        counters.writes.fetch_add(n, Ordering::Relaxed);
        counters.batches.fetch_add(1, Ordering::Relaxed);
        counters.largest.fetch_max(n, Ordering::Relaxed);
        run_batch(source, begin, jobs, counters).await;
    }
    match close {
        Some(done) => {
            source.close().await;
            let _ = done.send(());
            Flow::Closed
        }
        None => Flow::Open,
    }
}

/// How a batch transaction went.
enum Batch {
    Committed,
    /// A write failed; the transaction was rolled back.
    RolledBack,
    /// The one write of the batch ran (without a transaction) and failed.
    Alone {
        suspect: bool,
    },
    /// The transaction could not be begun, rolled back or committed.
    Failed(StoreError),
}

async fn run_batch<S: Source>(
    source: &mut S,
    begin: &'static str,
    mut jobs: Vec<Box<dyn Job>>,
    counters: &Counters,
) {
    let outcome = match source.conn().await {
        Ok(conn) => match settle(conn).await {
            Ok(()) => run_jobs(conn, begin, &mut jobs, counters).await,
            Err(e) => Batch::Failed(e),
        },
        Err(e) => Batch::Failed(e),
    };
    match outcome {
        Batch::Committed => jobs.into_iter().for_each(|j| j.answer(None)),
        Batch::Alone { suspect } => {
            if suspect {
                source.after_failure();
            }
            for job in jobs {
                job.answer(None);
            }
        }
        Batch::Failed(e) => {
            source.after_failure();
            for job in jobs {
                job.answer(Some(&e));
            }
        }
        Batch::RolledBack => {
            for mut job in jobs {
                job.reset();
                match source.conn().await {
                    Ok(conn) => {
                        counters.runs.fetch_add(1, Ordering::Relaxed);
                        if job.run(conn).await == (Ran::Failed { suspect: true }) {
                            source.after_failure();
                        }
                        job.answer(None);
                    }
                    Err(e) => job.answer(Some(&e)),
                }
            }
        }
    }
}

/// End a transaction a failure left open on the connection (a commit and its rollback
/// that both failed), so that no write runs inside it: a write alone would be answered
/// but never committed, and the file's write lock would be held.
async fn settle(conn: &mut dyn WriteConn) -> StoreResult<()> {
    if conn.in_transaction() == Some(true) {
        tracing::warn!("the store's write connection was left in a transaction; rolling it back");
        conn.execute("ROLLBACK", &[]).await?;
    }
    Ok(())
}

/// Run `jobs`: one alone, several in one transaction.
async fn run_jobs(
    conn: &mut dyn WriteConn,
    begin: &'static str,
    jobs: &mut [Box<dyn Job>],
    counters: &Counters,
) -> Batch {
    match jobs {
        [job] => {
            counters.runs.fetch_add(1, Ordering::Relaxed);
            match job.run(conn).await {
                Ran::Ok => Batch::Committed,
                Ran::Failed { suspect } => Batch::Alone { suspect },
            }
        }
        _ => in_transaction(conn, begin, jobs, counters).await,
    }
}

/// Run `jobs` in one transaction begun by `begin`; stop at the first failed write.
async fn in_transaction(
    conn: &mut dyn WriteConn,
    begin: &'static str,
    jobs: &mut [Box<dyn Job>],
    counters: &Counters,
) -> Batch {
    if let Err(e) = conn.execute(begin, &[]).await {
        return Batch::Failed(e);
    }
    let mut start = 0;
    while start < jobs.len() {
        let end = shared_run(jobs, start);
        let ran = match &mut jobs[start..end] {
            [job] => {
                counters.runs.fetch_add(1, Ordering::Relaxed);
                job.run(conn).await
            }
            rows => run_rows(conn, rows, counters).await,
        };
        start = end;
        if ran != Ran::Ok {
            if conn.in_transaction() == Some(false) {
                // SQLite ended the transaction itself (a full disk, an I/O error): the
                // writes are run again alone, each to its own error.
                return Batch::RolledBack;
            }
            return match conn.execute("ROLLBACK", &[]).await {
                Ok(_) => Batch::RolledBack,
                Err(e) => Batch::Failed(e),
            };
        }
    }
    match conn.execute("COMMIT", &[]).await {
        Ok(_) => Batch::Committed,
        Err(e) => {
            // SQLite keeps the transaction open after a failed commit (a busy one); end it
            // so that the next batch can begin. On PostgreSQL it has ended already.
            let _ = conn.execute("ROLLBACK", &[]).await;
            Batch::Failed(e)
        }
    }
}

/// Where the run of `jobs` from `start` that one statement can write ends: the writes of
/// rows by the same [`Shared`] statement that follow each other, up to a key that repeats
/// (a row written twice keeps its order: its second write runs after the first).
fn shared_run(jobs: &[Box<dyn Job>], start: usize) -> usize {
    let Some((shared, first)) = jobs[start].row() else {
        return start + 1;
    };
    let mut keys = std::collections::HashSet::from([first.first()]);
    let mut end = start + 1;
    while let Some((s, values)) = jobs.get(end).and_then(|j| j.row()) {
        if !std::ptr::eq(s, shared) || !keys.insert(values.first()) {
            break;
        }
        end += 1;
    }
    end
}

/// Run the writes `rows` (a [`shared_run`] of several): as one statement where the
/// connection can, else one by one up to the first that fails.
async fn run_rows(conn: &mut dyn WriteConn, rows: &mut [Box<dyn Job>], counters: &Counters) -> Ran {
    let changed = {
        let mut shared = None;
        let mut values = Vec::with_capacity(rows.len());
        for (s, v) in rows.iter().filter_map(|j| j.row()) {
            shared = Some(s);
            values.push(v);
        }
        match shared.and_then(|s| conn.execute_shared(s, &values)) {
            Some(run) => Some(run.await),
            None => None,
        }
    };
    let Some(changed) = changed else {
        for job in rows.iter_mut() {
            counters.runs.fetch_add(1, Ordering::Relaxed);
            let ran = job.run(conn).await;
            if ran != Ran::Ok {
                return ran;
            }
        }
        return Ran::Ok;
    };
    counters.runs.fetch_add(1, Ordering::Relaxed);
    match changed {
        Ok(changed) => {
            for (job, n) in rows.iter_mut().zip(changed) {
                job.ran_shared(n);
            }
            Ran::Ok
        }
        Err(e) => Ran::Failed {
            suspect: connection_suspect(&e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::conn::Arg;
    use std::time::Duration;

    fn insert<'c>(c: &'c mut dyn WriteConn, a: &'c [Arg; 1]) -> BoxFuture<'c, StoreResult<u64>> {
        c.execute("INSERT INTO t (x) VALUES ($1)", a)
    }

    /// A write of `x` into `t`, and where its answer comes.
    fn write(x: i64) -> (Box<dyn Job>, oneshot::Receiver<StoreResult<u64>>) {
        let (reply, answer) = oneshot::channel();
        let job = Write {
            args: [Arg::from(x)],
            op: insert,
            result: None,
            reply,
        };
        (Box::new(job), answer)
    }

    fn stored(path: &Path) -> Vec<i64> {
        let c = rusqlite::Connection::open(path).unwrap();
        let mut q = c.prepare("SELECT x FROM t ORDER BY x").unwrap();
        q.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[tokio::test]
    async fn a_transaction_a_failure_left_open_is_ended_before_the_next_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x INTEGER)")
            .unwrap();
        let conn = SqliteConn::open(&path, Duration::from_secs(1), 8).unwrap();
        // As after a commit and its rollback that both failed: the transaction stays open.
        conn.0
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO t (x) VALUES (0)")
            .unwrap();
        let mut source = Owned(Some(conn));
        // A write alone would run inside it: answered, never committed.
        let (job, answer) = write(1);
        run_batch(
            &mut source,
            "BEGIN IMMEDIATE",
            vec![job],
            &Counters::default(),
        )
        .await;
        assert_eq!(answer.await.unwrap().unwrap(), 1);
        assert_eq!(
            stored(&path),
            vec![1],
            "the write is committed, the abandoned one not"
        );
        // A batch would fail to begin within it.
        if let Some(c) = &source.0 {
            c.0.execute_batch("BEGIN IMMEDIATE; INSERT INTO t (x) VALUES (0)")
                .unwrap();
        }
        let (a, a_answer) = write(2);
        let (b, b_answer) = write(3);
        run_batch(
            &mut source,
            "BEGIN IMMEDIATE",
            vec![a, b],
            &Counters::default(),
        )
        .await;
        assert_eq!(a_answer.await.unwrap().unwrap(), 1);
        assert_eq!(b_answer.await.unwrap().unwrap(), 1);
        assert_eq!(stored(&path), vec![1, 2, 3]);
    }
}
