//! The two time limits of a server: `tool_timeout_secs` ends a call that runs longer and
//! cancels it on the server (`notifications/cancelled`, seen by the Python SDK server's
//! handler); `startup_timeout_secs` fails a server that never completes the handshake, naming
//! the limit, and its process is ended.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_mcp::{McpServers, ServerEntry};
use common::*;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn one(name: &str, entry: ServerEntry, ws: &Path) -> McpServers {
    McpServers::from_entries(
        [(name.to_string(), entry, "test".to_string())],
        ws,
        &Default::default(),
    )
}

#[tokio::test]
async fn a_call_longer_than_tool_timeout_secs_fails_and_is_cancelled_on_the_server() {
    let Some(py) = python() else { return };
    let ws = tempfile::tempdir().unwrap();
    let marker = tempfile::tempdir().unwrap();
    let entry = ServerEntry {
        tool_timeout_secs: Some(1.0),
        ..stdio_entry(
            &py,
            &[
                &py_fixture().display().to_string(),
                &marker.path().display().to_string(),
            ],
        )
    };
    let servers = one("py", entry, ws.path());
    assert!(servers.start_all().await.is_empty());
    let tools = servers.tools();
    let get = |n: &str| tools.iter().find(|t| t.name() == n).unwrap().clone();
    let c = ctx(ws.path(), Arc::new(Collect::default()));
    let e = get("mcp__py__wait_forever")
        .call(json!({}), &c)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mcp__py__wait_forever: the call did not finish within 1 s (tool_timeout_secs)"),
        "{e}"
    );
    // The server's handler saw its call cancelled, and the server is still up.
    let out = get("mcp__py__cancelled").call(json!({}), &c).await.unwrap();
    assert_eq!(out.content, "cancelled");
    servers.stop_all().await;
}

#[tokio::test]
async fn a_server_silent_past_startup_timeout_secs_fails_naming_the_limit_and_is_ended() {
    let ws = tempfile::tempdir().unwrap();
    let pid_file = ws.path().join("pid");
    // It starts, but never answers `initialize`.
    let script = format!("echo $$ > '{}'; exec sleep 3600", pid_file.display());
    let entry = ServerEntry {
        startup_timeout_secs: Some(1.0),
        ..stdio_entry(Path::new("sh"), &["-c", &script])
    };
    let servers = one("mute", entry, ws.path());
    let failures = servers.start_all().await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].error.contains(
            "MCP server mute failed to start: did not start within 1 s (startup_timeout_secs)"
        ),
        "{}",
        failures[0]
    );
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let stat = format!("/proc/{}/stat", pid.trim());
    // Gone, or a zombie waiting to be reaped.
    cadre_testkit::eventually("the silent server to end", Duration::from_secs(30), || {
        let running = std::fs::read_to_string(&stat).is_ok_and(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        });
        async move { !running }
    })
    .await;
}
