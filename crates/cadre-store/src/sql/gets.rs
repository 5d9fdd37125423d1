//! Reads of one task by id, coalesced: the reads asked for while others are in flight go out
//! together as one statement. A fan-out's waiters read their tasks back within a few
//! milliseconds of each other; on PostgreSQL a statement and a round trip each made the
//! server's work per statement most of their cost, on SQLite a hand-off to a reader thread
//! and back each.

use super::conn::{Arg, Row, pg_fetch, pg_fetch_columns};
use super::readers::Readers;
use super::tasks::{GET, GET_MANY, GET_MANY_SQLITE};
use crate::error::{StoreError, StoreResult};
use sqlx::postgres::PgPool;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{Semaphore, mpsc, oneshot};

/// Reads that may wait for a statement; a caller beyond this waits to queue its read.
const QUEUE: usize = 1024;
/// Statements of these reads in flight at once on PostgreSQL: half the pool, so that the
/// writer, the other reads and the notifications keep connections.
const AT_ONCE_PG: usize = 4;
/// The same on SQLite: half its reader threads.
const AT_ONCE_SQLITE: usize = 2;
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
    fn at_once(&self) -> usize {
        match self {
            Source::Postgres(_) => AT_ONCE_PG,
            Source::Sqlite(_) => AT_ONCE_SQLITE,
        }
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
                let ids: Vec<&str> = asks.iter().map(|a| a.id.as_str()).collect();
                let ids = serde_json::to_string(&ids).map_err(|e| StoreError::Corrupt {
                    id: "ids".into(),
                    reason: e.to_string(),
                })?;
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
}

/// The handle reads are queued on. Cloning it shares the queue; the queue's task ends with
/// the last handle.
#[derive(Clone)]
pub(crate) struct Gets {
    tx: mpsc::Sender<Ask>,
    counters: Arc<Counters>,
}

impl Gets {
    /// Start serving reads from `source`.
    pub(crate) fn start(source: Source) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let counters = Arc::new(Counters::default());
        tokio::spawn(serve(source, rx, counters.clone()));
        Gets { tx, counters }
    }

    /// The row of task `id`, read with the reads asked for meanwhile.
    pub(crate) async fn get(&self, id: &str) -> StoreResult<Option<Row>> {
        let closed = || StoreError::Db(sqlx::Error::PoolClosed);
        let (reply, answer) = oneshot::channel();
        let ask = Ask {
            id: id.to_owned(),
            reply,
        };
        self.tx.send(ask).await.map_err(|_| closed())?;
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        answer.await.map_err(|_| closed())?
    }

    pub(crate) fn stats(&self) -> ReadStats {
        ReadStats {
            gets: self.counters.gets.load(Ordering::Relaxed),
            statements: self.counters.statements.load(Ordering::Relaxed),
        }
    }
}

/// Take the reads as they come: the first one waits for a free statement, and every read
/// queued by then goes with it.
async fn serve(source: Source, mut rx: mpsc::Receiver<Ask>, counters: Arc<Counters>) {
    let slots = Arc::new(Semaphore::new(source.at_once()));
    while let Some(first) = rx.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut asks = vec![first];
        while asks.len() < MAX_IDS {
            match rx.try_recv() {
                Ok(ask) => asks.push(ask),
                Err(_) => break,
            }
        }
        let (source, counters) = (source.clone(), counters.clone());
        tokio::spawn(async move {
            answer(&source, asks, &counters).await;
            drop(slot);
        });
    }
}

/// Read the asked tasks in one statement and answer each. When that statement fails, each
/// read runs again on its own, so that each caller hears of its own read's failure.
async fn answer(source: &Source, asks: Vec<Ask>, counters: &Counters) {
    if asks.len() > 1 {
        match read_many(source, &asks, counters).await {
            Ok(by_id) => {
                for ask in asks {
                    let _ = ask.reply.send(Ok(by_id.get(&ask.id).cloned()));
                }
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, reads = asks.len(), "store: a coalesced read failed; reading each alone");
            }
        }
    }
    // At once, as they would have run without the queue: in an outage each fails within
    // the pool's timeout, not after the reads before it.
    counters
        .statements
        .fetch_add(asks.len() as u64, Ordering::Relaxed);
    futures::future::join_all(asks.into_iter().map(|ask| async move {
        let _ = ask.reply.send(source.one(&ask.id).await);
    }))
    .await;
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
