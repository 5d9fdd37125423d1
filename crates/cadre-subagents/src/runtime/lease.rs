//! A durable child's lease on its task: how its executor knows, before each model call and
//! each tool call, that its node still owns the task and no other node has adopted it.
//!
//! Another node may adopt a task once its heartbeat is older than the orphan timeout, so a
//! proof of ownership (the store taking a write fenced with this run's epoch, which also
//! beats the task) holds for the orphan timeout from the moment it was asked for. The lease
//! is that proof kept in memory with a deadline of half the orphan timeout; the other half
//! is the margin for clock skew between nodes and for a step that starts just before the
//! deadline. Far from its deadline a check is a clock read. In its last half (and past it)
//! a check renews it with one fenced beat of the task: a round trip every quarter of the
//! orphan timeout at most, per child, and none while a long call runs (the process
//! heartbeat keeps the task beaten meanwhile). A beat the store refuses means another node
//! owns the task now (or it ended): the lease is lost for good and the run stops. A store
//! that does not answer cannot prove anything: the run goes on until the deadline, then
//! stops by itself.
//!
//! The process heartbeat cannot renew the lease: it beats whatever this process still owns
//! and says how many, not which, so a beat after a pause proves nothing about one task.

use crate::runtime::child_job::ChildJob;
use cadre_store::TaskStore;
use cadre_types::TaskStatus;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// One task's lease, held by the run that executes it.
pub(crate) struct OwnerLease {
    store: Arc<dyn TaskStore>,
    task_id: String,
    /// The owner epoch this run holds the task at.
    epoch: u64,
    /// How long a proof of ownership is trusted.
    ttl: Duration,
    /// Until when ownership is proven; `None` before the first proof.
    deadline: Mutex<Option<Instant>>,
    /// The task is another node's now (or ended): nothing more is done for it here.
    lost: AtomicBool,
}

impl OwnerLease {
    /// The lease of task `task_id` at `epoch`, under an orphan timeout of `orphan_timeout`.
    /// `proven_at` is when ownership was last proven (the task created or moved to running
    /// by this run, just now); `None` has the first check ask the store.
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        task_id: &str,
        epoch: u64,
        orphan_timeout: Duration,
        proven_at: Option<Instant>,
    ) -> Self {
        let ttl = orphan_timeout / 2;
        Self {
            store,
            task_id: task_id.to_string(),
            epoch,
            ttl,
            deadline: Mutex::new(proven_at.map(|t| t + ttl)),
            lost: AtomicBool::new(false),
        }
    }

    /// The task was found to be another node's (or ended): the run stopped for it.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline.lock().ok().and_then(|d| *d)
    }

    /// Whether this run still owns the task: a clock read while the lease is young, a
    /// fenced beat of the task in its last half or once it ran out.
    pub(crate) async fn holds(&self) -> bool {
        if self.is_lost() {
            return false;
        }
        let asked = Instant::now();
        let deadline = self.deadline();
        if deadline.is_some_and(|d| asked + self.ttl / 2 < d) {
            return true;
        }
        match self.store.renew_owned(&self.task_id, self.epoch).await {
            Ok(true) => {
                // Proven as of when it was asked: the beat was written after that.
                if let Ok(mut d) = self.deadline.lock() {
                    *d = Some(d.map_or(asked + self.ttl, |d| d.max(asked + self.ttl)));
                }
                true
            }
            Ok(false) => {
                self.lose("another node adopted the task (or it ended)");
                false
            }
            Err(e) if deadline.is_some_and(|d| Instant::now() < d) => {
                tracing::debug!(task = %self.task_id, error = %e, "store: lease not renewed; it still runs");
                true
            }
            Err(e) => {
                tracing::debug!(task = %self.task_id, error = %e, "store: lease not renewed");
                self.lose("its lease ran out and the store cannot renew it");
                false
            }
        }
    }

    fn lose(&self, why: &str) {
        if !self.lost.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                task = %self.task_id,
                epoch = self.epoch,
                "this node no longer owns the task: {why}; its child stops here (no tool call, no model call, nothing recorded)"
            );
        }
    }
}

impl ChildJob {
    /// The lease this job's run holds its task with, ownership proven at `proven` (none:
    /// its first step asks the store).
    pub(crate) fn lease(&self, proven: Option<Instant>) -> Arc<OwnerLease> {
        let orphan_timeout = self.runtime.upgrade().map_or(
            Duration::from_secs(cadre_store::DEFAULT_ORPHAN_TIMEOUT_SECS),
            |rt| rt.cfg.orphan_timeout,
        );
        Arc::new(OwnerLease::new(
            self.store.clone(),
            &self.task_id,
            self.epoch,
            orphan_timeout,
            proven,
        ))
    }

    /// The end of a run stopped because another node owns its task now: nothing is
    /// recorded for it here (no end, no worktree commit, no delivery; the other node's run
    /// is the task's). This process only forgets it.
    pub(crate) async fn abandon(&self) {
        tracing::info!(task = %self.task_id, "the task is another node's: its run here ended, and nothing of it is recorded");
        self.release(TaskStatus::Cancelled, None).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_store::{MemoryStore, NewTask, NodeId};

    async fn task(store: &Arc<MemoryStore>) -> String {
        store.create(&NewTask::new("w", "s", "p")).await.unwrap().id
    }

    #[tokio::test(start_paused = true)]
    async fn a_young_lease_holds_without_the_store_and_an_old_one_asks_it() {
        let store = Arc::new(MemoryStore::new(NodeId::new("n")));
        let id = task(&store).await;
        let lease = OwnerLease::new(
            store.clone(),
            &id,
            0,
            Duration::from_secs(8),
            Some(Instant::now()),
        );
        assert!(lease.holds().await);
        // Adopted elsewhere meanwhile: a young lease does not see it (the orphan timeout
        // had not passed, so no node could have adopted it, save in this test).
        store
            .transition(&id, cadre_store::Transition::failed("gone"))
            .await
            .unwrap();
        assert!(lease.holds().await);
        tokio::time::advance(Duration::from_secs(3)).await;
        // In its last half it asks, and the task is not this run's any more.
        assert!(!lease.holds().await);
        assert!(lease.is_lost());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_renewed_by_the_store_goes_on() {
        let store = Arc::new(MemoryStore::new(NodeId::new("n")));
        let id = task(&store).await;
        let lease = OwnerLease::new(store.clone(), &id, 0, Duration::from_secs(8), None);
        for _ in 0..5 {
            assert!(lease.holds().await);
            tokio::time::advance(Duration::from_secs(5)).await;
        }
        // A wrong epoch is another owner's.
        let other = OwnerLease::new(store.clone(), &id, 1, Duration::from_secs(8), None);
        assert!(!other.holds().await);
    }
}
