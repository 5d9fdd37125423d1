//! Custom slash commands in the full-screen UI, end to end in tmux with a scripted model:
//! `/review` from `.claude/commands/review.md` is listed in `/help`, completes with Tab, and
//! `/review src` sends the expanded prompt. Needs tmux; without it the test says SKIPPED,
//! and fails in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_support;

use tui_support::{Tmux, tmux_available};

const MAIN: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
text = "main says {{user}}"
"#;

const REVIEW: &str = "---\ndescription: Review a path closely\nargument-hint: [path]\n---\nReview $ARGUMENTS carefully.\n";

#[test]
fn a_custom_command_is_listed_completed_and_run() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".claude/commands")).unwrap();
    std::fs::write(ws.join(".claude/commands/review.md"), REVIEW).unwrap();
    std::fs::write(ws.join("main.toml"), MAIN).unwrap();
    let ws_arg = ws.display().to_string();
    let model = format!("scripted:{}", ws.join("main.toml").display());
    let tmux = Tmux::start(
        "tui-slash",
        &[
            (
                "XDG_CONFIG_HOME",
                dir.path().join("nocfg").display().to_string(),
            ),
            ("HOME", dir.path().join("home").display().to_string()),
            ("CADRE_MODEL", String::new()),
        ],
        &["--workspace", &ws_arg, "--model", &model],
    );
    tmux.wait_for("main.toml");

    tmux.text("/help");
    tmux.keys(&["Enter"]);
    tmux.wait("the custom command in /help", |s| {
        s.contains("/review [path]") && s.contains("Review a path closely")
    });

    tmux.text("/revi");
    tmux.keys(&["Tab"]);
    tmux.wait("Tab to complete the name", |s| {
        s.lines()
            .any(|l| l.contains("/review") && !l.contains("[path]"))
    });
    tmux.text(" src");
    tmux.keys(&["Enter"]);
    tmux.wait_for("main says Review src carefully.");
}
