//! The conversation stays open while background children run: in the full-screen UI in
//! tmux against a mock OpenAI server, a prompt typed while two slow background children run
//! is answered at once, and both results still reach the main agent exactly once. Needs tmux
//! (installed by `.ci/run`); without it the test says SKIPPED, and fails in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_support;

use cadre_testkit::{MockServer, OpenAiStream, RecordedRequest, poll_for};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tui_support::mock_ui::{quit, start_ui, user_messages, workspace};
use tui_support::tmux_available;

/// How long each child's model call takes.
const CHILD_TIME: Duration = Duration::from_secs(5);

const WORKER: &str =
    "---\nname: worker\ndescription: Does slow jobs.\n---\nYou are the slow worker.\n";

fn system(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn is_child(r: &RecordedRequest) -> bool {
    system(&r.body).contains("You are the slow worker.")
}

/// How many messages of `body` hold `needle`.
fn messages_holding(body: &Value, needle: &str) -> usize {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["content"].as_str().is_some_and(|c| c.contains(needle)))
        .count()
}

fn text(answer: &str) -> cadre_testkit::MockReply {
    OpenAiStream::new()
        .role()
        .text(answer)
        .finish("stop")
        .done()
        .into_reply()
}

/// The main agent starts two background workers, then answers; a worker answers with the
/// result its job names after [`CHILD_TIME`]; results delivered to the main agent are noted.
fn respond(r: &RecordedRequest) -> cadre_testkit::MockReply {
    let users = user_messages(&r.body);
    let last = users.last().cloned().unwrap_or_default();
    if is_child(r) {
        let job = if last.contains("job A") { "A" } else { "B" };
        return text(&format!("RESULT-{job}-7f3")).delayed(CHILD_TIME);
    }
    let last_role = r.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["role"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    if last == "start two" && last_role == "user" {
        return OpenAiStream::new()
            .role()
            .tool_call(
                0,
                "call_a",
                "task",
                &json!({"subagent_type": "worker", "description": "job A",
                        "prompt": "do job A", "background": true})
                .to_string(),
            )
            .tool_call(
                1,
                "call_b",
                "task",
                &json!({"subagent_type": "worker", "description": "job B",
                        "prompt": "do job B", "background": true})
                .to_string(),
            )
            .finish("tool_calls")
            .done()
            .into_reply();
    }
    if last_role == "tool" {
        return text("both workers started");
    }
    if last == "quick question" {
        return text("quick answer");
    }
    text("noted the results")
}

#[test]
fn a_prompt_typed_while_background_children_run_is_answered_at_once() {
    if !tmux_available() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockServer::start()).unwrap();
    mock.set_responder(Arc::new(respond));
    let ws = workspace(&mock);
    std::fs::create_dir_all(ws.path().join(".cadre/agents")).unwrap();
    std::fs::write(ws.path().join(".cadre/agents/worker.md"), WORKER).unwrap();
    let tmux = start_ui("tui-background", ws.path(), Some("sk-test"));
    tmux.wait_for("openai:gpt-4o-mini");

    tmux.text("start two");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait("the turn over while both workers run", |s| {
        s.contains("both workers started") && s.contains("Enter send") && s.contains("2 running")
    });
    assert!(!screen.contains("queued"), "{screen}");
    tmux.text("quick question");
    let typed = Instant::now();
    tmux.keys(&["Enter"]);
    tmux.wait_for("quick answer");

    let requests = mock.requests();
    let quick = requests
        .iter()
        .find(|r| {
            !is_child(r)
                && user_messages(&r.body).last().map(String::as_str) == Some("quick question")
        })
        .expect("the quick question reached the model");
    assert!(
        quick.received_at.duration_since(typed) < Duration::from_secs(1),
        "answered at once, not after the children: {:?}",
        quick.received_at.duration_since(typed)
    );
    let children: Vec<&RecordedRequest> = requests.iter().filter(|r| is_child(r)).collect();
    assert_eq!(children.len(), 2, "two workers");
    for c in &children {
        assert!(
            quick.received_at < c.received_at + CHILD_TIME,
            "the prompt's request came before either child ended"
        );
    }

    // Both results reach the main agent, in a turn of their own, each exactly once.
    tmux.wait_for("noted the results");
    let last_main = || mock.requests().into_iter().rfind(|r| !is_child(r)).unwrap();
    let last = poll_for(Duration::from_secs(30), || {
        let last = last_main();
        ["RESULT-A-7f3", "RESULT-B-7f3"]
            .iter()
            .all(|n| messages_holding(&last.body, n) > 0)
            .then_some(last)
    });
    let Some(last) = last else {
        panic!("both results not delivered: {:?}", last_main());
    };
    for n in ["RESULT-A-7f3", "RESULT-B-7f3"] {
        assert_eq!(messages_holding(&last.body, n), 1, "{n} delivered once");
    }
    assert_eq!(quit(&tmux), 0);
}
