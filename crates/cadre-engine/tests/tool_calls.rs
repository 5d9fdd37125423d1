//! The loop's handling of tool calls: parallelism, ordering, errors the model sees.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_tools::ToolRegistry;
use cadre_types::{EndState, Event, Message};
use common::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn tool_messages(messages: &[Message]) -> Vec<(String, String, bool)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                name,
                content,
                is_error,
                ..
            } => Some((name.clone(), content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn parallel_calls_run_concurrently_and_results_keep_call_order() {
    let (model, rec) = scripted(
        r#"
        [[turns]]
        text = "fanning out"
        tool_calls = [
          { name = "meet", args = { text = "c1" } },
          { name = "meet", args = { text = "c2" } },
          { name = "meet", args = { text = "c3" } },
          { name = "meet", args = { text = "c4" } },
        ]
        [[turns]]
        text = "all met: {{tool_results}}"
        "#,
    );
    // All four must be inside the tool at once to pass the barrier: a sequential
    // loop would block here forever (and the test would time out).
    let barrier = Arc::new(tokio::sync::Barrier::new(4));
    let finished = Arc::new(Mutex::new(Vec::new()));
    let tools = ToolRegistry::new().with(TestTool::new(
        "meet",
        Behaviour::Barrier(barrier, finished.clone()),
    ));
    let agent = builder(model).tools(tools).build();
    let h = Harness::new();
    let mut session = h.session();
    let out = tokio::time::timeout(Duration::from_secs(10), h.run(&agent, &mut session, "go"))
        .await
        .expect("calls ran concurrently");
    assert_eq!(out.state, EndState::Completed);
    // They finished in reverse order...
    assert_eq!(*finished.lock().unwrap(), vec!["c4", "c3", "c2", "c1"]);
    // ...but the results are in call order, both in the session and in what the model saw.
    let results: Vec<String> = tool_messages(session.messages())
        .into_iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(results, vec!["done:c1", "done:c2", "done:c3", "done:c4"]);
    assert_eq!(out.output, "all met: done:c1\ndone:c2\ndone:c3\ndone:c4");
    assert_eq!(rec.requests.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn at_most_max_parallel_tools_calls_run_at_once() {
    let (model, _rec) = scripted(
        r#"
        [[turns]]
        tool_calls = [
          { name = "pair", args = { text = "c1" } },
          { name = "pair", args = { text = "c2" } },
          { name = "pair", args = { text = "c3" } },
          { name = "pair", args = { text = "c4" } },
          { name = "pair", args = { text = "c5" } },
          { name = "pair", args = { text = "c6" } },
        ]
        [[turns]]
        text = "{{tool_results}}"
        "#,
    );
    // Calls leave in pairs: two must be inside at once, and a third would be counted.
    let inside = Arc::new(Default::default());
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let tools = ToolRegistry::new().with(TestTool::new(
        "pair",
        Behaviour::Counted(Arc::clone(&inside), barrier),
    ));
    let agent = builder(model).tools(tools).max_parallel_tools(2).build();
    let h = Harness::new();
    let mut session = h.session();
    let out = tokio::time::timeout(Duration::from_secs(10), h.run(&agent, &mut session, "go"))
        .await
        .expect("two calls ran at once");
    assert_eq!(out.state, EndState::Completed);
    let inside: &(
        std::sync::atomic::AtomicUsize,
        std::sync::atomic::AtomicUsize,
    ) = &inside;
    assert_eq!(inside.1.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(
        out.output,
        "done:c1\ndone:c2\ndone:c3\ndone:c4\ndone:c5\ndone:c6"
    );
}

#[tokio::test]
async fn tool_errors_unknown_tools_and_bad_json_go_back_to_the_model() {
    let (model, rec) = scripted(
        r#"
        [[turns]]
        tool_calls = [
          { name = "boom" },
          { name = "no_such_tool", args = {} },
          { name = "echo", args_raw = "{\"text\": \"unterminated" },
          { name = "echo", args_raw = "[1, 2]" },
          { name = "echo", args = { text = "fine" } },
        ]
        [[turns]]
        text = "recovered"
        "#,
    );
    let tools = ToolRegistry::new()
        .with(TestTool::new("boom", Behaviour::Fail("disk on fire")))
        .with(TestTool::new("echo", Behaviour::Echo));
    let agent = builder(model).tools(tools).build();
    let h = Harness::new();
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "go").await;
    assert_eq!(out.state, EndState::Completed);
    assert_eq!(out.output, "recovered");
    let results = tool_messages(session.messages());
    assert_eq!(results.len(), 5);
    assert!(
        results[0].2 && results[0].1.contains("disk on fire"),
        "{:?}",
        results[0]
    );
    assert!(results[1].2 && results[1].1.contains("unknown tool `no_such_tool`"));
    assert!(
        results[1].1.contains("boom, echo"),
        "lists available tools: {}",
        results[1].1
    );
    assert!(
        results[2].2 && results[2].1.contains("invalid JSON"),
        "{:?}",
        results[2]
    );
    assert!(results[3].2 && results[3].1.contains("expected a JSON object"));
    assert_eq!(results[4], ("echo".into(), "echo:fine".into(), false));
    // The second model request carried all five observations.
    let reqs = rec.requests.lock().unwrap();
    let seen = reqs[1]
        .messages
        .iter()
        .filter(|m| matches!(m, Message::Tool { .. }))
        .count();
    assert_eq!(seen, 5);
}

#[tokio::test]
async fn events_are_typed_and_ordered() {
    let (model, _rec) = scripted(
        r#"
        [[turns]]
        text = "calling"
        tool_calls = [{ name = "echo", args = { text = "a" } }]
        [[turns]]
        text = "done"
        "#,
    );
    let agent = builder(model)
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    h.run(&agent, &mut session, "go").await;
    let kinds: Vec<&'static str> = h
        .events
        .events()
        .iter()
        .map(|e| match e {
            Event::RunStarted { .. } => "run_started",
            Event::TurnStarted { .. } => "turn",
            Event::TextDelta { .. } => "text",
            Event::ToolStart { .. } => "tool_start",
            Event::ToolResult { .. } => "tool_result",
            Event::Usage { .. } => "usage",
            Event::Done { .. } => "done",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "run_started",
            "turn",
            "text",
            "usage",
            "tool_start",
            "tool_result",
            "turn",
            "text",
            "usage",
            "done"
        ]
    );
}

#[tokio::test]
async fn empty_final_turn_keeps_the_last_answer() {
    let (model, _rec) = scripted(
        r#"
        [[turns]]
        text = "the answer is 42"
        tool_calls = [{ name = "echo", args = { text = "a" } }]
        [[turns]]
        text = ""
        "#,
    );
    let agent = builder(model)
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "go").await;
    assert_eq!(out.state, EndState::Completed);
    assert_eq!(out.output, "the answer is 42");
}

#[tokio::test]
async fn big_outputs_are_offloaded_with_a_pointer() {
    let (model, rec) = scripted(
        r#"
        [[turns]]
        tool_calls = [{ name = "big", id = "call_big" }]
        [[turns]]
        text = "ok"
        "#,
    );
    let h = Harness::new();
    let agent = builder(model)
        .tools(ToolRegistry::new().with(TestTool::new("big", Behaviour::Big(50_000))))
        .offloader(cadre_engine::Offloader::new(
            h.dir.path(),
            cadre_engine::DEFAULT_OFFLOAD_THRESHOLD,
        ))
        .build();
    let mut session = h.session();
    h.run(&agent, &mut session, "go").await;
    let reqs = rec.requests.lock().unwrap();
    let seen = reqs[1]
        .messages
        .iter()
        .find_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    assert!(seen.len() < 5_000, "model saw {} bytes", seen.len());
    let dir = format!(".cadre/tool-outputs/{}/", session.id());
    let rel = seen
        .split_once("saved in ")
        .and_then(|(_, rest)| rest.split_once(". Read"))
        .map(|(path, _)| path.to_string())
        .unwrap();
    assert!(rel.starts_with(&dir), "{seen}");
    assert!(rel.contains("-call_big-"), "{seen}");
    assert!(seen.contains("xxxxxxxx"), "has a preview");
    let stored = std::fs::read_to_string(h.dir.path().join(rel)).unwrap();
    assert_eq!(stored.len(), 50_000);
}

#[tokio::test]
async fn images_a_tool_returns_reach_the_next_request_and_the_session() {
    let (model, rec) = scripted(
        r#"
        [[turns]]
        tool_calls = [{ name = "shot", args = {} }]
        [[turns]]
        text = "seen"
        "#,
    );
    let tools = ToolRegistry::new().with(TestTool::new("shot", Behaviour::Image));
    let agent = builder(model).tools(tools).build();
    let h = Harness::new();
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "go").await;
    assert_eq!(out.state, EndState::Completed);
    let requests = rec.requests.lock().unwrap();
    let images = |messages: &[Message]| -> Vec<cadre_types::Image> {
        messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool { images, .. } => Some(images.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    };
    let sent = images(&requests[1].messages);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].media_type, "image/png");
    assert_eq!(images(session.messages()), sent);
}
