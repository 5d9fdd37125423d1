//! cadre's MCP client against the reference server `@modelcontextprotocol/server-everything`,
//! over stdio and streamable HTTP: its tools become cadre tools with the right names, schemas
//! and read-only flags; `echo`, an image and structured content come back as the model
//! reads them; a long-running tool's progress reaches the calling child's parent as
//! updates; and a sub-agent allowed only `mcp__everything__echo` is offered exactly that.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_mcp::{McpServers, ServerEntry};
use cadre_subagents::AgentDefinition;
use cadre_types::{EndState, Event};
use common::*;
use serde_json::json;
use std::sync::Arc;

async fn check_tools_and_calls(servers: &McpServers) {
    let failures = servers.start_all().await;
    assert!(failures.is_empty(), "{failures:?}");
    let tools = servers.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    for expected in [
        "mcp__everything__echo",
        "mcp__everything__get-tiny-image",
        "mcp__everything__get-structured-content",
        "mcp__everything__trigger-long-running-operation",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let get = |n: &str| tools.iter().find(|t| t.name() == n).unwrap().clone();
    let echo = get("mcp__everything__echo");
    let def = echo.definition();
    assert_eq!(def.parameters["type"], "object");
    assert!(
        def.parameters["properties"]["message"].is_object(),
        "{def:?}"
    );
    assert!(def.description.contains("MCP server everything"), "{def:?}");
    // The server marks echo readOnlyHint: it runs without approval in the default mode.
    assert!(echo.is_read_only());
    // Every tool of a server says it is an MCP tool (never builtin or delegation).
    for t in &tools {
        assert_eq!(t.kind(), cadre_tools::ToolKind::Mcp, "{}", t.name());
    }

    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), Arc::new(Collect::default()));
    let out = echo.call(json!({"message": "hi there"}), &c).await.unwrap();
    assert!(!out.is_error);
    assert!(out.content.contains("hi there"), "{out:?}");

    let out = get("mcp__everything__get-tiny-image")
        .call(json!({}), &c)
        .await
        .unwrap();
    assert!(out.content.contains("[image image/png"), "{}", out.content);
    // The image also goes with the result, for providers that show it to the model.
    assert_eq!(out.images.len(), 1, "{out:?}");
    assert_eq!(out.images[0].media_type, "image/png");
    let saved = std::fs::read_dir(dir.path().join(cadre_mcp::MEDIA_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "png"))
        .expect("the image was saved");
    assert!(out.content.contains(&saved.display().to_string()));
    assert_eq!(&std::fs::read(&saved).unwrap()[1..4], b"PNG");

    let out = get("mcp__everything__get-structured-content")
        .call(json!({"location": "New York"}), &c)
        .await
        .unwrap();
    assert!(!out.is_error);
    assert!(out.content.contains("temperature"), "{}", out.content);

    let out = echo.call(json!({"message": 5}), &c).await;
    let text = match out {
        Ok(o) => {
            assert!(o.is_error, "{o:?}");
            o.content
        }
        Err(e) => e.to_string(),
    };
    assert!(text.contains("message"), "{text}");
    servers.stop_all().await;
}

#[tokio::test]
async fn stdio_tools_echo_image_and_structured_content() {
    let Some(index) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let servers =
        McpServers::from_entries([everything_stdio(&index)], dir.path(), &Default::default());
    check_tools_and_calls(&servers).await;
}

#[tokio::test]
async fn http_tools_echo_image_and_structured_content() {
    let Some(index) = everything() else { return };
    let server = http_everything(&index);
    let dir = tempfile::tempdir().unwrap();
    let entry = ServerEntry {
        url: Some(server.url.clone()),
        ..ServerEntry::default()
    };
    let servers = McpServers::from_entries(
        [("everything".to_string(), entry, "test".to_string())],
        dir.path(),
        &Default::default(),
    );
    check_tools_and_calls(&servers).await;
}

const DELEGATE: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "worker", description = "work", prompt = "go" } }]
[[scripts.turns]]
text = "main done: {{tool_results}}"
"#;

/// The everything server over streamable HTTP (it runs while the guard lives).
fn everything_http(index: &std::path::Path, ws: &std::path::Path) -> (HttpEverything, McpServers) {
    let server = http_everything(index);
    let entry = ServerEntry {
        url: Some(server.url.clone()),
        ..ServerEntry::default()
    };
    let servers = McpServers::from_entries(
        [("everything".to_string(), entry, "test".to_string())],
        ws,
        &Default::default(),
    );
    (server, servers)
}

#[tokio::test]
async fn progress_of_a_long_call_reaches_the_parent_as_updates_of_the_child() {
    let Some(index) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let servers =
        McpServers::from_entries([everything_stdio(&index)], dir.path(), &Default::default());
    check_progress(dir.path(), servers).await;
}

