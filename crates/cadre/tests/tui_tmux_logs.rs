//! Log lines never go raw onto the full-screen UI: in tmux against a mock OpenAI server
//! that always fails (its retry warnings are logged while the UI holds the screen), the
//! input line and the status bar stay where they were and the warnings show as notices.
//! Needs tmux (installed by `.ci/run`); without it the test says SKIPPED, and fails in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_support;

use cadre_testkit::{MockReply, MockServer, RecordedRequest};
use std::sync::Arc;
use tui_support::mock_ui::{quit, start_ui, workspace};
use tui_support::tmux_available;

/// The input line and the status bar: the last line starting with `›` under the last rule,
/// and the status bar right under it.
fn bottom(screen: &str) -> Option<(String, String)> {
    let lines: Vec<&str> = screen.lines().collect();
    let rule = lines.iter().rposition(|l| l.starts_with('─'))?;
    let input = lines.get(rule + 1)?;
    let status = lines.get(rule + 2)?;
    (input.starts_with('›') && status.contains("openai:gpt-4o-mini") && status.contains(" ask"))
        .then(|| (input.to_string(), status.to_string()))
}

#[test]
fn a_failing_provider_leaves_the_input_line_and_status_bar_intact() {
    if !tmux_available() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockServer::start()).unwrap();
    mock.set_responder(Arc::new(|_: &RecordedRequest| {
        MockReply::openai_error(500, "the provider is down", None)
    }));
    let ws = workspace(&mock);
    let tmux = start_ui("tui-logs", ws.path(), Some("sk-test"));
    let before = tmux.wait("the input line and the status bar", |s| bottom(s).is_some());
    let (input_before, _) = bottom(&before).unwrap();

    tmux.text("hello");
    tmux.keys(&["Enter"]);
    let after = tmux.wait("the retry warnings as notices, the turn over", |s| {
        s.contains("retrying") && s.contains("── failed") && s.contains("Enter send")
    });
    // The failure is said by the error line alone: not again by the end line or the shell
    // (the retry notices say what each retried attempt met).
    let said = after
        .lines()
        .filter(|l| l.contains("the provider is down") && !l.contains("error="))
        .count();
    assert_eq!(said, 1, "{after}");
    let (input_after, status_after) =
        bottom(&after).unwrap_or_else(|| panic!("input line and status bar intact:\n{after}"));
    assert_eq!(input_after.trim_end(), input_before.trim_end(), "{after}");
    assert!(status_after.contains("openai:gpt-4o-mini"), "{after}");
    for line in after.lines().filter(|l| l.contains("WARN")) {
        assert!(
            line.starts_with("· ⚠"),
            "a raw log line on the screen: {line}\n{after}"
        );
    }
    assert!(mock.request_count() >= 2, "the call was retried");
    assert_eq!(quit(&tmux), 0);
}

#[test]
fn agent_file_warnings_at_start_show_as_notices() {
    if !tmux_available() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockServer::start()).unwrap();
    let ws = workspace(&mock);
    let agents = ws.path().join(".claude/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("general-purpose.md"),
        "---\nname: general-purpose\ndescription: Mine.\n---\nYou help.\n",
    )
    .unwrap();
    std::fs::write(agents.join("broken.md"), "---\nname: [unclosed\n---\n").unwrap();
    let tmux = start_ui("tui-agent-warnings", ws.path(), Some("sk-test"));
    // Printed before the screen opened they were covered by it; now they are notices.
    let screen = tmux.wait("the start-up warnings as notices", |s| {
        s.contains("⚠ agent general-purpose: .claude/agents/general-purpose.md overrides builtin")
            && s.contains("⚠ skipped agent file")
            && s.contains("broken.md")
    });
    assert!(bottom(&screen).is_some(), "{screen}");
    assert_eq!(quit(&tmux), 0);
}
