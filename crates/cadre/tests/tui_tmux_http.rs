//! The full-screen UI in tmux against a mock OpenAI server, whose recorded requests show
//! what the UI sent: nothing without a key (first run), input typed during a turn only
//! after that turn, and `/compact` forcing a summary call whose result replaces the old turns. Needs tmux (installed by `.ci/run`); without it the tests say SKIPPED,
//! and fail in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_support;

use cadre_testkit::{MockServer, OpenAiStream, RecordedRequest};
use serde_json::Value;
use std::path::Path;
use tui_support::{Tmux, tmux_available};

/// The key variable the workspace's provider names; set only where a test says so.
const KEY_VAR: &str = "CADRE_TUI_TEST_KEY";

/// A workspace whose `openai` provider points at `mock` and takes its key from [`KEY_VAR`].
fn workspace(mock: &MockServer) -> tempfile::TempDir {
    workspace_with(mock, "")
}

/// [`workspace`] with `extra` appended to its configuration.
fn workspace_with(mock: &MockServer, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        format!(
            "[providers.openai]\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n{extra}",
            mock.openai_base_url()
        ),
    )
    .unwrap();
    dir
}

/// cadre on `ws` with `openai:gpt-4o-mini`, no user configuration, and `key` (if any) in
/// [`KEY_VAR`].
fn start_ui(name: &str, ws: &Path, key: Option<&str>) -> Tmux {
    let mut env = vec![
        ("XDG_CONFIG_HOME", ws.join("nocfg").display().to_string()),
        ("CADRE_MODEL", String::new()),
    ];
    if let Some(k) = key {
        env.push((KEY_VAR, k.to_string()));
    }
    let ws_arg = ws.display().to_string();
    Tmux::start(
        name,
        &env,
        &["--workspace", &ws_arg, "--model", "openai:gpt-4o-mini"],
    )
}

/// Leave with Ctrl+C twice; the exit status.
fn quit(tmux: &Tmux) -> i32 {
    tmux.keys(&["C-c"]);
    tmux.wait_for("Ctrl+C again within 2 s exits");
    tmux.keys(&["C-c"]);
    tmux.exit_code()
}

/// The texts of the user messages of a recorded Chat Completions request.
fn user_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

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
