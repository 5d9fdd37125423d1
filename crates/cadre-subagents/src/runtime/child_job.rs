//! One task of a child: wait for a concurrency slot, make its worktree and build the child
//! if it was only planned, run its agent on its session, settle the worktree, and store the
//! honest end state (once, in the task store) before anyone here is told. Once the task holds
//! its slot it goes through named phases: `materialise` (worktree, child), `begin` (its
//! conversation, `running`), `run_child` (the run proper, in `job_run`), `deliver` (hooks,
//! worktree, end).

use crate::runtime::forward::ForwardSink;
use crate::runtime::lease::OwnerLease;
use crate::runtime::live::LiveChildren;
use crate::runtime::spool::Spool;
use crate::runtime::tracker::LocalTasks;
use crate::runtime::worktree::Worktree;
use crate::runtime::{Child, ChildRunner, JobChild, Resumed, SubagentRuntime};
use cadre_engine::{RunOutcome, Session};
use cadre_store::{StoreError, TaskRecord, TaskStore, Transition};
use cadre_tools::RunContext;
use cadre_types::{EndState, TaskStatus, UpdateKind, Usage};
use std::sync::{Arc, Weak};
use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub(crate) struct ChildJob {
    pub task_id: String,
    pub child: JobChild,
    /// Builds a planned child.
    pub runtime: Weak<SubagentRuntime>,
    /// A one-off child (the `task` tool's): its session ends with this task.
    pub one_off: bool,
    /// The runtime's live children (a one-off child's go when its task ends).
    pub live: Arc<LiveChildren>,
    pub prompt: String,
    /// The task's title (named in a worktree's commit message).
    pub description: String,
    pub run: Arc<RunContext>,
    pub cancel: CancellationToken,
    pub slot: Arc<Semaphore>,
    /// The slot, when it was free as the task was created (`running`, then).
    pub permit: Option<OwnedSemaphorePermit>,
    /// A live child's conversation, when it was free as the task was created.
    pub conversation: Option<tokio::sync::OwnedMutexGuard<cadre_engine::Session>>,
    /// A live child's message, counted until this job ends.
    pub _message: Option<crate::runtime::types::ChildMessage>,
    pub local: LocalTasks,
    pub forward: Arc<ForwardSink>,
    pub store: Arc<dyn TaskStore>,
    /// Checkpoint a local child's conversation in the store at every turn boundary.
    pub checkpoints: bool,
    /// The owner epoch this job holds the task at: its writes are fenced with it, so they
    /// are refused once another node has adopted the task. A new task starts at 0.
    pub epoch: u64,
    /// Set for a task adopted from a lost node: it continues from its checkpoint.
    pub resumed: Option<Resumed>,
    /// The task as created: what its end, when the store cannot take it, is read as here.
    pub created: TaskRecord,
    /// Where an end the store did not take within `write_retry` is kept.
    pub spool: Arc<Spool>,
    /// How long a write is retried over a failing store.
    pub write_retry: std::time::Duration,
}

/// Why a planned child could not be built when its task got a slot (the task's error).
#[derive(Debug, thiserror::Error)]
enum BuildFailure {
    /// Building it failed.
    #[error(transparent)]
    Spawn(#[from] super::SpawnError),
    /// Building it panicked (in a factory, say).
    #[error("agent {0}: building the sub-agent panicked")]
    Panicked(String),
    /// The runtime was dropped before the task got its slot.
    #[error("the sub-agent runtime has shut down")]
    ShutDown,
}

impl ChildJob {
    /// The task was created `running` (it had its slot, and its turn): its job writes no
    /// `running`. An adopted task was running on the node it came from, which is another
    /// matter.
    pub(crate) fn created_running(&self) -> bool {
        self.created.status == TaskStatus::Running && self.resumed.is_none()
    }

