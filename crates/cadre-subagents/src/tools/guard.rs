//! The call-time guard: an independent second layer that refuses delegation tools to a run
//! that may not delegate, even if a registry was built wrongly and offers them.

use crate::DELEGATION_TOOLS;
use async_trait::async_trait;
use cadre_engine::{HookDecision, ToolCallInfo, ToolHook};
use cadre_tools::RunContext;

/// Denies delegation tool calls from leaves and from runs at the depth cap.
#[derive(Debug, Clone, Copy)]
pub struct DelegationGuard {
    may_delegate: bool,
    max_depth: u32,
}

impl DelegationGuard {
    /// A guard for a run that may (`true`) or may not delegate, under a depth cap.
    pub fn new(may_delegate: bool, max_depth: u32) -> Self {
        Self {
            may_delegate,
            max_depth,
        }
    }
}

#[async_trait]
impl ToolHook for DelegationGuard {
    async fn before(&self, call: &ToolCallInfo, run: &RunContext) -> HookDecision {
        if !DELEGATION_TOOLS.contains(&call.tool.as_str()) {
            return HookDecision::Allow;
        }
        if !self.may_delegate {
            return HookDecision::Deny(format!(
                "{} is not available: {} is a leaf sub-agent and cannot delegate",
                call.tool, run.agent
            ));
        }
        if run.depth >= self.max_depth {
            return HookDecision::Deny(format!(
                "maximum spawn depth exceeded (max={})",
                self.max_depth
            ));
        }
        HookDecision::Allow
    }
}
