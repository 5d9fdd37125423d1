//! Typing into the full-screen UI in tmux against a mock OpenAI server: a multi-line paste
//! arrives whole (tmux's `paste-buffer` with and without bracketed paste), and a message
//! queued during a turn survives Ctrl+C. Needs tmux (installed by `.ci/run`); without it the
//! tests say SKIPPED, and fail in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_support;

use cadre_testkit::{MockServer, OpenAiStream, RecordedRequest};
use std::sync::Arc;
use tui_support::mock_ui::{quit, start_ui, user_messages, workspace};
use tui_support::{Tmux, tmux_available};

/// A text answer.
fn text(answer: &str) -> cadre_testkit::MockReply {
    OpenAiStream::new()
        .role()
        .text(answer)
        .finish("stop")
        .done()
        .into_reply()
}

/// Paste a 200-line buffer (ending in a line break) into the input box with tmux, which
/// sends CR for each line break; `bracketed` wraps it in bracketed-paste markers.
fn paste_200_lines(name: &str, bracketed: bool) {
    if !tmux_available() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockServer::start()).unwrap();
    mock.set_responder(Arc::new(|r: &RecordedRequest| {
        let last = user_messages(&r.body).pop().unwrap_or_default();
        text(&format!("got {} lines", last.lines().count()))
    }));
    let ws = workspace(&mock);
    let tmux = start_ui(name, ws.path(), Some("sk-test"));
    tmux.wait_for("openai:gpt-4o-mini");

    let lines: Vec<String> = (1..=200)
        .map(|i| format!("pasted line {i} of the buffer"))
        .collect();
    let file = ws.path().join("buffer.txt");
    std::fs::write(&file, format!("{}\n", lines.join("\n"))).unwrap();
    tmux.run(&["load-buffer", "-b", "p", &file.display().to_string()]);
    let mut args = vec!["paste-buffer", "-b", "p", "-t", "ui"];
    if bracketed {
        args.push("-p");
    }
    tmux.run(&args);
    let screen = tmux.wait_for("[pasted 200 lines]");
    assert!(
        !screen.contains("pasted line 1 "),
        "shown collapsed:\n{screen}"
    );
    assert_eq!(mock.request_count(), 0, "a paste never submits by itself");
    tmux.keys(&["Enter"]);
    tmux.wait_for("got 200 lines");

    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let sent = user_messages(&requests[0].body);
    assert_eq!(sent.len(), 1, "one message: {sent:?}");
    assert_eq!(
        sent[0].lines().collect::<Vec<_>>(),
        lines,
        "every line, in order"
    );
    assert_eq!(quit(&tmux), 0);
}

#[test]
fn a_bracketed_paste_of_200_lines_arrives_whole_and_shows_collapsed() {
    paste_200_lines("tui-paste-bracketed", true);
}

#[test]
fn a_paste_typed_as_keys_with_cr_arrives_whole_and_shows_collapsed() {
    paste_200_lines("tui-paste-keys", false);
}

/// Whether the input box (below the transcript's last rule) shows `needle`.
fn in_input_box(tmux: &Tmux, needle: &str) -> bool {
    let screen = tmux.screen();
    let lines: Vec<&str> = screen.lines().collect();
    let rule = lines.iter().rposition(|l| l.starts_with('─')).unwrap_or(0);
    lines[rule..]
        .iter()
        .any(|l| l.starts_with('›') && l.contains(needle))
}

#[test]
fn ctrl_c_with_a_queued_message_puts_it_back_and_the_hint_goes() {
    if !tmux_available() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockServer::start()).unwrap();
    // The first prompt runs a command that never ends by itself, so the turn is running
    // when the second prompt is queued and when Ctrl+C comes.
    mock.set_responder(Arc::new(|r: &RecordedRequest| {
        let last = user_messages(&r.body).pop().unwrap_or_default();
        if last == "first prompt" {
            let wait = "while true; do sleep 0.05; done";
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
                .into_reply()
        } else {
            text(&format!("answer to {last}"))
        }
    }));
    let ws = workspace(&mock);
    let tmux = start_ui("tui-queue-cancel", ws.path(), Some("sk-test"));
    tmux.wait_for("openai:gpt-4o-mini");
    tmux.text("first prompt");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Approval needed");
    tmux.keys(&["y"]);
    tmux.wait("the command running", |s| !s.contains("Approval needed"));
    tmux.text("second prompt");
    tmux.keys(&["Enter"]);
    tmux.wait("the queue and its hint", |s| {
        s.contains("queued: second prompt") && s.contains("queued (1)")
    });

    tmux.keys(&["C-c"]);
    tmux.wait(
        "the turn cancelled, the message back in the input box",
        |s| {
            s.contains("cancelling the turn")
                && s.contains("Enter send")
                && !s.contains("queued")
                && in_input_box(&tmux, "second prompt")
        },
    );
    tmux.keys(&["Enter"]);
    tmux.wait_for("answer to second prompt");
    let requests = mock.requests();
    let last = requests.last().unwrap();
    assert_eq!(
        user_messages(&last.body).last().map(String::as_str),
        Some("second prompt")
    );
    assert!(!tmux.screen().contains("queued"), "{}", tmux.screen());
    assert_eq!(quit(&tmux), 0);
}
