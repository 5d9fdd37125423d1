//! Helpers for unit tests: a [`ToolContext`] over a temporary workspace.

use crate::{ApprovalHandler, RunContext, ToolContext, ToolGrant, ToolRegistry, Workspace};
use async_trait::async_trait;
use cadre_types::{ApprovalDecision, ApprovalRequest, NullSink};
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Approves everything.
pub(crate) struct AllowAll;

#[async_trait]
impl ApprovalHandler for AllowAll {
    async fn decide(&self, _request: ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::AllowOnce
    }
}

/// A context confined to `root`, with a fresh cancellation token.
pub(crate) fn ctx(root: &Path) -> ToolContext {
    ToolContext {
        call_id: "call-1".into(),
        workspace: Arc::new(Workspace::new(root).unwrap()),
        cancel: CancellationToken::new(),
        run: Arc::new(RunContext {
            session_id: "s-test".into(),
            agent: "main".into(),
            model: "scripted:test".into(),
            task_id: None,
            user_id: None,
            parent_session_id: None,
            depth: 0,
            tool_grant: ToolGrant::unrestricted(),
            budget: crate::Budget::unlimited(),
            trace_id: "trace-test".into(),
            events: Arc::new(NullSink),
            approvals: Arc::new(AllowAll),
        }),
        tools: Arc::new(ToolRegistry::new()),
        hidden: Arc::default(),
    }
}

/// A context confined to `root` whose reading tools hide what `patterns` match.
pub(crate) fn ctx_hiding(root: &Path, patterns: &[&str]) -> ToolContext {
    let patterns: Vec<String> = patterns
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    ToolContext {
        hidden: Arc::new(crate::HiddenPaths::new(&patterns).unwrap()),
        ..ctx(root)
    }
}

/// A temporary directory with the given files (`path`, `content`) written into it.
pub(crate) fn tree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let p = dir.path().join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(p, content).unwrap();
    }
    dir
}
