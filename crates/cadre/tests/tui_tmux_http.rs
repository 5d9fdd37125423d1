//! The full-screen UI in tmux against a mock OpenAI server, whose recorded requests show
//! what the UI sent: nothing without a key (first run), input typed during a turn only
//! after that turn, and `/compact` forcing a summary call whose result replaces the old turns. Needs tmux (installed by `.ci/run`); without it the tests say SKIPPED,
//! and fail in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_support;

use cadre_testkit::{MockServer, OpenAiStream, RecordedRequest};
use tui_support::mock_ui::{KEY_VAR, quit, start_ui, user_messages, workspace, workspace_with};
use tui_support::tmux_available;

#[test]
fn first_run_without_a_key_names_the_variable_and_sends_nothing() {
    if !tmux_available() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockServer::start()).unwrap();
    let ws = workspace(&mock);
    let tmux = start_ui("tui-first-run", ws.path(), None);

    tmux.wait("the first-run message naming the variable", |s| {
        s.contains("Welcome to cadre")
            && s.contains(&format!("Set {KEY_VAR}"))
            && s.contains("--model PROVIDER:MODEL")
    });
    tmux.text("hello");
    tmux.keys(&["Enter"]);
    tmux.wait("the refusal in the transcript", |s| {
        s.contains("so nothing was sent") && !s.contains("Welcome to cadre")
    });
    assert_eq!(quit(&tmux), 0);
    assert_eq!(mock.request_count(), 0, "no request without a key");
}

#[test]
fn input_typed_during_a_turn_is_sent_after_it() {
    if !tmux_available() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockServer::start()).unwrap();
    // The first turn runs a command that waits for the test to create `release`, so the
    // second prompt is certainly typed while the turn runs.
    let wait = "while [ ! -e release ]; do sleep 0.05; done; echo released";
    mock.push_openai(
        OpenAiStream::new()
            .role()
            .tool_call(
                0,
                "call_1",
                "bash",
                &serde_json::json!({ "command": wait }).to_string(),
            )
            .finish("tool_calls")
            .done()
            .into_reply(),
    );
    for answer in ["first answer", "second answer"] {
        mock.push_openai(
            OpenAiStream::new()
                .role()
                .text(answer)
                .finish("stop")
                .done()
                .into_reply(),
        );
    }
    let ws = workspace(&mock);
    let tmux = start_ui("tui-queue", ws.path(), Some("sk-test"));
    tmux.wait_for("openai:gpt-4o-mini");

    tmux.text("first prompt");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Approval needed");
    tmux.keys(&["y"]);
    tmux.wait("the command running", |s| !s.contains("Approval needed"));
    tmux.text("second prompt");
    tmux.keys(&["Enter"]);
    tmux.wait_for("queued: second prompt");
    assert_eq!(
        mock.request_count(),
        1,
        "the turn is still on its first call"
    );
    std::fs::write(ws.path().join("release"), "").unwrap();
    tmux.wait_for("second answer");

    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert_eq!(user_messages(&requests[0].body), ["first prompt"]);
    assert_eq!(
        user_messages(&requests[1].body),
        ["first prompt"],
        "the queued input did not go into the running turn"
    );
    assert_eq!(
        user_messages(&requests[2].body),
        ["first prompt", "second prompt"],
        "it went out as the next turn"
    );
    assert_eq!(quit(&tmux), 0);
}

#[test]
fn slash_compact_summarises_the_older_turns_and_shows_the_result() {
    if !tmux_available() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockServer::start()).unwrap();
    // A summary request carries no tools; every other request is answered with its prompt.
    mock.set_responder(std::sync::Arc::new(|r: &RecordedRequest| {
        let text = if r.body.get("tools").is_none() {
            "SUMMARY: the user chose REST.".to_string()
        } else {
            format!(
                "answer to {}",
                user_messages(&r.body).pop().unwrap_or_default()
            )
        };
        OpenAiStream::new()
            .role()
            .text(&text)
            .finish("stop")
            .done()
            .into_reply()
    }));
    // Automatic compaction off: /compact works anyway.
    let ws = workspace_with(
        &mock,
        "[compaction]\nenabled = false\nkeep_recent_turns = 1\n",
    );
    let tmux = start_ui("tui-compact", ws.path(), Some("sk-test"));
    tmux.wait_for("openai:gpt-4o-mini");
    let first = format!("first prompt{}", " with detail".repeat(60));
    for (prompt, answer) in [
        (first.as_str(), "answer to first prompt"),
        ("second prompt", "answer to second prompt"),
    ] {
        tmux.text(prompt);
        tmux.keys(&["Enter"]);
        tmux.wait_for(answer);
    }
    tmux.text("/compact keep the API decisions");
    tmux.keys(&["Enter"]);
    let screen =
        tmux.wait_for("compacted the conversation: 2 messages summarised by openai:gpt-4o-mini");
    assert!(screen.contains("tokens"), "{screen}");
    tmux.text("third prompt");
    tmux.keys(&["Enter"]);
    tmux.wait_for("answer to third prompt");

    let requests = mock.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let summary = &requests[2];
    assert!(summary.body.get("tools").is_none());
    let system = summary.body["messages"][0]["content"].as_str().unwrap();
    assert!(system.ends_with("keep the API decisions"), "{system}");
    let sent = user_messages(&requests[3].body);
    assert!(
        sent[0].starts_with("<conversation-summary>") && sent[0].contains("chose REST"),
        "{sent:?}"
    );
    assert_eq!(sent[1..], ["second prompt", "third prompt"]);
    assert_eq!(quit(&tmux), 0);
}
