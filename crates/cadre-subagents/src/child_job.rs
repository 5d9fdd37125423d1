//! One task of a child: wait for a concurrency slot, make its worktree and build the child
//! if it was only planned, run its agent on its session, settle the worktree, and record
//! the honest end state in the tracker.

use crate::forward::ForwardSink;
use crate::persist::Persist;
use crate::remote::{OnRemoteId, RemoteApprovals, RemoteRequest};
use crate::runtime::{Child, ChildRunner, JobChild, SubagentRuntime};
use crate::tracker::{TaskStatus, TaskTracker};
use crate::worktree::Worktree;
use cadre_engine::RunOutcome;
use cadre_tools::{RunContext, Spend};
use cadre_types::{EndState, Event, EventEnvelope, Message, UpdateKind};
use std::sync::{Arc, Weak};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub(crate) struct ChildJob {
    pub task_id: String,
    pub child: JobChild,
    /// Builds a planned child.
    pub runtime: Weak<SubagentRuntime>,
    pub prompt: String,
    /// The task's title (named in a worktree's commit message).
    pub description: String,
    pub run: Arc<RunContext>,
    pub cancel: CancellationToken,
    pub slot: Arc<Semaphore>,
    pub tracker: TaskTracker,
    pub forward: Arc<ForwardSink>,
    pub persist: Option<Persist>,
}

impl ChildJob {
    /// Build a planned child now that it has a slot, in `root` when it has its own
    /// worktree. A panic while building (in a factory, say) fails the task instead of
    /// leaving it pending forever.
    fn materialize(&self, root: Option<&std::path::Path>) -> Result<Child, String> {
        match &self.child {
            JobChild::Ready(c) => Ok(c.clone()),
            JobChild::Planned(plan) => match self.runtime.upgrade() {
                Some(rt) => {
                    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        rt.build_planned(plan, root)
                    }));
                    match built {
                        Ok(r) => r.map_err(|e| e.to_string()),
                        Err(_) => Err(format!(
                            "agent {}: building the sub-agent panicked",
                            plan.agent
                        )),
                    }
                }
                None => Err("the sub-agent runtime has shut down".to_string()),
            },
        }
    }

    /// End a task that never started: cancelled, or failed because its child could not be
    /// built.
    async fn end_unstarted(&self, failure: Option<String>) {
        let id = &self.task_id;
        let sid = self.child.session_id();
        let (status, end, text, kind) = match failure {
            None => {
                let _ = self.tracker.request_cancel(id);
                (
                    TaskStatus::Cancelled,
                    EndState::Cancelled,
                    "cancelled before it started".to_string(),
                    UpdateKind::Cancelled,
                )
            }
            Some(error) => (
                TaskStatus::Failed,
                EndState::Failed {
                    error: error.clone(),
                },
                error,
                UpdateKind::Error,
            ),
        };
        let error = match status {
            TaskStatus::Failed => Some(text.clone()),
            _ => cancel_reason(&self.runtime),
        };
        // As on the normal path: the end state and the store first, so whoever sees the
        // terminal status locally reads a complete, durable record.
        self.tracker.set_end_state(id, end.clone());
        if let Some(p) = &self.persist {
            p.finished(id, status, None, error.clone(), &end, Default::default())
                .await;
        }
        let _ = self.tracker.transition(id, status, None, error, None);
        self.forward.update(sid, kind, text, None, None);
    }

    pub(crate) async fn run(mut self) {
        // The RAII permit frees the slot however the run ends.
        let permit = tokio::select! {
            p = self.slot.clone().acquire_owned() => p.ok(),
            _ = self.cancel.cancelled() => None,
        };
        let Some(_permit) = permit else {
            self.end_unstarted(None).await;
            return;
        };
        if self.cancel.is_cancelled() {
            // The slot and the cancel came together: do not build a child for nothing.
            self.end_unstarted(None).await;
            return;
        }
        let worktree = match self.make_worktree().await {
            Ok(w) => w,
            Err(e) => {
                self.end_unstarted(Some(e)).await;
                return;
            }
        };
        let root = worktree.as_ref().map(Worktree::root);
        let child = match self.materialize(root.as_deref()) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(task = %self.task_id, error = %e, "the sub-agent could not be built");
                if let Some(w) = &worktree {
                    // Nothing ran in it: removed with its branch.
                    w.finish(None, "unused").await;
                }
                self.end_unstarted(Some(e)).await;
                return;
            }
        };
        // The built child replaces the plan: the job holds one copy of it.
        self.child = JobChild::Ready(child.clone());
        let mut run = self.run.clone();
        if run.model != child.model {
            // A factory may pick another model than the definition said.
            let mut r = (*run).clone();
            r.model = child.model.clone();
            run = Arc::new(r);
        }
        let id = &self.task_id;
        let sid = &child.session_id;
        let session = tokio::select! {
            s = child.session.lock() => Some(s),
            _ = self.cancel.cancelled() => None,
        };
        let started = match session {
            Some(session) => {
                let stored = match &self.persist {
                    Some(p) => p.running(id).await,
                    None => true,
                };
                let local = self
                    .tracker
                    .transition(id, TaskStatus::Running, None, None, None)
                    .is_ok();
                (stored && local).then_some(session)
            }
            None => None,
        };
        let Some(mut session) = started else {
            // Cancelled before it could start (here or, through the store, elsewhere).
            self.end_unstarted(None).await;
            return;
        };
        self.forward
            .update(sid, UpdateKind::Start, self.prompt.clone(), None, None);
        let outcome = match &child.runner {
            ChildRunner::Local { agent, workspace } => {
                agent
                    .run(
                        &mut session,
                        Some(self.prompt),
                        run,
                        workspace.clone(),
                        self.cancel,
                    )
                    .await
            }
            ChildRunner::Remote {
                spec,
                executor,
                context_id,
            } => {
                let context = context_id.lock().ok().and_then(|c| c.clone());
                let _ = session.push(Message::user(self.prompt.clone()));
                let request = RemoteRequest {
                    agent: child.name.clone(),
                    spec: spec.clone(),
                    prompt: self.prompt,
                    task_id: id.clone(),
                    session_id: sid.clone(),
                    context_id: context,
                    on_remote_id: self.persist.as_ref().map(|p| record_remote_id(p, id)),
                    approvals: RemoteApprovals(run.approvals.clone()),
                };
                let events = run.events.clone();
                // The remote run spends from the parent's budget: stopped when it runs out,
                // and charged with what it reports at its end.
                let stop = self.cancel.clone();
                let budget = run.budget.clone();
                let _watch = budget.is_limited().then(|| {
                    let (stop, budget) = (stop.clone(), budget.clone());
                    AbortOnDrop(tokio::spawn(async move {
                        budget.exhausted().await;
                        stop.cancel();
                    }))
                });
                let mut remote = executor.run(request, events.clone(), stop).await;
                budget.charge(Spend::tokens(remote.usage));
                if remote.state == EndState::Cancelled
                    && let Some(limit) = budget.exceeded()
                {
                    remote.state = EndState::LimitReached { limit };
                }
                if let (Some(c), Ok(mut slot)) = (remote.context_id.clone(), context_id.lock()) {
                    *slot = Some(c);
                }
                if !remote.output.is_empty() {
                    let _ = session.push(Message::assistant(remote.output.clone()));
                }
                // The local view of a remote run ends like a local one.
                events.emit(EventEnvelope {
                    session_id: sid.clone(),
                    agent: child.name.clone(),
                    task_id: Some(id.clone()),
                    event: Event::Done {
                        state: remote.state.clone(),
                        output: remote.output.clone(),
                        turns: 0,
                        usage: remote.usage,
                    },
                });
                RunOutcome {
                    state: remote.state,
                    output: remote.output,
                    turns: 0,
                    usage: remote.usage,
                }
            }
        };
        drop(session);
        let mut outcome = outcome;
        if let Some(w) = &worktree {
            let failure = match &outcome.state {
                EndState::Completed => None,
                EndState::Cancelled => Some("was cancelled"),
                EndState::Failed { .. } => Some("failed"),
                EndState::LimitReached { .. } => Some("stopped at a limit"),
            };
            let message = format!("cadre: {} task {id}\n\n{}", child.name, self.description);
            let report = w.finish(failure, &message).await.render();
            if !outcome.output.is_empty() {
                outcome.output.push_str("\n\n");
            }
            outcome.output.push_str(&report);
        }
        self.tracker.set_end_state(id, outcome.state.clone());
        let end = outcome.state.clone();
        let (status, error) = match outcome.state {
            EndState::Completed => (TaskStatus::Completed, None),
            EndState::Cancelled => (TaskStatus::Cancelled, cancel_reason(&self.runtime)),
            EndState::Failed { error } => (TaskStatus::Failed, Some(error)),
            EndState::LimitReached { limit } => (
                TaskStatus::Failed,
                Some(format!("limit reached ({limit}); the result is partial")),
            ),
        };
        let result = Some(outcome.output).filter(|r| !r.is_empty());
        let usage = Some(outcome.usage);
        // The store first: once the local state is terminal, waiters read results that
        // must already be durable.
        if let Some(p) = &self.persist {
            p.finished(
                id,
                status,
                result.clone(),
                error.clone(),
                &end,
                outcome.usage,
            )
            .await;
        }
        if let Err(e) = self
            .tracker
            .transition(id, status, result.clone(), error.clone(), usage)
        {
            // Cancel was requested while the child was finishing: it ends cancelled.
            tracing::debug!(error = %e, "terminal state raced with cancel");
            let _ = self
                .tracker
                .transition(id, TaskStatus::Cancelled, result, error, usage);
        }
    }
}

