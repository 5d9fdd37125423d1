//! The store's one writer: a task that owns the write connection and runs the writes queued
//! while it was busy as one transaction (group commit), so many children's writes share one
//! commit instead of paying one each.
//!
//! What a caller is told was written is committed: its answer is sent only after the commit
//! of its batch. A write that fails inside a batch rolls the batch back, and the batch's
//! writes then run again one by one, each in its own transaction, so every write gets its own
//! answer and none is lost or changed by another's failure (on PostgreSQL a failed statement
//! aborts the whole transaction). A failed commit is reported to every write of its batch.
//! A write alone runs without an explicit transaction.

use crate::error::{StoreError, StoreResult};
use futures::future::BoxFuture;
use sqlx::pool::PoolConnection;
use sqlx::{Connection, Database, Pool};
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};

/// The most writes one transaction takes.
pub(crate) const MAX_BATCH: usize = 256;
/// Writes that may wait for the writer; a caller beyond this waits to queue its write.
const QUEUE: usize = 4096;

/// A queued write with its result and the caller waiting for it, type-erased.
trait Job<C>: Send {
    /// Run the write on `conn`.
    fn run<'c>(&'c mut self, conn: &'c mut C) -> BoxFuture<'c, Ran>;
    /// Forget the result of a run that was rolled back.
    fn reset(&mut self);
    /// Tell the caller: its own result, unless the batch failed as a whole (`batch`).
    fn answer(self: Box<Self>, batch: Option<&StoreError>);
}

/// A write of arguments `A` by the statement function `F`, answering `T`.
struct Write<C, A, T, F> {
    args: A,
    op: F,
    result: Option<StoreResult<T>>,
    reply: oneshot::Sender<StoreResult<T>>,
    _conn: PhantomData<fn(&mut C)>,
}

