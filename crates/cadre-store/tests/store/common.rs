//! Fixtures shared by the store tests: a backend-generic database per test, and the
//! drive/attack routines of the concurrency tests.

use cadre_store::testing::{find_pg_bin, shared_cluster};
use cadre_store::{
    MemoryStore, NewTask, NodeId, SqlStore, StoreError, TaskStatus, TaskStore, Transition,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Which backend a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Memory,
    Sqlite,
    Postgres,
}

/// One fresh database.
pub struct Fixture {
    pub url: String,
    /// The SQLite file, for SQLite.
    pub path: Option<PathBuf>,
    /// The shared memory, for the memory store.
    memory: Option<MemoryStore>,
    _dir: Option<tempfile::TempDir>,
}

impl Fixture {
    /// A fresh database of `kind`; `None` (after a loud SKIPPED line) when PostgreSQL is
    /// not installed outside CI. In CI (`CI=true`) a missing PostgreSQL fails the test.
    pub async fn new(kind: Kind) -> Option<Fixture> {
        match kind {
            Kind::Memory => Some(Fixture {
                url: "memory".to_string(),
                path: None,
                memory: Some(MemoryStore::new(NodeId::new("unused"))),
                _dir: None,
            }),
            Kind::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join(".cadre").join("cadre.db");
                Some(Fixture {
                    url: format!("sqlite://{}", path.display()),
                    path: Some(path),
                    memory: None,
                    _dir: Some(dir),
                })
            }
            Kind::Postgres => {
                if find_pg_bin().is_none() {
                    assert!(
                        !std::env::var("CI").is_ok_and(|v| v == "true"),
                        "PostgreSQL not installed, and CI=true: install it (.ci/run does)"
                    );
                    eprintln!("SKIPPED: PostgreSQL not installed");
                    return None;
                }
                let cluster = shared_cluster().unwrap_or_else(|e| panic!("PostgreSQL: {e}"));
                let url = cluster.create_database().await.unwrap();
                Some(Fixture {
                    url,
                    path: None,
                    memory: None,
                    _dir: None,
                })
            }
        }
    }

    /// A store handle for node `node` (on the memory store: a handle on the same memory).
    pub async fn open(&self, node: &str) -> Arc<dyn TaskStore> {
        match &self.memory {
            Some(m) => Arc::new(m.on_node(NodeId::new(node))),
            None => Arc::new(self.open_sql(node).await),
        }
    }

    /// A SQL store handle for node `node` (SQL-only tests).
    pub async fn open_sql(&self, node: &str) -> SqlStore {
        cadre_store::open(&self.url, NodeId::new(node))
            .await
            .unwrap_or_else(|e| panic!("open {}: {e}", self.url))
    }
}

/// Run an `async fn(Kind)` test once per backend, as `<name>::memory`, `<name>::sqlite` and
/// `<name>::postgres`.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn memory() {
                super::$name($crate::common::Kind::Memory).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::common::Kind::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::common::Kind::Postgres).await
            }
        }
    )*};
}

/// Run an `async fn(Kind)` test on the SQL backends only, as `<name>::sqlite` and
/// `<name>::postgres`: for what only a database has (its schema, its files, several OS
/// processes sharing it).
#[macro_export]
macro_rules! sql_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::common::Kind::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::common::Kind::Postgres).await
            }
        }
    )*};
}

/// Create `n` background tasks in `session`; their ids in creation order.
pub async fn create_batch(store: &dyn TaskStore, session: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let mut t = NewTask::new("worker", session, &format!("job {i}"));
        t.background = true;
        ids.push(store.create(&t).await.unwrap().id);
    }
    ids
}

/// Drive own tasks pending → running → completed (cancelled when cancel was requested).
/// Returns the terminal writes this driver won.
pub async fn drive(store: &dyn TaskStore, ids: &[String]) -> Vec<(String, TaskStatus)> {
    let mut won = Vec::new();
    for id in ids {
        match store.transition(id, Transition::running()).await {
            Ok(()) => {}
            Err(e) if e.is_refused() => {}
            Err(e) => panic!("running {id}: {e}"),
        }
        match store.transition(id, Transition::completed("done")).await {
            Ok(()) => won.push((id.clone(), TaskStatus::Completed)),
            Err(StoreError::Refused { from, .. }) => assert!(from.is_terminal(), "{id} {from}"),
            Err(e) => panic!("complete {id}: {e}"),
        }
        tokio::task::yield_now().await;
    }
    won
}

/// Attack the other node's tasks in a scattered order (so some are still pending, some in
/// flight and some done when hit): request cancellation of every third, write `failed` or
/// `cancelled` on the rest. Returns the terminal writes won.
pub async fn attack(store: &dyn TaskStore, ids: &[String]) -> Vec<(String, TaskStatus)> {
    let mut won = Vec::new();
    let n = ids.len();
    for i in 0..n {
        // 7919 is prime and does not divide the batch sizes used: a permutation of 0..n.
        let id = &ids[(i * 7919) % n];
        let t = match i % 3 {
            0 => {
                store.request_cancel(id).await.unwrap();
                Transition::cancelled()
            }
            1 => Transition::failed("overwritten by the other node"),
            _ => Transition::cancelled(),
        };
        let to = t.to;
        match store.transition(id, t).await {
            Ok(()) => won.push((id.clone(), to)),
            Err(StoreError::Refused { from, .. }) => assert!(from.is_terminal(), "{id} {from}"),
            Err(e) => panic!("attack {id}: {e}"),
        }
        tokio::task::yield_now().await;
    }
    won
}

/// Every task has exactly one winning terminal write, and the stored status is that one.
pub async fn verify_wins(store: &dyn TaskStore, ids: &[String], wins: &[(String, TaskStatus)]) {
    let mut by_id: HashMap<&str, Vec<TaskStatus>> = HashMap::new();
    for (id, st) in wins {
        by_id.entry(id.as_str()).or_default().push(*st);
    }
    for id in ids {
        let w = by_id.get(id.as_str()).cloned().unwrap_or_default();
        assert_eq!(w.len(), 1, "{id}: terminal writes accepted: {w:?}");
        let rec = store
            .get(id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{id} lost"));
        assert_eq!(rec.status, w[0], "{id}: terminal state overwritten");
    }
    assert_eq!(by_id.len(), ids.len(), "wins on unknown ids");
}

/// Returns once the store's clock (Unix milliseconds) has moved past the millisecond it
/// reads now, so the next write's timestamp is strictly later than any write before the call.
/// Spins with a yield: the tick is at most a millisecond away.
pub async fn clock_ticks() {
    let ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    };
    let start = ms();
    while ms() == start {
        tokio::task::yield_now().await;
    }
}