/// What a cancelled task records as its reason: why the process is shutting down, when
/// that is why (none for a cancel asked for by a user or a model).
fn cancel_reason(runtime: &Weak<SubagentRuntime>) -> Option<String> {
    runtime.upgrade().and_then(|rt| rt.shutdown_reason())
}

impl ChildJob {
    /// The worktree of a planned child with `isolation: worktree`, made now that it runs.
    async fn make_worktree(&self) -> Result<Option<Worktree>, String> {
        let JobChild::Planned(plan) = &self.child else {
            return Ok(None);
        };
        let Some(spec) = &plan.worktree else {
            return Ok(None);
        };
        Worktree::create(spec, &self.task_id, &plan.agent)
            .await
            .map(Some)
            .map_err(|e| format!("agent {}: {e}", plan.agent))
    }
}

/// A callback that records the remote task id in the store (in the background; a failed
/// write is only logged, the run goes on).
fn record_remote_id(persist: &Persist, task_id: &str) -> OnRemoteId {
    let store = persist.store.clone();
    let task_id = task_id.to_string();
    OnRemoteId::new(move |remote_id: &str| {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = store.clone();
        let task_id = task_id.clone();
        let remote_id = remote_id.to_string();
        rt.spawn(async move {
            if let Err(e) = store.set_remote_task_id(&task_id, &remote_id).await {
                tracing::warn!(task = %task_id, error = %e, "cannot record the remote task id");
            }
        });
    })
}

/// Aborts a helper task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