    /// Build a planned child now that it has a slot, in `root` when it has its own
    /// worktree. A panic while building (in a factory, say) fails the task instead of
    /// leaving it pending forever.
    fn build_child(&self, worktree: Option<&Arc<Worktree>>) -> Result<Child, BuildFailure> {
        match &self.child {
            JobChild::Ready(c) => Ok(c.clone()),
            JobChild::Planned(plan) => match self.runtime.upgrade() {
                Some(rt) => {
                    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        rt.build_planned(plan, worktree.cloned())
                    }));
                    match built {
                        Ok(r) => Ok(r?),
                        Err(_) => Err(BuildFailure::Panicked(plan.agent.clone())),
                    }
                }
                None => Err(BuildFailure::ShutDown),
            },
        }
    }

    /// Store how the task ended, then tell this process: waiters here read a complete,
    /// durable record. When the store already holds an end (the sweeper failed the task, say),
    /// that end stands, and is what waiters see. A store that fails is tried again for a
    /// while, then the end goes to the local spool (written to the store when it answers,
    /// and read here meanwhile); either way the end told here is the real one, never a
    /// cancel.
    async fn end(&self, end: &EndState, output: String, usage: Usage, turns: Option<u64>) {
        let id = &self.task_id;
        let mut t = Transition::ended(end, output, usage).fenced(self.epoch);
        t.turns = turns;
        let state = t.end_state.as_deref().unwrap_or("").split(':').next();
        cadre_tools::otel::metrics::subagent_ended(self.child.name(), state.unwrap_or(""));
        if t.to == TaskStatus::Cancelled
            && let Some(reason) = cancel_reason(&self.runtime)
        {
            t = t.with_error(reason);
        }
        // The task as stored after its end is asked back only for someone waiting here, and
        // its delivery written with it when one of them takes it; the others take it with
        // their delivery, or read it.
        let want = self.local.end_wanted(id);
        if want.delivered {
            t = t.delivering();
        }
        let wanted = t.to;
        // Boxed: every job waiting for its slot would hold room for the store's write.
        let written = if want.returned {
            Box::pin(cadre_store::transition_returning_retrying(
                self.store.as_ref(),
                id,
                t.clone(),
                self.write_retry,
            ))
            .await
        } else {
            Box::pin(cadre_store::transition_retrying(
                self.store.as_ref(),
                id,
                t.clone(),
                self.write_retry,
            ))
            .await
            .map(|()| None)
        };
        let mut stored = None;
        let status = match written {
            Ok(r) => {
                stored = r.map(Box::new);
                wanted
            }
            Err(StoreError::Refused { from, .. }) if from.is_terminal() => {
                tracing::warn!(task = %id, stored = %from, "the store holds another end; it stands");
                from
            }
            Err(e @ StoreError::Fenced { .. }) => {
                tracing::warn!(task = %id, error = %e, "another node adopted the task; this run's end is not recorded");
                wanted
            }
            Err(e) if e.is_transient() => {
                match self.spool.keep(id, &t, Some(&self.created)) {
                    Ok(()) => {
                        tracing::warn!(task = %id, error = %e, "store: down; the end of the task is kept in the spool until it answers")
                    }
                    Err(s) => {
                        tracing::error!(task = %id, error = %e, spool = %s, "store: cannot record the end of a task, nor spool it")
                    }
                }
                wanted
            }
            Err(e) => {
                tracing::error!(task = %id, error = %e, "store: cannot record the end of a task");
                wanted
            }
        };
        self.release(status, stored).await;
    }

    /// Tell this process the task is over here, as `status` (`stored` when the store gave
    /// its record back).
    pub(crate) async fn release(&self, status: TaskStatus, stored: Option<Box<TaskRecord>>) {
        if let JobChild::Ready(c) = &self.child
            && let Some(seat) = &c.team
        {
            let end = crate::runtime::teams::TaskEnd {
                task_id: &self.task_id,
                status,
                stored: stored.as_deref(),
                one_off: self.one_off,
            };
            // Boxed: every job waiting for its slot would otherwise hold room for it.
            Box::pin(crate::runtime::teams::task_ended(&self.runtime, seat, end)).await;
        }
        if self.one_off {
            // The session is over: what it spawned goes with it, before anyone is told.
            let dropped = self.live.drop_session(self.child.session_id());
            if let Some(rt) = self.runtime.upgrade() {
                for c in dropped {
                    // Boxed: ending a live child is a large future, and every job that
                    // waits for its slot would hold room for it.
                    Box::pin(rt.end_live(self.child.session_id(), &c.child)).await;
                }
            }
        }
        self.local.finish_with(&self.task_id, status, stored);
    }

    /// End a task that never started: cancelled, or failed because its child could not be
    /// built.
    async fn end_unstarted(&self, failure: Option<String>) {
        let sid = self.child.session_id();
        let (end, text) = match failure {
            None => (
                EndState::Cancelled,
                "cancelled before it started".to_string(),
            ),
            Some(error) => (
                EndState::Failed {
                    error: error.clone(),
                },
                error,
            ),
        };
        self.end(&end, String::new(), Usage::default(), None).await;
        self.forward.ended(sid, &end, text, Usage::default());
    }

    pub(crate) async fn run(mut self) {
        // The RAII permit frees the slot however the run ends.
        let permit = match self.permit.take() {
            Some(p) => Some(p),
            None => tokio::select! {
                p = self.slot.clone().acquire_owned() => p.ok(),
                _ = self.cancel.cancelled() => None,
            },
        };
        let Some(permit) = permit else {
            self.end_unstarted(None).await;
            return;
        };
        // The rest, the child's whole agent loop, is boxed: a task that waits for its slot
        // holds a small future, not one sized for the loop (21 KB; a 10 000-task fan-out
        // kept 200 MB in waiting futures).
        Box::pin(self.run_in_slot(permit)).await;
    }

    /// The run once it holds its slot (`_permit`, released when the run ends): the child
    /// is materialised, its task begins, it runs, and its end is delivered.
    async fn run_in_slot(mut self, _permit: OwnedSemaphorePermit) {
        let Some(child) = self.materialise().await else {
            return;
        };
        let mut run = self.run.clone();
        if run.model != child.model {
            // A factory may pick another model than the definition said.
            let mut r = (*run).clone();
            r.model = child.model.clone();
            run = Arc::new(r);
        }
        let Some((session, proven)) = self.begin(&child).await else {
            return;
        };
        let hook_run = run.clone();
        let (outcome, lease) = self.run_child(&child, session, run, proven).await;
        self.deliver(&child, &hook_run, &lease, outcome).await;
    }

    /// Make the task's worktree and build its child if it was only planned; the job then
    /// holds the built child. `None` when the task ended instead: cancelled, or its child
    /// could not be built or was closed.
    async fn materialise(&mut self) -> Option<Child> {
        if self.cancel.is_cancelled() {
            // The slot and the cancel came together: do not build a child for nothing.
            self.end_unstarted(None).await;
            return None;
        }
        let worktree = match self.make_worktree().await {
            Ok(w) => w.map(Arc::new),
            Err(e) => {
                self.end_unstarted(Some(e)).await;
                return None;
            }
        };
        let child = match self.build_child(worktree.as_ref()) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(task = %self.task_id, error = %e, "the sub-agent could not be built");
                if let Some(w) = &worktree {
                    // Nothing ran in it: removed with its branch.
                    w.finish(None, "unused").await;
                }
                self.end_unstarted(Some(e.to_string())).await;
                return None;
            }
        };
        if child.worktree.as_ref().is_some_and(|w| w.is_closed()) {
            // A message that reached a live child as it was being closed.
            self.end_unstarted(Some(format!(
                "agent {} was closed, with its worktree",
                child.name
            )))
            .await;
            return None;
        }
        // The built child replaces the plan: the job holds one copy of it.
        self.child = JobChild::Ready(child.clone());
        Some(child)
    }

    /// Take the child's conversation and record that the task runs. Returns the
    /// conversation and when ownership of the task was proven (none for an adopted task);
    /// `None` when the task was cancelled before it could start (it is ended then).
    async fn begin(
        &mut self,
        child: &Child,
    ) -> Option<(OwnedMutexGuard<Session>, Option<Instant>)> {
        let session = match self.conversation.take() {
            Some(held) => Some(held),
            None => tokio::select! {
                s = child.session.clone().lock_owned() => Some(s),
                _ = self.cancel.cancelled() => None,
            },
        };
        // Ownership is proven as of now by the write below (or the creation just before);
        // an adopted task's first step asks the store.
        let proven = self.resumed.is_none().then(Instant::now);
        let started = match session {
            // Created `running` with its slot: nothing to write.
            Some(session) if self.created_running() && !self.cancel.is_cancelled() => Some(session),
            // A cancel requested in the store (here or on another node) refuses `running`.
            Some(session) if !self.cancel.is_cancelled() => {
                self.record_running().await.then_some(session)
            }
            _ => None,
        };
        let Some(session) = started else {
            // Cancelled before it could start (here or, through the store, elsewhere).
            if let (Some(w), true) = (&child.worktree, self.one_off) {
                w.finish(None, "unused").await;
            }
            self.end_unstarted(None).await;
            return None;
        };
        Some((session, proven))
    }

    /// Write that the task runs; false when the store refused it (a cancel was asked for
    /// there). A store that is down does not stop the task.
    async fn record_running(&self) -> bool {
        let id = &self.task_id;
        match cadre_store::transition_retrying(
            self.store.as_ref(),
            id,
            Transition::running().fenced(self.epoch),
            self.write_retry,
        )
        .await
        {
            Ok(()) => {
                self.local.started(id);
                true
            }
            // An adopted task was running on the lost node: it runs on here.
            Err(StoreError::Refused {
                from: TaskStatus::Running,
                ..
            }) if self.resumed.is_some() => {
                self.local.started(id);
                true
            }
            Err(e) if e.is_refused() => {
                tracing::debug!(task = %id, error = %e, "store refused running");
                false
            }
            Err(e) => {
                // The store is down, not saying no: the work goes on, and its end
                // (allowed from pending) is written when it comes.
                tracing::error!(task = %id, error = %e, "store: cannot record that a task runs");
                self.local.started(id);
                true
            }
        }
    }

    /// Announce the start (or the resumption on this node), take the task's lease, let
    /// the hooks add to the prompt, and run the child on `session`, released when its run
    /// ends.
    async fn run_child(
        &mut self,
        child: &Child,
        mut session: OwnedMutexGuard<Session>,
        run: Arc<RunContext>,
        proven: Option<Instant>,
    ) -> (RunOutcome, Arc<OwnerLease>) {
        let (kind, start_note) = match &self.resumed {
            Some(r) => (
                UpdateKind::Resumed,
                format!(
                    "resumed on node {} after node {} was lost",
                    self.store.node_id(),
                    r.lost_node
                ),
            ),
            None => (UpdateKind::Start, self.prompt.clone()),
        };
        self.forward
            .update(&child.session_id, kind, start_note, None, None);
        let lease = self.lease(proven);
        self.forward.leased(lease.clone());
        let from = match self.resumed.take() {
            Some(r) => (true, r.checkpoint),
            None => (false, None),
        };
        let context = super::child_hooks::started(&self.runtime, &run).await;
        super::child_hooks::add_context(&mut self.prompt, context);
        let outcome = self.execute(child, &mut session, run, &lease, from).await;
        drop(session);
        (outcome, lease)
    }

    /// After the run: the hooks hear it stopped; a run whose task another node owns now is
    /// abandoned, any other has its worktree settled and its end stored and told.
    async fn deliver(
        &self,
        child: &Child,
        run: &Arc<RunContext>,
        lease: &OwnerLease,
        outcome: RunOutcome,
    ) {
        super::child_hooks::stopped(&self.runtime, run, &outcome).await;
        if let Some(seat) = &child.team {
            super::child_hooks::teammate_idle(&self.runtime, run, seat).await;
        }
        if lease.is_lost() {
            return self.abandon().await;
        }
        let mut output = outcome.output;
        if let Some(report) = self.settle_worktree(child, &outcome.state).await {
            if !output.is_empty() {
                output.push_str("\n\n");
            }
            output.push_str(&report);
        }
        // A remote agent does not say how many turns it took.
        let counts_turns = matches!(child.runner, ChildRunner::Local { .. });
        let turns = counts_turns.then_some(u64::from(outcome.turns));
        self.end(&outcome.state, output, outcome.usage, turns).await;
    }
}

/// What a cancelled task records as its reason: why the process is shutting down, when
/// that is why (none for a cancel asked for by a user or a model).
fn cancel_reason(runtime: &Weak<SubagentRuntime>) -> Option<String> {
    runtime.upgrade().and_then(|rt| rt.shutdown_reason())
}

/// Aborts a helper task when dropped.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::ChildJob;
    use std::future::Future;

    /// The size of the future `f` returns, without calling it.
    fn future_size<A, F: Future>(_: impl FnOnce(A) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    #[test]
    fn a_job_waiting_for_its_slot_holds_a_small_future() {
        // Every task of a fan-out is spawned at once and waits for a slot in this future;
        // it was sized for the child's whole agent loop (21 KB) before the loop was boxed.
        let waiting = future_size(ChildJob::run);
        let running = future_size(|job: ChildJob| job.run_in_slot(unreachable_permit()));
        assert!(waiting < 4096, "a waiting job holds {waiting} bytes");
        assert!(
            running > waiting,
            "the loop ({running} bytes) is not in the waiting future"
        );
    }

    /// A permit's type for `future_size` (never created).
    fn unreachable_permit() -> tokio::sync::OwnedSemaphorePermit {
        unreachable!("only the type is used")
    }
}
