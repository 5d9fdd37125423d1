//! Reads of one task by id, coalesced: the reads asked for while others are in flight go out
//! together as one statement. A fan-out's waiters read their tasks back within a few
//! milliseconds of each other. On PostgreSQL each read was a statement and a round trip, and
//! the server's work per statement was most of its cost; on SQLite each was a hand-off to a
//! reader thread and back.
//!
//! The queue is drained by tasks spawned, as needed, on the runtime of the read that finds
//! a slot free; none outlives the queue's last read, so a store opened in one runtime reads
//! in any other (outside tokio, each read runs alone). A statement has no timeout of its
//! own (as no read of the store has): one that hangs holds its slot, and only when every
//! slot hangs do the reads queued behind wait with it.

use super::conn::{Arg, Row, pg_fetch, pg_fetch_columns};
use super::readers::Readers;
use super::tasks::{GET, GET_MANY, GET_MANY_SQLITE};
use crate::error::{StoreError, StoreResult};
use futures::StreamExt;
use sqlx::postgres::PgPool;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

/// Reads that may wait for a statement; a caller beyond this waits to queue its read.
const QUEUE: usize = 1024;
/// Ids one statement reads at most.
const MAX_IDS: usize = 500;

/// What the coalesced reads have done so far (see [`crate::SqlStore::read_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Reads of a task by id asked for.
    pub gets: u64,
    /// Statements they ran (a statement for several reads counts once).
    pub statements: u64,
}

#[derive(Default)]
struct Counters {
    gets: AtomicU64,
    statements: AtomicU64,
}

/// Where the reads run.
#[derive(Clone)]
pub(crate) enum Source {
    Postgres(PgPool),
    Sqlite(Readers),
}

impl Source {
    /// Whether the database could hold a task with this id: PostgreSQL's text holds no NUL,
    /// and an id with one would fail the whole statement it shares.
    fn can_hold(&self, id: &str) -> bool {
        matches!(self, Source::Sqlite(_)) || !id.contains('\0')
    }

    async fn one(&self, id: &str) -> StoreResult<Option<Row>> {
        let rows = match self {
            Source::Postgres(pool) => pg_fetch(pool, &GET, &[Arg::from(id)]).await?,
            Source::Sqlite(readers) => readers.fetch(GET.clone(), vec![id.into()]).await?,
        };
        Ok(rows.into_iter().next())
    }

    async fn many(&self, asks: &[Ask]) -> StoreResult<Vec<Row>> {
        match self {
            Source::Postgres(pool) => {
                let ids: Vec<[Arg; 1]> = asks.iter().map(|a| [Arg::from(a.id.as_str())]).collect();
                let rows: Vec<&[Arg]> = ids.iter().map(<[Arg; 1]>::as_slice).collect();
                pg_fetch_columns(pool, &GET_MANY, &rows).await
            }
            Source::Sqlite(readers) => {
                let ids = serde_json::Value::from_iter(asks.iter().map(|a| a.id.as_str()));
                let ids = ids.to_string();
                readers
                    .fetch(GET_MANY_SQLITE.clone(), vec![ids.into()])
                    .await
            }
        }
    }
}

struct Ask {
    id: String,
    reply: oneshot::Sender<StoreResult<Option<Row>>>,
    /// Its place in the queue, given back once it is answered.
    _room: OwnedSemaphorePermit,
}

/// The reads waiting for a statement, and how many tasks drain them.
#[derive(Default)]
struct Queue {
    asks: VecDeque<Ask>,
    draining: usize,
}

struct Shared {
    source: Source,
    /// Statements in flight at most: tasks draining the queue at once.
    at_once: usize,
    queue: Mutex<Queue>,
    room: Arc<Semaphore>,
    counters: Counters,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // The lock is held only to move asks in and out; a panic cannot leave it half done.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The handle reads are queued on. Cloning it shares the queue.
#[derive(Clone)]
pub(crate) struct Gets {
    shared: Arc<Shared>,
}

impl Gets {
    /// Reads from `source`, with at most `at_once` statements in flight (the rest of its
    /// connections stay free for the other reads and the writer).
    pub(crate) fn new(source: Source, at_once: usize) -> Self {
        let shared = Shared {
            source,
            at_once: at_once.max(1),
            queue: Mutex::new(Queue::default()),
            room: Arc::new(Semaphore::new(QUEUE)),
            counters: Counters::default(),
        };
        Gets {
            shared: Arc::new(shared),
        }
    }

