//! Reads of one task by id, coalesced: the reads asked for while others are in flight go out
//! together as one statement. A fan-out's waiters read their tasks back within a few
//! milliseconds of each other. On PostgreSQL each read was a statement and a round trip, and
//! the server's work per statement was most of its cost; on SQLite each was a hand-off to a
//! reader thread and back.
//!
//! The queue of a PostgreSQL store is served by a task of the tokio runtime that opened it
//! (sqlx's pool needs that runtime anyway); a SQLite store's, by a thread of its own, like
//! its readers and writer, so that it reads in whatever runtime uses it, or none. A
//! statement has no timeout of its own (as no read of the store has): one that hangs holds
//! its slot, and only when every slot hangs do the reads queued behind wait with it.

use super::conn::{Arg, Row, pg_fetch, pg_fetch_columns, spawn_thread};
use super::readers::Readers;
use super::tasks::{GET, GET_MANY, GET_MANY_SQLITE};
use crate::error::{StoreError, StoreResult};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use sqlx::postgres::PgPool;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};

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
}

/// The handle reads are queued on. Cloning it shares the queue; the queue's task ends with
/// the last handle.
#[derive(Clone)]
pub(crate) struct Gets {
    tx: mpsc::Sender<Ask>,
    counters: Arc<Counters>,
}

impl Gets {
    /// Start serving reads from `source`, with at most `at_once` statements in flight (the
    /// rest of its connections stay free for the other reads and the writer). For
    /// PostgreSQL, within the tokio runtime that serves the pool.
    pub(crate) fn start(source: Source, at_once: usize) -> StoreResult<Self> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let counters = Arc::new(Counters::default());
        let serving = serve(source.clone(), at_once.max(1), rx, counters.clone());
        match source {
            Source::Postgres(_) => drop(tokio::spawn(serving)),
            Source::Sqlite(_) => spawn_thread("cadre-store-gets".into(), move || {
                futures::executor::block_on(serving)
            })?,
        }
        Ok(Gets { tx, counters })
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
/// queued by then goes with it. Until the last handle is gone, then the statements in
/// flight are finished.
async fn serve(
    source: Source,
    at_once: usize,
    mut rx: mpsc::Receiver<Ask>,
    counters: Arc<Counters>,
) {
    let mut in_flight = FuturesUnordered::new();
    loop {
        if in_flight.len() >= at_once {
            in_flight.next().await;
            continue;
        }
        tokio::select! {
            biased;
            Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
            first = rx.recv() => {
                let Some(first) = first else { break };
                let mut asks = vec![first];
                while asks.len() < MAX_IDS {
                    match rx.try_recv() {
                        Ok(ask) => asks.push(ask),
                        Err(_) => break,
                    }
                }
                in_flight.push(answer(&source, asks, at_once, &counters));
            }
        }
    }
    while in_flight.next().await.is_some() {}
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NewTask, NodeId, TaskStore};

    /// The reads waiting in the queue when it is served go out as one statement, each
    /// answered with its own task or none. (Asked from another thread, how many wait
    /// depends on how the two threads are scheduled; here all of them are queued first.)
    #[tokio::test]
    async fn reads_queued_before_the_queue_is_served_share_one_statement() {
        let dir = tempfile::tempdir().unwrap();
        let store = super::super::open_sqlite(&dir.path().join("t.db"), NodeId::new("n"))
            .await
            .unwrap();
        let mut ids = Vec::new();
        for i in 0..8 {
            let task = store
                .create(&NewTask::new("a", "s", &format!("p{i}")))
                .await;
            ids.push(task.unwrap().id);
        }
        let super::super::Db::Sqlite { readers, .. } = &store.db else {
            unreachable!("opened on SQLite")
        };
        let asked: Vec<String> = ids
            .iter()
            .cloned()
            .chain(["nope".to_string(), "it's \"quoted\"".to_string()])
            .collect();
        let (tx, rx) = mpsc::channel(QUEUE);
        let mut answers = Vec::new();
        for id in &asked {
            let (reply, answer) = oneshot::channel();
            let ask = Ask {
                id: id.clone(),
                reply,
            };
            tx.try_send(ask).unwrap();
            answers.push(answer);
        }
        drop(tx);
        let counters = Arc::new(Counters::default());
        serve(Source::Sqlite(readers.clone()), 2, rx, counters.clone()).await;
        assert_eq!(counters.statements.load(Ordering::Relaxed), 1);
        for (id, answer) in asked.iter().zip(answers) {
            let row = answer.await.unwrap().unwrap();
            let got: Option<String> = row.map(|r| r.try_get("id").unwrap());
            match ids.contains(id) {
                true => assert_eq!(got.as_ref(), Some(id)),
                false => assert_eq!(got, None, "{id}"),
            }
        }
        store.close().await;
    }
}
