//! One task of a child: wait for a concurrency slot, run the child's agent on its session,
//! and record the honest end state in the tracker.

use crate::forward::ForwardSink;
use crate::runtime::Child;
use crate::tracker::{TaskStatus, TaskTracker};
use cadre_tools::RunContext;
use cadre_types::{EndState, UpdateKind};
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub(crate) struct ChildJob {
    pub task_id: String,
    pub child: Child,
    pub prompt: String,
    pub run: Arc<RunContext>,
    pub cancel: CancellationToken,
    pub slot: Arc<Semaphore>,
    pub tracker: TaskTracker,
    pub forward: Arc<ForwardSink>,
}

impl ChildJob {
    pub(crate) async fn run(self) {
        let id = &self.task_id;
        let sid = &self.child.session_id;
        // The RAII permit frees the slot however the run ends.
        let permit = tokio::select! {
            p = self.slot.clone().acquire_owned() => p.ok(),
            _ = self.cancel.cancelled() => None,
        };
        let session = match permit {
            Some(_) => tokio::select! {
                s = self.child.session.lock() => Some(s),
                _ = self.cancel.cancelled() => None,
            },
            None => None,
        };
        let Some(mut session) = session else {
            let _ = self
                .tracker
                .transition(id, TaskStatus::Cancelled, None, None, None);
            self.tracker.set_end_state(id, EndState::Cancelled);
            self.forward.update(
                sid,
                UpdateKind::Cancelled,
                "cancelled before it started".into(),
                None,
                None,
            );
            return;
        };
        if self
            .tracker
            .transition(id, TaskStatus::Running, None, None, None)
            .is_err()
        {
            let _ = self
                .tracker
                .transition(id, TaskStatus::Cancelled, None, None, None);
            self.tracker.set_end_state(id, EndState::Cancelled);
            return;
        }
        self.forward
            .update(sid, UpdateKind::Start, self.prompt.clone(), None, None);
        let outcome = self
            .child
            .agent
            .run(
                &mut session,
                Some(self.prompt),
                self.run,
                self.child.workspace.clone(),
                self.cancel,
            )
            .await;
        drop(session);
        self.tracker.set_end_state(id, outcome.state.clone());
        let (status, error) = match outcome.state {
            EndState::Completed => (TaskStatus::Completed, None),
            EndState::Cancelled => (TaskStatus::Cancelled, None),
            EndState::Failed { error } => (TaskStatus::Failed, Some(error)),
            EndState::LimitReached { limit } => (
                TaskStatus::Failed,
                Some(format!("limit reached ({limit}); the result is partial")),
            ),
        };
        let result = Some(outcome.output).filter(|r| !r.is_empty());
        let usage = Some(outcome.usage);
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