    /// The row of task `id`, read with the reads asked for meanwhile.
    pub(crate) async fn get(&self, id: &str) -> StoreResult<Option<Row>> {
        let shared = &self.shared;
        shared.counters.gets.fetch_add(1, Ordering::Relaxed);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            shared.counters.statements.fetch_add(1, Ordering::Relaxed);
            return shared.source.one(id).await;
        };
        let closed = || StoreError::Db(sqlx::Error::PoolClosed);
        let room = shared
            .room
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| closed())?;
        let (reply, answer) = oneshot::channel();
        let drain_too = {
            let mut queue = shared.queue();
            queue.asks.push_back(Ask {
                id: id.to_owned(),
                reply,
                _room: room,
            });
            let free = queue.draining < shared.at_once;
            if free {
                queue.draining += 1;
            }
            free
        };
        if drain_too {
            runtime.spawn(drain(Draining {
                shared: shared.clone(),
                given_back: false,
            }));
        }
        // A drain task ended with its runtime drops the reads it held: those fail.
        answer.await.map_err(|_| closed())?
    }

    pub(crate) fn stats(&self) -> ReadStats {
        let counters = &self.shared.counters;
        ReadStats {
            gets: counters.gets.load(Ordering::Relaxed),
            statements: counters.statements.load(Ordering::Relaxed),
        }
    }
}

/// A task's turn at draining the queue: given back with the lock that finds the queue
/// empty, else (the task ended with its runtime) when dropped.
struct Draining {
    shared: Arc<Shared>,
    given_back: bool,
}

impl Drop for Draining {
    fn drop(&mut self) {
        if self.given_back {
            return;
        }
        let mut queue = self.shared.queue();
        queue.draining -= 1;
        if queue.draining == 0 {
            // No task is left to take these until another read comes: they fail now
            // rather than wait for it.
            queue.asks.clear();
        }
    }
}

/// Take the queued reads, up to a statement's worth at a time, until none is left.
async fn drain(mut turn: Draining) {
    loop {
        let asks: Vec<Ask> = {
            let mut queue = turn.shared.queue();
            if queue.asks.is_empty() {
                // Under the lock that a read queues with: a read queued after this finds
                // the slot free and starts a task of its own.
                queue.draining -= 1;
                turn.given_back = true;
                return;
            }
            let n = queue.asks.len().min(MAX_IDS);
            queue.asks.drain(..n).collect()
        };
        let shared = &turn.shared;
        answer(&shared.source, asks, shared.at_once, &shared.counters).await;
    }
}

/// Read the asked tasks in one statement and answer each. When that statement fails for
/// want of the database (no connection, a lost one), every read would: each caller gets
/// that failure. When it fails otherwise, each read runs again on its own (`at_once` at a
/// time), so that each caller hears of its own read's failure.
async fn answer(source: &Source, asks: Vec<Ask>, at_once: usize, counters: &Counters) {
    let (asks, unheld): (Vec<Ask>, Vec<Ask>) =
        asks.into_iter().partition(|a| source.can_hold(&a.id));
    for ask in unheld {
        let _ = ask.reply.send(Ok(None));
    }
    if asks.len() > 1 {
        match read_many(source, &asks, counters).await {
            Ok(by_id) => {
                for ask in asks {
                    let _ = ask.reply.send(Ok(by_id.get(&ask.id).cloned()));
                }
                return;
            }
            Err(e) => match unavailable(&e) {
                Some(again) => {
                    for ask in asks {
                        let _ = ask.reply.send(Err(again()));
                    }
                    return;
                }
                None => {
                    tracing::debug!(error = %e, reads = asks.len(), "store: a coalesced read failed; reading each alone");
                }
            },
        }
    }
    counters
        .statements
        .fetch_add(asks.len() as u64, Ordering::Relaxed);
    futures::stream::iter(asks)
        .for_each_concurrent(at_once, |ask| async move {
            let _ = ask.reply.send(source.one(&ask.id).await);
        })
        .await;
}

/// For a failure that every read would meet (the database out of reach: no connection
/// within the pool's timeout, the pool closed, a lost connection), the same failure again
/// for each caller; `None` for one that is the statement's own.
fn unavailable(e: &StoreError) -> Option<Box<dyn Fn() -> StoreError + Send>> {
    let StoreError::Db(e) = e else {
        return None;
    };
    Some(match e {
        sqlx::Error::PoolTimedOut => Box::new(|| StoreError::Db(sqlx::Error::PoolTimedOut)),
        sqlx::Error::PoolClosed => Box::new(|| StoreError::Db(sqlx::Error::PoolClosed)),
        sqlx::Error::WorkerCrashed => Box::new(|| StoreError::Db(sqlx::Error::WorkerCrashed)),
        sqlx::Error::Io(io) => {
            let (kind, text) = (io.kind(), io.to_string());
            Box::new(move || {
                StoreError::Db(sqlx::Error::Io(std::io::Error::new(kind, text.clone())))
            })
        }
        _ => return None,
    })
}

/// The rows of the asked tasks that exist, by id: one statement.
async fn read_many(
    source: &Source,
    asks: &[Ask],
    counters: &Counters,
) -> StoreResult<HashMap<String, Row>> {
    counters.statements.fetch_add(1, Ordering::Relaxed);
    let mut by_id = HashMap::with_capacity(asks.len());
    for row in source.many(asks).await? {
        let id: String = row.try_get("id")?;
        by_id.insert(id, row);
    }
    Ok(by_id)
}
