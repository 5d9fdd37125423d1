//! The seam for remote sub-agents: a definition with a `url` runs through a
//! [`RemoteExecutor`] (implemented by the remote layer for A2A and the task protocol) instead
//! of a local engine. Everything else — tasks, tracking, delivery, cancellation — is the same.

use crate::definitions::definition::RemoteSpec;
use async_trait::async_trait;
use cadre_tools::ApprovalHandler;
use cadre_types::{EndState, EventSink, Usage};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// One job for a remote agent.
#[derive(Debug, Clone)]
pub struct RemoteRequest {
    /// The definition's name.
    pub agent: String,
    /// Where and how to reach it.
    pub spec: RemoteSpec,
    /// The task message.
    pub prompt: String,
    /// The local task id (for correlation and as the remote task id where the protocol lets
    /// the caller choose it).
    pub task_id: String,
    /// The local child session id; events the executor emits carry it.
    pub session_id: String,
    /// The remote conversation to continue (set after the first exchange of a live child).
    pub context_id: Option<String>,
    /// Told the remote task id as soon as the remote has accepted or named the task (at most
    /// once per run), so it can be recorded while the task runs.
    pub on_remote_id: Option<OnRemoteId>,
    /// Answers the approval requests the remote agent sends back: the child's own approval
    /// channel (its parent's, or the background policy), as for a local child.
    pub approvals: RemoteApprovals,
}

/// The approval channel of a remote run (see [`RemoteRequest::approvals`]).
#[derive(Clone)]
pub struct RemoteApprovals(pub Arc<dyn ApprovalHandler>);

impl std::fmt::Debug for RemoteApprovals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RemoteApprovals(..)")
    }
}

/// A callback told the remote task id of a run (see [`RemoteRequest::on_remote_id`]).
#[derive(Clone)]
pub struct OnRemoteId(pub Arc<dyn Fn(&str) + Send + Sync>);

impl OnRemoteId {
    /// Wrap a callback.
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Call it with the remote task id.
    pub fn call(&self, remote_task_id: &str) {
        (self.0)(remote_task_id);
    }
}

impl std::fmt::Debug for OnRemoteId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnRemoteId(..)")
    }
}

/// How a remote job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOutcome {
    /// The end state, mapped from the remote task state.
    pub state: EndState,
    /// The answer (or partial output).
    pub output: String,
    /// Tokens the remote reported, if any.
    pub usage: Usage,
    /// The remote task id.
    pub remote_task_id: Option<String>,
    /// The remote conversation id, to continue it later.
    pub context_id: Option<String>,
}

/// Runs sub-agents on other nodes.
#[async_trait]
pub trait RemoteExecutor: Send + Sync {
    /// Run `request` remotely. Progress goes to `events` as ordinary engine events
    /// (text deltas, tool starts, ...); when `cancel` fires the remote task must be
    /// cancelled too. Failures are returned as an outcome, never panics.
    async fn run(
        &self,
        request: RemoteRequest,
        events: Arc<dyn EventSink>,
        cancel: CancellationToken,
    ) -> RemoteOutcome;
}
