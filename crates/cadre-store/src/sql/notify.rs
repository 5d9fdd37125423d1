//! Cross-node control: cancellation watches and waiting for a task owned elsewhere.
//!
//! PostgreSQL: one `LISTEN` connection per store handle (started on first use) receives the
//! trigger notifications `cadre_task_cancel` / `cadre_task_done` and fans them out; a lost
//! connection, a lagging subscriber and a slow periodic tick all fall back to re-reading the
//! table, so a missed notification only delays, never loses, an event.
//! SQLite: polling (cancellations every 250 ms by default; waits back off 50 ms → 500 ms).

use super::{Db, SqlStore};
use crate::error::{StoreError, StoreResult};
use crate::model::TaskRecord;
use crate::node::NodeId;
use crate::store::{AbortOnDrop, CancelWatch, report_cancellations};
use sqlx::postgres::{PgListener, PgPool};
use std::collections::HashSet;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;

const CANCEL_CHANNEL: &str = "cadre_task_cancel";
const DONE_CHANNEL: &str = "cadre_task_done";
/// Re-read interval that backs up notifications on PostgreSQL.
const PG_BACKSTOP: Duration = Duration::from_secs(2);
const WAIT_MIN: Duration = Duration::from_millis(50);
const WAIT_MAX: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
enum PgEvent {
    Cancel(String),
    Done(String),
    /// Notifications may have been lost: re-read.
    Resync,
}

/// The shared `LISTEN` connection of a PostgreSQL store handle.
pub(crate) struct PgEvents {
    tx: broadcast::Sender<PgEvent>,
    _task: AbortOnDrop,
}

impl PgEvents {
    async fn start(pool: &PgPool) -> StoreResult<Self> {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen_all([CANCEL_CHANNEL, DONE_CHANNEL]).await?;
        let (tx, _) = broadcast::channel(1024);
        let sender = tx.clone();
        let task = tokio::spawn(async move {
            loop {
                let event = match listener.try_recv().await {
                    Ok(Some(n)) if n.channel() == CANCEL_CHANNEL => {
                        PgEvent::Cancel(n.payload().to_string())
                    }
                    Ok(Some(n)) if n.channel() == DONE_CHANNEL => {
                        PgEvent::Done(n.payload().to_string())
                    }
                    Ok(Some(_)) => continue,
                    Ok(None) => PgEvent::Resync,
                    Err(e) => {
                        tracing::warn!("task store LISTEN connection: {e}");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        PgEvent::Resync
                    }
                };
                let _ = sender.send(event);
            }
        });
        Ok(PgEvents {
            tx,
            _task: AbortOnDrop(task),
        })
    }
}

/// Ids of `node`'s non-terminal tasks with a cancel request (only `only`, when given).
async fn cancelled_ids(db: &Db, node: &str, only: Option<&str>) -> StoreResult<Vec<String>> {
    let mut sql = String::from(
        "SELECT id FROM tasks WHERE owner_node = $1 AND cancel_requested \
         AND status IN ('pending', 'running')",
    );
    if only.is_some() {
        sql.push_str(" AND id = $2");
    }
    let args = std::iter::once(node)
        .chain(only)
        .map(super::conn::Arg::from)
        .collect();
    db.fetch(&sql, args)
        .await?
        .iter()
        .map(|r| r.try_get::<String, _>(0))
        .collect()
}

impl SqlStore {
    async fn events(&self) -> StoreResult<&PgEvents> {
        self.pg_events
            .get_or_try_init(|| async {
                match &self.db {
                    Db::Postgres { pool, .. } => PgEvents::start(pool).await,
                    Db::Sqlite { .. } => Err(StoreError::Config(
                        "notifications need PostgreSQL".to_string(),
                    )),
                }
            })
            .await
    }

    pub(super) async fn watch_cancel(&self, node: &NodeId) -> StoreResult<CancelWatch> {
        let (tx, rx) = mpsc::channel(256);
        let db = self.db.clone();
        let node = node.to_string();
        let task = match &self.db {
            Db::Sqlite { .. } => {
                let every = self.poll_interval;
                tokio::spawn(async move {
                    let mut reported = HashSet::new();
                    loop {
                        match cancelled_ids(&db, &node, None).await {
                            Ok(ids) => {
                                if !report_cancellations(&tx, &mut reported, ids, true).await {
                                    return;
                                }
                            }
                            Err(e) => tracing::warn!("cancellation poll: {e}"),
                        }
                        tokio::time::sleep(every).await;
                    }
                })
            }
            Db::Postgres { .. } => {
                let mut events = self.events().await?.tx.subscribe();
                tokio::spawn(async move {
                    let mut reported = HashSet::new();
                    let mut full = true;
                    let mut one: Option<String> = None;
                    loop {
                        if full || one.is_some() {
                            match cancelled_ids(&db, &node, one.as_deref()).await {
                                Ok(ids) => {
                                    if !report_cancellations(&tx, &mut reported, ids, full).await {
                                        return;
                                    }
                                }
                                Err(e) => tracing::warn!("cancellation check: {e}"),
                            }
                        }
                        (full, one) = (false, None);
                        tokio::select! {
                            ev = events.recv() => match ev {
                                Ok(PgEvent::Cancel(id)) => one = Some(id),
                                Ok(PgEvent::Done(id)) => { reported.remove(&id); }
                                Ok(PgEvent::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => full = true,
                                Err(broadcast::error::RecvError::Closed) => return,
                            },
                            _ = tokio::time::sleep(PG_BACKSTOP) => full = true,
                        }
                    }
                })
            }
        };
        Ok(CancelWatch::new(rx, task))
    }

    /// The task if it is terminal; `NotFound` if it does not exist.
    async fn terminal(&self, id: &str) -> StoreResult<Option<TaskRecord>> {
        match self.get_task(id).await? {
            Some(r) if r.status.is_terminal() => Ok(Some(r)),
            Some(_) => Ok(None),
            None => Err(StoreError::NotFound(id.to_string())),
        }
    }

    pub(super) async fn wait_for_terminal(
        &self,
        id: &str,
        timeout: Duration,
    ) -> StoreResult<Option<TaskRecord>> {
        let deadline = Instant::now() + timeout;
        let mut events = match &self.db {
            Db::Postgres { .. } => Some(self.events().await?.tx.subscribe()),
            Db::Sqlite { .. } => None,
        };
        let mut backoff = WAIT_MIN;
        loop {
            if let Some(r) = self.terminal(id).await? {
                return Ok(Some(r));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let Some(rx) = events.as_mut() else {
                tokio::time::sleep(backoff.min(deadline - now)).await;
                backoff = (backoff * 2).min(WAIT_MAX);
                continue;
            };
            let tick = tokio::time::sleep((deadline - now).min(PG_BACKSTOP));
            tokio::pin!(tick);
            let mut closed = false;
            loop {
                tokio::select! {
                    ev = rx.recv() => match ev {
                        Ok(PgEvent::Done(done)) if done == id => break,
                        Ok(PgEvent::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Ok(_) => continue,
                        Err(broadcast::error::RecvError::Closed) => {
                            closed = true;
                            break;
                        }
                    },
                    _ = &mut tick => break,
                }
            }
            if closed {
                events = None;
            }
        }
    }
}
