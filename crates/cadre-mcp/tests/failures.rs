//! Failures and cancellation, against a server built with the official Python SDK
//! (`tests/fixtures/py_server.py`): a server that crashes mid-call gives a clear tool error,
//! the run goes on and the next call starts it again; a server that never starts is a
//! failure naming it; cancelling the calling child sends `notifications/cancelled` (the
//! server's handler sees its call cancelled). And an HTTP server that redirects to another
//! host (a plain local web server) is not followed there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_mcp::{McpServers, ServerEntry, ServerState};
use cadre_subagents::{AgentDefinition, RunOptions};
use cadre_types::{EndState, Event};
use common::*;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

fn py_servers(py: &Path, marker: &Path, ws: &Path) -> McpServers {
    let entry = stdio_entry(
        py,
        &[
            &py_fixture().display().to_string(),
            &marker.display().to_string(),
        ],
    );
    McpServers::from_entries(
        [("py".to_string(), entry, "test".to_string())],
        ws,
        &Default::default(),
    )
}

#[tokio::test]
async fn a_crash_mid_call_is_a_tool_error_the_run_continues_and_the_next_call_restarts_it() {
    let Some(py) = python() else { return };
    let ws = tempfile::tempdir().unwrap();
    let marker = tempfile::tempdir().unwrap();
    let servers = py_servers(&py, marker.path(), ws.path());
    let model = Recording::new(
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "mcp__py__crash", args = {} }]
[[scripts.turns]]
tool_calls = [{ name = "mcp__py__hello", args = { name = "again" } }]
[[scripts.turns]]
text = "after: {{tool_results}}"
"#,
    );
    let h = harness(ws.path(), &servers, model.clone(), Vec::new()).await;
    let out = h.run("go").await.unwrap();
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert_eq!(out.output, "after: hello again");
    let crash = model.of("main")[1]
        .messages
        .iter()
        .find_map(|m| match m {
            cadre_types::Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap();
    assert!(crash.1, "{crash:?}");
    assert!(
        crash.0.contains("MCP server py exited")
            && crash.0.contains("starts it again on the next call"),
        "{}",
        crash.0
    );
    let starts = std::fs::read_to_string(marker.path().join("starts")).unwrap();
    assert_eq!(starts.lines().count(), 2, "{starts}");
    servers.stop_all().await;
}

#[tokio::test]
async fn a_server_that_never_starts_is_a_failure_naming_it_and_gets_one_more_try() {
    let ws = tempfile::tempdir().unwrap();
    let entry = ServerEntry {
        command: Some("/nonexistent/cadre-test-mcp-server".into()),
        ..ServerEntry::default()
    };
    let servers = McpServers::from_entries(
        [("ghost".to_string(), entry, "test".to_string())],
        ws.path(),
        &Default::default(),
    );
    let failures = servers.start_all().await;
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].server, "ghost");
    assert!(
        failures[0]
            .to_string()
            .starts_with("MCP server ghost failed to start: cannot start"),
        "{}",
        failures[0]
    );
    assert!(servers.tools().is_empty());
    let ghost = servers.get("ghost").unwrap();
    assert!(matches!(
        ghost.state().await,
        ServerState::Failed { retry: true, .. }
    ));
    // The retry is used up by the next start; after that it stays failed.
    assert!(ghost.start().await.is_err());
    assert!(matches!(
        ghost.state().await,
        ServerState::Failed { retry: false, .. }
    ));
    let e = ghost.start().await.unwrap_err().to_string();
    assert!(e.contains("is not available"), "{e}");
}

#[tokio::test]
async fn cancelling_the_calling_child_cancels_the_call_on_the_server() {
    let Some(py) = python() else { return };
    let ws = tempfile::tempdir().unwrap();
    let marker = tempfile::tempdir().unwrap();
    let servers = py_servers(&py, marker.path(), ws.path());
    let model = Recording::new(
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "worker", description = "wait", prompt = "wait" } }]
[[scripts.turns]]
text = "unreachable"
[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "mcp__py__wait_forever", args = {} }]
[[scripts.turns]]
text = "unreachable"
"#,
    );
    let mut worker = AgentDefinition::new("worker", "Waits.");
    worker.prompt = "You wait.".into();
    let h = harness(ws.path(), &servers, model, vec![worker]).await;
    let events = Arc::new(Collect::default());
    let cancel = CancellationToken::new();
    let mut session = h.new_session().unwrap();
    let run = h.run_in(
        &mut session,
        "go",
        RunOptions {
            events: events.clone(),
            approvals: Arc::new(AllowAll),
            cancel: cancel.clone(),
            user_id: None,
        },
    );
    let canceller = async {
        events
            .wait_for("the server's progress", |evs| {
                evs.iter().any(|e| {
                    matches!(&e.event, Event::Notice { message } if message.contains("mcp__py__wait_forever: progress 1/2: waiting"))
                })
            })
            .await;
        cancel.cancel();
    };
    let (out, ()) = tokio::join!(run, canceller);
    assert_eq!(out.state, EndState::Cancelled, "{out:?}");
    // The server saw the call cancelled, and is still up: a cancelled call is not a crash.
    let tools = servers.tools();
    let cancelled = tools
        .iter()
        .find(|t| t.name() == "mcp__py__cancelled")
        .unwrap();
    let c = ctx(ws.path(), events.clone());
    let out = cancelled.call(json!({}), &c).await.unwrap();
    assert_eq!(out.content, "cancelled");
    servers.stop_all().await;
}

/// A server over HTTP that redirects to another host is not followed there: its configured
/// headers stay with the host they were meant for.
#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed() {
    use cadre_testkit::{WebPage, WebServer};
    let elsewhere = WebServer::start().await.unwrap();
    let front = WebServer::start().await.unwrap();
    front.page(
        "/mcp",
        WebPage::redirect(&elsewhere.url("/mcp")).status(307),
    );
    let ws = tempfile::tempdir().unwrap();
    let entry = ServerEntry {
        url: Some(front.url("/mcp")),
        headers: [("X-Api-Key".to_string(), "key-for-front-only".to_string())].into(),
        ..ServerEntry::default()
    };
    let servers = McpServers::from_entries(
        [("moved".to_string(), entry, "test".to_string())],
        ws.path(),
        &Default::default(),
    );
    let failures = servers.start_all().await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        elsewhere.requests().is_empty(),
        "the other host was sent {:?}",
        elsewhere.requests()
    );
    assert!(!front.requests().is_empty());
    assert!(
        front
            .requests()
            .iter()
            .all(|r| r.header("x-api-key") == Some("key-for-front-only"))
    );
}
