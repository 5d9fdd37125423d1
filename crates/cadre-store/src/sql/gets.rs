//! Reads of one task by id on PostgreSQL, coalesced: the reads asked for while the pool is
//! busy with others go out together as one statement. A fan-out's waiters read their tasks
//! back within a few milliseconds of each other; one statement and one round trip each
//! made the server's work per statement most of their cost.

use super::conn::{Arg, Row, pg_fetch, pg_fetch_columns};
use super::tasks::{GET, GET_MANY};
use crate::error::{StoreError, StoreResult};
use sqlx::postgres::PgPool;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{Semaphore, mpsc, oneshot};

/// Reads that may wait for a statement; a caller beyond this waits to queue its read.
const QUEUE: usize = 1024;
/// Statements of these reads in flight at once: half the pool, so that the writer, the
/// other reads and the notifications keep connections.
const AT_ONCE: usize = 4;
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
    /// Start serving reads from `pool`.
    pub(crate) fn start(pool: PgPool) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let counters = Arc::new(Counters::default());
        tokio::spawn(serve(pool, rx, counters.clone()));
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
async fn serve(pool: PgPool, mut rx: mpsc::Receiver<Ask>, counters: Arc<Counters>) {
    let slots = Arc::new(Semaphore::new(AT_ONCE));
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
        let (pool, counters) = (pool.clone(), counters.clone());
        tokio::spawn(async move {
            answer(&pool, asks, &counters).await;
            drop(slot);
        });
    }
}

/// Read the asked tasks in one statement and answer each. When that statement fails, each
/// read runs on its own, so that each caller hears of its own read's failure.
async fn answer(pool: &PgPool, asks: Vec<Ask>, counters: &Counters) {
    if asks.len() > 1 {
        match read_many(pool, &asks, counters).await {
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
    for ask in asks {
        counters.statements.fetch_add(1, Ordering::Relaxed);
        let read = pg_fetch(pool, &GET, &[Arg::from(ask.id.as_str())]).await;
        let _ = ask.reply.send(read.map(|rows| rows.into_iter().next()));
    }
}

/// The rows of the asked tasks that exist, by id: one statement.
async fn read_many(
    pool: &PgPool,
    asks: &[Ask],
    counters: &Counters,
) -> StoreResult<HashMap<String, Row>> {
    counters.statements.fetch_add(1, Ordering::Relaxed);
    let ids: Vec<[Arg; 1]> = asks.iter().map(|a| [Arg::from(a.id.as_str())]).collect();
    let rows: Vec<&[Arg]> = ids.iter().map(<[Arg; 1]>::as_slice).collect();
    let mut by_id = HashMap::with_capacity(asks.len());
    for row in pg_fetch_columns(pool, &GET_MANY, &rows).await? {
        let id: String = row.try_get("id")?;
        by_id.insert(id, row);
    }
    Ok(by_id)
}
