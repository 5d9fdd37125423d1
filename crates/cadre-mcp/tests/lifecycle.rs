//! When servers start, against `server-everything`: a lazy server (the default) whose tools
//! cadre saw in an earlier session is offered from them and starts on its first call;
//! `startup = "eager"` starts with the session; a lazy server that cannot start answers with
//! a tool error naming it, warns the calling run, and is started again on the next call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_mcp::{McpServers, ServerEntry, ServerState};
use common::*;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

fn servers(ws: &Path, entry: ServerEntry) -> McpServers {
    McpServers::from_entries(
        [("everything".to_string(), entry, "test".to_string())],
        ws,
        &Default::default(),
    )
}

/// A first session: cadre has not seen the server's tools, so it starts with the session.
async fn first_session(ws: &Path, entry: &ServerEntry) {
    let s = servers(ws, entry.clone());
    let failures = s.start_session().await;
    assert!(failures.is_empty(), "{failures:?}");
    assert!(
        s.get("everything").unwrap().pid().await.is_some(),
        "a server whose tools are unknown starts with the session"
    );
    s.stop_all().await;
}

/// Call `mcp__everything__echo` as the model would; the events go to `events`.
async fn echo(servers: &McpServers, ws: &Path, events: Arc<Collect>) -> Result<String, String> {
    let tool = servers
        .tools()
        .into_iter()
        .find(|t| t.name() == "mcp__everything__echo")
        .expect("echo is offered");
    match tool
        .call(json!({"message": "ping"}), &ctx(ws, events))
        .await
    {
        Ok(out) if !out.is_error => Ok(out.content),
        Ok(out) => Err(out.content),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test]
async fn a_lazy_server_is_offered_from_the_tools_it_listed_before_and_starts_on_its_first_call() {
    let Some(index) = everything() else { return };
    let ws = tempfile::tempdir().unwrap();
    let entry = everything_stdio(&index).1;
    first_session(ws.path(), &entry).await;

    let s = servers(ws.path(), entry);
    assert!(s.start_session().await.is_empty());
    let server = s.get("everything").unwrap();
    assert_eq!(server.pid().await, None, "not started with the session");
    assert_eq!(server.state().await, ServerState::Idle);
    let names: Vec<String> = s.tools().iter().map(|t| t.name().to_string()).collect();
    for expected in ["mcp__everything__echo", "mcp__everything__get-sum"] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    let said = echo(&s, ws.path(), Arc::default()).await.unwrap();
    assert!(said.contains("ping"), "{said}");
    assert!(server.pid().await.is_some(), "started by the call");
    assert_eq!(server.state().await, ServerState::Running);
    s.stop_all().await;
}

#[tokio::test]
async fn an_eager_server_starts_with_the_session_even_when_its_tools_are_known() {
    let Some(index) = everything() else { return };
    let ws = tempfile::tempdir().unwrap();
    let entry = ServerEntry {
        startup: Some("eager".into()),
        ..everything_stdio(&index).1
    };
    first_session(ws.path(), &entry).await;
    let s = servers(ws.path(), entry);
    assert!(s.start_session().await.is_empty());
    let server = s.get("everything").unwrap();
    assert!(server.pid().await.is_some());
    assert_eq!(server.state().await, ServerState::Running);
    s.stop_all().await;
}

#[tokio::test]
async fn a_lazy_server_that_cannot_start_is_a_tool_error_and_a_warning_naming_it_then_started_again()
 {
    let Some(index) = everything() else { return };
    let ws = tempfile::tempdir().unwrap();
    // The server is reached through a launcher script, which the test takes away and puts back.
    let launcher = ws.path().join("launch-everything.mjs");
    let script = format!("await import({:?});\n", index.display().to_string());
    std::fs::write(&launcher, &script).unwrap();
    let entry = stdio_entry(
        Path::new("node"),
        &[&launcher.display().to_string(), "stdio"],
    );
    first_session(ws.path(), &entry).await;

    std::fs::remove_file(&launcher).unwrap();
    let s = servers(ws.path(), entry);
    assert!(
        s.start_session().await.is_empty(),
        "lazy: nothing starts yet"
    );
    let events = Arc::new(Collect::default());
    let error = echo(&s, ws.path(), events.clone()).await.unwrap_err();
    assert!(
        error.contains("mcp__everything__echo: MCP server everything failed to start"),
        "{error}"
    );
    let notices = events.notices();
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("warning: MCP server everything failed to start")),
        "{notices:?}"
    );
    assert!(matches!(
        s.get("everything").unwrap().state().await,
        ServerState::Failed { retry: true, .. }
    ));

    std::fs::write(&launcher, &script).unwrap();
    let said = echo(&s, ws.path(), Arc::default()).await.unwrap();
    assert!(
        said.contains("ping"),
        "the next call started it again: {said}"
    );
    s.stop_all().await;
}
