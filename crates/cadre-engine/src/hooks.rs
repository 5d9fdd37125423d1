//! Hooks around every tool call. Before-hooks may allow, deny, ask for approval or rewrite
//! the arguments; after-hooks may rewrite the result. Hooks run in registration order;
//! the first deny stops the chain, rewritten arguments are what later hooks see.

use async_trait::async_trait;
use cadre_tools::{RunContext, ToolOutput};
use cadre_types::RiskLevel;

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
}
