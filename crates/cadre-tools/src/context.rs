//! The context every tool call receives: where it runs, how to cancel it, and the
//! cross-cutting channels of its run (events, approvals, ids). Carried explicitly, never global.

use crate::{Budget, HiddenPaths, ToolGrant, ToolRegistry, Workspace};
use async_trait::async_trait;
use cadre_types::{ApprovalDecision, ApprovalRequest, EventSink};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Whoever answers approval requests: a terminal prompt, a policy, or a parent agent's channel.
#[async_trait]
pub trait ApprovalHandler: Send + Sync {
    /// Decide on one request. May wait for a human.
    async fn decide(&self, request: ApprovalRequest) -> ApprovalDecision;

    /// The answer a fixed policy gives `request` without asking anyone, if it has one.
    /// A call answered here never announces an `approval_required` event: nobody is asked,
    /// and the refusal goes straight back to the model.
    fn policy_answer(&self, _request: &ApprovalRequest) -> Option<ApprovalDecision> {
        None
    }
}

/// Facts and channels of one agent run, shared by all its tool calls.
#[derive(Clone)]
pub struct RunContext {
    /// The run's session id.
    pub session_id: String,
    /// The agent's name (`main` for the top level).
    pub agent: String,
    /// The model spec the run uses (`openai:gpt-4o`), so children can inherit it.
    pub model: String,
    /// The background task this run is, if any.
    pub task_id: Option<String>,
    /// The user on whose behalf the run acts, if known.
    pub user_id: Option<String>,
    /// The delegating parent's session id, for sub-agents.
    pub parent_session_id: Option<String>,
    /// Spawn depth: 0 for the top-level agent.
    pub depth: u32,
    /// The tools the run may call (checked on every call, whatever its registry offers).
    pub tool_grant: ToolGrant,
    /// The budget the run spends from. Its creator passes the node of whoever it runs for
    /// ([`Budget::unlimited`] at the top); the engine runs it in a child node with the
    /// agent's own limits and hands that node to the tools it calls.
    pub budget: Budget,
    /// Trace id shared by a parent and all its descendants.
    pub trace_id: String,
    /// Where the run's events go.
    pub events: Arc<dyn EventSink>,
    /// Who answers approval requests for this run.
    pub approvals: Arc<dyn ApprovalHandler>,
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("session_id", &self.session_id)
            .field("agent", &self.agent)
            .field("task_id", &self.task_id)
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

/// What one tool call receives.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The call id the model gave.
    pub call_id: String,
    /// The root the call is confined to.
    pub workspace: Arc<Workspace>,
    /// Cancelled when the run (or this call) is cancelled.
    pub cancel: CancellationToken,
    /// The run this call belongs to.
    pub run: Arc<RunContext>,
    /// The tools the calling agent can call (its registry, within its grant): a tool that
    /// starts another agent narrows that agent's tools from these.
    pub tools: Arc<ToolRegistry>,
    /// Paths reading tools leave out of what they print (set from the agent's deny rules).
    pub hidden: Arc<HiddenPaths>,
}
