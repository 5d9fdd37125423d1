//! Hooks around every tool call and at the points of a run's life. Before-hooks may allow,
//! deny, ask for approval or rewrite the arguments; after-hooks may rewrite the result.
//! Hooks run in registration order; the first deny stops the chain, rewritten arguments
//! are what later hooks see. A run also asks its hooks about the user's prompt before it
//! joins the conversation, whether the run may end when the model has finished, and
//! before each model call whether one of them asked for the run to stop; they may answer
//! an approval before anyone is asked, hear that one waits, and stop a compaction.

use async_trait::async_trait;
use cadre_tools::{RunContext, ToolOutput};
use cadre_types::{ApprovalDecision, ApprovalRequest, RiskLevel};

/// The call a hook is asked about.
#[derive(Debug, Clone)]
pub struct ToolCallInfo {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub tool: String,
    /// The parsed arguments (after earlier hooks' rewrites).
    pub args: serde_json::Value,
}

/// A before-hook's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum HookDecision {
    /// No objection.
    Allow,
    /// Refuse the call; the reason goes to the model.
    Deny(String),
    /// Require a human decision.
    Ask {
        /// Why.
        reason: String,
        /// How risky.
        risk: RiskLevel,
    },
    /// Run with these arguments instead.
    ModifyArgs(serde_json::Value),
    /// No objection, and no approval needed (with these arguments instead, if given): the
    /// permission policy's *ask* is skipped, unless another hook asks. The policy's deny
    /// rules and refused paths still apply.
    Approve(Option<serde_json::Value>),
}

/// What hooks say about a prompt about to join the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptVerdict {
    /// Go on; each text is appended to the conversation after the prompt, so the bytes of
    /// the request before it do not change.
    Proceed(Vec<String>),
    /// Do not send the prompt; the run ends failed with this reason.
    Block(String),
}

/// A hook around tool calls. Both methods default to doing nothing.
#[async_trait]
pub trait ToolHook: Send + Sync {
    /// Called before the call runs (and before the permission policy).
    async fn before(&self, _call: &ToolCallInfo, _run: &RunContext) -> HookDecision {
        HookDecision::Allow
    }

    /// Called after the call ran; return `Some` to replace the result.
    async fn after(
        &self,
        _call: &ToolCallInfo,
        _output: &ToolOutput,
        _run: &RunContext,
    ) -> Option<ToolOutput> {
        None
    }

    /// Called before the user's `prompt` joins the conversation.
    async fn prompt_submitted(&self, _prompt: &str, _run: &RunContext) -> PromptVerdict {
        PromptVerdict::Proceed(Vec::new())
    }

    /// Called when the model has answered without tool calls and nothing else holds the
    /// run open. `Some(reason)` gives the model another turn with `reason` as its next
    /// instruction; `active` is true when a hook already did that in this run, so a hook
    /// can avoid holding the run open for ever.
    async fn stopping(
        &self,
        _last_reply: &str,
        _active: bool,
        _run: &RunContext,
    ) -> Option<String> {
        None
    }

    /// Checked before each model call: `Some(reason)` ends the run, cancelled, because a
    /// hook asked for it to stop.
    fn halt(&self, _run: &RunContext) -> Option<String> {
        None
    }

    /// Called when a call is about to wait for an approval (the permission policy asked,
    /// nothing denied it), before any approval handler or policy answers. `Some` answers
    /// the request: nobody is asked. Deny rules and protected paths were applied before,
    /// so an answer here can never let through what they refuse.
    async fn permission_request(
        &self,
        _request: &ApprovalRequest,
        _run: &RunContext,
    ) -> Option<ApprovalDecision> {
        None
    }

    /// Called when the user is told something waits for them (`kind`: `permission_prompt`
    /// when an approval is asked). It runs while the question waits and decides nothing.
    async fn notification(&self, _kind: &str, _message: &str, _run: &RunContext) {}

    /// Called before the conversation is compacted (`manual`: asked for by the user, with
    /// `instructions`). `Some(reason)` stops this compaction.
    async fn pre_compact(
        &self,
        _manual: bool,
        _instructions: Option<&str>,
        _run: &RunContext,
    ) -> Option<String> {
        None
    }
}