impl<C, A, T, F> Job<C> for Write<C, A, T, F>
where
    C: Send + 'static,
    A: Send + Sync + 'static,
    T: Send + 'static,
    F: for<'c> Fn(&'c mut C, &'c A) -> BoxFuture<'c, StoreResult<T>> + Send + 'static,
{
    fn run<'c>(&'c mut self, conn: &'c mut C) -> BoxFuture<'c, Ran> {
        let Write {
            args, op, result, ..
        } = self;
        Box::pin(async move {
            let r = op(conn, args).await;
            let ran = match &r {
                Ok(_) => Ran::Ok,
                Err(e) => Ran::Failed {
                    suspect: connection_suspect(e),
                },
            };
            *result = Some(r);
            ran
        })
    }

    fn reset(&mut self) {
        self.result = None;
    }

    fn answer(self: Box<Self>, batch: Option<&StoreError>) {
        let answer = match (batch, self.result) {
            (None, Some(r)) => r,
            (Some(e), _) => Err(batch_failed(e)),
            (None, None) => Err(StoreError::Db(sqlx::Error::WorkerCrashed)),
        };
        let _ = self.reply.send(answer);
    }
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

enum Msg<C> {
    Write(Box<dyn Job<C>>),
    /// Close the connection after the writes queued before; answer when done.
    Close(oneshot::Sender<()>),
}

/// Where the writer's connection comes from.
pub(crate) enum Source<DB: Database> {
    /// A connection of its own (SQLite's writer).
    Owned(Option<DB::Connection>),
    /// A connection taken from a pool and kept while it works (PostgreSQL).
    Pooled {
        /// The pool.
        pool: Pool<DB>,
        /// The connection in use; dropped after a failure, taken again on the next batch.
        held: Option<PoolConnection<DB>>,
    },
}

impl<DB: Database> Source<DB> {
    async fn conn(&mut self) -> StoreResult<&mut DB::Connection> {
        match self {
            Source::Owned(c) => c.as_mut().ok_or(StoreError::Db(sqlx::Error::PoolClosed)),
            Source::Pooled { pool, held } => {
                if held.is_none() {
                    *held = Some(pool.acquire().await?);
                }
                match held {
                    Some(c) => Ok(&mut **c),
                    None => Err(StoreError::Db(sqlx::Error::PoolClosed)),
                }
            }
        }
    }

    /// After a failure that may have broken the connection: a pooled one is let go (closed,
    /// not returned to the pool) and a fresh one taken for the next batch.
    fn after_failure(&mut self) {
        if let Source::Pooled { held, .. } = self
            && let Some(c) = held.take()
        {
            drop(c.detach());
        }
    }

    async fn close(&mut self) {
        match self {
            Source::Owned(c) => {
                if let Some(c) = c.take() {
                    let _ = c.close().await;
                }
            }
            Source::Pooled { held, .. } => *held = None,
        }
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
    /// Writes queued now, waiting for the writer.
    pub queued: u64,
}

#[derive(Default)]
struct Counters {
    writes: AtomicU64,
    batches: AtomicU64,
    largest: AtomicU64,
}

/// The handle callers queue writes on. Cloning it shares the one writer.
pub(crate) struct Writer<C> {
    tx: mpsc::Sender<Msg<C>>,
    counters: Arc<Counters>,
}

impl<C> Clone for Writer<C> {
    fn clone(&self) -> Self {
        Writer {
            tx: self.tx.clone(),
            counters: self.counters.clone(),
        }
    }
}

impl<C> Writer<C> {
    /// The counters so far.
    pub(crate) fn stats(&self) -> WriteStats {
        let c = &self.counters;
        WriteStats {
            writes: c.writes.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            largest_batch: c.largest.load(Ordering::Relaxed),
            queued: (self.tx.max_capacity() - self.tx.capacity()) as u64,
        }
    }
}

impl<C: Send + 'static> Writer<C> {
    /// Start the writer task on `source`; `begin` opens a batch's transaction. The task ends
    /// when [`close`](Self::close) is called or every handle is dropped.
    pub(crate) fn start<DB>(source: Source<DB>, begin: &'static str) -> Self
    where
        DB: Database<Connection = C>,
        C: Connection<Database = DB>,
    {
        let (tx, rx) = mpsc::channel(QUEUE);
        let counters = Arc::<Counters>::default();
        tokio::spawn(run(source, begin, rx, counters.clone()));
        Writer { tx, counters }
    }

    /// Run `op` on the write connection with `args`, in the next batch; its result once the
    /// batch is committed.
    pub(crate) async fn write<A, T, F>(&self, args: A, op: F) -> StoreResult<T>
    where
        A: Send + Sync + 'static,
        T: Send + 'static,
        F: for<'c> Fn(&'c mut C, &'c A) -> BoxFuture<'c, StoreResult<T>> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Write {
            args,
            op,
            result: None,
            reply,
            _conn: PhantomData,
        };
        let closed = || StoreError::Db(sqlx::Error::PoolClosed);
        self.tx
            .send(Msg::Write(Box::new(job)))
            .await
            .map_err(|_| closed())?;
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

async fn run<DB: Database>(
    mut source: Source<DB>,
    begin: &'static str,
    mut rx: mpsc::Receiver<Msg<DB::Connection>>,
    counters: Arc<Counters>,
) {
    let mut msgs = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut msgs, MAX_BATCH).await > 0 {
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
            run_batch(&mut source, begin, jobs).await;
        }
        if let Some(done) = close {
            source.close().await;
            let _ = done.send(());
            return;
        }
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

async fn run_batch<DB: Database>(
    source: &mut Source<DB>,
    begin: &'static str,
    mut jobs: Vec<Box<dyn Job<DB::Connection>>>,
) {
    let outcome = match source.conn().await {
        Ok(conn) if jobs.len() == 1 => match jobs[0].run(conn).await {
            Ran::Ok => Batch::Committed,
            Ran::Failed { suspect } => Batch::Alone { suspect },
        },
        Ok(conn) => in_transaction::<DB>(conn, begin, &mut jobs).await,
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

/// Run `jobs` in one transaction begun by `begin`; stop at the first failed write.
async fn in_transaction<DB: Database>(
    conn: &mut DB::Connection,
    begin: &'static str,
    jobs: &mut [Box<dyn Job<DB::Connection>>],
) -> Batch {
    let mut tx = match conn.begin_with(begin).await {
        Ok(tx) => tx,
        Err(e) => return Batch::Failed(e.into()),
    };
    for job in jobs.iter_mut() {
        if job.run(&mut *tx).await != Ran::Ok {
            return match tx.rollback().await {
                Ok(()) => Batch::RolledBack,
                Err(e) => Batch::Failed(e.into()),
            };
        }
    }
    match tx.commit().await {
        Ok(()) => Batch::Committed,
        Err(e) => Batch::Failed(e.into()),
    }
}