#[tokio::test]
async fn progress_over_http_reaches_the_parent_as_updates_of_the_child() {
    let Some(index) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_server, servers) = everything_http(&index, dir.path());
    check_progress(dir.path(), servers).await;
}

#[tokio::test]
async fn cancelling_the_calling_child_over_http_ends_the_call_cancelled() {
    let Some(index) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_server, servers) = everything_http(&index, dir.path());
    let script = format!(
        r#"{DELEGATE}
[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{{ name = "mcp__everything__trigger-long-running-operation", args = {{ duration = 3600, steps = 3600 }} }}]
[[scripts.turns]]
text = "unreachable"
"#
    );
    let model = Recording::new(&script);
    let mut worker = AgentDefinition::new("worker", "Does the work.");
    worker.prompt = "You work.".into();
    let h = harness(dir.path(), &servers, model, vec![worker]).await;
    let events = Arc::new(Collect::default());
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut session = h.new_session().unwrap();
    let run = h.run_in(
        &mut session,
        "delegate",
        cadre_subagents::RunOptions {
            events: events.clone(),
            approvals: Arc::new(AllowAll),
            cancel: cancel.clone(),
            ..Default::default()
        },
    );
    let canceller = async {
        events
            .wait_for("the first progress", |evs| {
                evs.iter().any(|e| {
                    matches!(&e.event, Event::Notice { message } if message.contains("trigger-long-running-operation: progress 1/3600"))
                })
            })
            .await;
        cancel.cancel();
    };
    let (out, ()) = tokio::join!(run, canceller);
    assert_eq!(out.state, EndState::Cancelled, "{out:?}");
    let tasks = h.runtime().tasks_of(session.id()).await;
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0].status, cadre_subagents::TaskStatus::Cancelled);
    servers.stop_all().await;
}

async fn check_progress(ws: &std::path::Path, servers: McpServers) {
    let dir = ws;
    let script = format!(
        r#"{DELEGATE}
[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{{ name = "mcp__everything__trigger-long-running-operation", args = {{ duration = 0.4, steps = 4 }} }}]
[[scripts.turns]]
text = "worker saw: {{{{tool_results}}}}"
"#
    );
    let model = Recording::new(&script);
    let mut worker = AgentDefinition::new("worker", "Does the work.");
    worker.prompt = "You work.".into();
    let h = harness(dir, &servers, model, vec![worker]).await;
    let events = Arc::new(Collect::default());
    let mut session = h.new_session().unwrap();
    let out = h
        .run_in(
            &mut session,
            "delegate",
            cadre_subagents::RunOptions {
                events: events.clone(),
                approvals: Arc::new(AllowAll),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert!(
        out.output.contains("Long running operation completed"),
        "{}",
        out.output
    );
    let progress: Vec<String> = events
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.agent == "main")
        .filter_map(|e| match &e.event {
            Event::Notice { message } if message.contains("progress") => Some(message.clone()),
            _ => None,
        })
        .collect();
    // The client library hands notifications over on their own tasks, so the last one can
    // lose the race with the result; the ones before it arrive, in order.
    let expected = [1, 2, 3, 4].map(|i| {
        format!("[worker] mcp__everything__trigger-long-running-operation: progress {i}/4")
    });
    assert!(progress.len() >= 3, "{progress:?}");
    assert_eq!(progress[..], expected[..progress.len()]);
    servers.stop_all().await;
}

#[tokio::test]
async fn a_child_allowed_only_echo_sees_only_echo() {
    let Some(index) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let servers =
        McpServers::from_entries([everything_stdio(&index)], dir.path(), &Default::default());
    let script = format!(
        r#"{DELEGATE}
[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{{ name = "mcp__everything__echo", args = {{ message = "from the child" }} }}]
[[scripts.turns]]
text = "worker saw: {{{{tool_results}}}}"
"#
    );
    let model = Recording::new(&script);
    let mut worker = AgentDefinition::new("worker", "Does the work.");
    worker.prompt = "You work.".into();
    worker.tools = Some(vec!["mcp__everything__echo".into()]);
    let h = harness(dir.path(), &servers, model.clone(), vec![worker]).await;
    let out = h.run("delegate").await.unwrap();
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert!(out.output.contains("from the child"), "{}", out.output);

    let child = model.of("worker");
    let offered: Vec<&str> = child[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(offered, ["mcp__everything__echo"]);
    // The parent had the server's other tools.
    let parent = model.of("main");
    let parent_tools: Vec<&str> = parent[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        parent_tools.contains(&"mcp__everything__get-tiny-image"),
        "{parent_tools:?}"
    );
    servers.stop_all().await;
}
