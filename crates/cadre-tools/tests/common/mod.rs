//! Fixtures for the file-tool tests: a tool context over a real directory.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use cadre_tools::builtin::builtin_tools;
use cadre_tools::{
    ApprovalHandler, RunContext, ToolContext, ToolError, ToolOutput, ToolRegistry, Workspace,
};
use cadre_types::{ApprovalDecision, ApprovalRequest, NullSink};
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

struct AllowAll;

#[async_trait]
impl ApprovalHandler for AllowAll {
    async fn decide(&self, _request: ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::AllowOnce
    }
}

/// A context confined to `workspace`, in session `s-test`.
pub fn ctx(workspace: Workspace) -> ToolContext {
    ToolContext {
        hidden: Default::default(),
        call_id: "call-1".into(),
        workspace: Arc::new(workspace),
        cancel: CancellationToken::new(),
        run: Arc::new(RunContext {
            session_id: "s-test".into(),
            agent: "main".into(),
            model: "scripted:test".into(),
            task_id: None,
            user_id: None,
            parent_session_id: None,
            depth: 0,
            tool_grant: cadre_tools::ToolGrant::unrestricted(),
            budget: cadre_tools::Budget::unlimited(),
            trace_id: "trace-test".into(),
            events: Arc::new(NullSink),
            approvals: Arc::new(AllowAll),
        }),
        tools: Arc::new(cadre_tools::ToolRegistry::new()),
    }
}

/// The built-in tools and a context confined to `root`.
pub struct Tools {
    pub registry: ToolRegistry,
    pub ctx: ToolContext,
}

impl Tools {
    pub fn new(root: &Path) -> Self {
        Self::with(Workspace::new(root).unwrap())
    }

    pub fn with(workspace: Workspace) -> Self {
        Self {
            registry: builtin_tools(),
            ctx: ctx(workspace),
        }
    }

    pub async fn call(&self, tool: &str, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
        self.registry.get(tool).unwrap().call(args, &self.ctx).await
    }
}
