//! The call-time guard for network tools: an agent sandboxed without the network cannot run
//! a tool that reaches it, even when its registry offers one (a registry built without
//! withholding them, by mistake or on purpose).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_sandbox::{Launcher, Sandbox, SandboxMode, SandboxPolicy, SandboxSpec};
use cadre_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, Workspace};
use cadre_types::{EndState, Message, ToolDefinition};
use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A tool that says it reaches the network and counts its calls.
struct Fetch {
    calls: AtomicUsize,
}

#[async_trait]
impl Tool for Fetch {
    fn name(&self) -> &str {
        "fetch"
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "fetch".into(),
            description: "fetches".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn uses_network(&self) -> bool {
        true
    }
    async fn call(
        &self,
        _args: serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::ok("fetched"))
    }
}

/// Runs one call of `fetch` in a workspace sandboxed by `spec`; returns how often the tool
/// ran and what the model was told.
async fn fetch_under(spec: SandboxSpec) -> (usize, String, bool) {
    let (model, _rec) = scripted(
        r#"
        [[turns]]
        tool_calls = [{ name = "fetch", args = {} }]
        [[turns]]
        text = "{{tool_results}}"
        "#,
    );
    let tool = Arc::new(Fetch {
        calls: AtomicUsize::new(0),
    });
    let agent = builder(model)
        .tools(ToolRegistry::new().with(tool.clone()))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let policy = SandboxPolicy::resolve(&spec, h.dir.path());
    let sandbox = Arc::new(Sandbox::new(Arc::new(Launcher::new(None)), policy));
    let ws = Arc::new(
        Workspace::new(h.dir.path())
            .unwrap()
            .with_sandbox(Some(sandbox)),
    );
    let run = h.run_context(&session);
    let out = agent
        .run(&mut session, Some("go".into()), run, ws, h.cancel.clone())
        .await;
    assert_eq!(out.state, EndState::Completed);
    let (content, is_error) = session
        .messages()
        .iter()
        .find_map(|m| match m {
            Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap();
    (tool.calls.load(Ordering::SeqCst), content, is_error)
}

#[tokio::test]
async fn a_network_tool_is_refused_at_call_time_in_a_sandbox_without_the_network() {
    let (calls, content, is_error) =
        fetch_under(SandboxSpec::mode(SandboxMode::WorkspaceWrite)).await;
    assert_eq!(calls, 0, "the tool never ran");
    assert!(is_error, "{content}");
    assert!(content.contains("fetch"), "{content}");
    assert!(content.contains("workspace-write"), "{content}");
}

#[tokio::test]
async fn the_same_call_runs_when_the_sandbox_allows_the_network_or_is_off() {
    let with_network = SandboxSpec {
        network: true,
        ..SandboxSpec::mode(SandboxMode::WorkspaceWrite)
    };
    for spec in [with_network, SandboxSpec::mode(SandboxMode::Off)] {
        let (calls, content, is_error) = fetch_under(spec).await;
        assert_eq!((calls, content.as_str(), is_error), (1, "fetched", false));
    }
}
