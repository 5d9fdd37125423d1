//! The full-screen UI's commands and the rest of its keys, end to end in tmux with a
//! scripted model: `/help`, `/agents`, an unknown command, a follow-up (`s`) to a live child
//! from the task panel, an escalated approval from a background child, `/model`, `@agent`
//! direct runs, `/clear` (and the `SessionEnd` hook it fires), the `/resume` picker, and `--continue` with the input history of
//! the previous process. Needs tmux (installed by `.ci/run`); without it the test says
//! SKIPPED, and fails in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_support;

use std::path::Path;
use tui_support::{Tmux, tmux_available};

const MAIN: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
text = "main says {{user}}"
[[scripts.turns]]
tool_calls = [{ name = "agent_spawn", args = { agent_id = "helper", label = "h", task = "say hi", timeout_seconds = 30 } }]
[[scripts.turns]]
text = "spawned the helper"
[[scripts.turns]]
text = "the follow-up is in"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "writer", description = "background write", background = true, prompt = "write bg.txt" } }]
[[scripts.turns]]
text = "writing in the background"
[[scripts.turns]]
text = "background delivered"

[[scripts]]
agent = "helper"
[[scripts.turns]]
text = "helper: {{user}}"
[[scripts.turns]]
text = "helper again: {{user}}"

[[scripts]]
agent = "writer"
[[scripts.turns]]
tool_calls = [{ name = "write_file", args = { path = "bg.txt", content = "from the background" } }]
[[scripts.turns]]
text = "wrote bg.txt"
"#;

const HELPER: &str = "---\nname: helper\ndescription: Answers.\n---\nYou answer.\n";
const WRITER: &str = "---\nname: writer\ndescription: Writes files.\ntools: read_file, write_file\nskills: [missing-skill]\nworkspace: {mode: shared}\n---\nYou write.\n";

/// The second model `/model` switches to: the same answer on every turn.
fn other_script() -> String {
    let mut s = String::from("[[scripts]]\nagent = \"main\"\n");
    for _ in 0..20 {
        s.push_str("[[scripts.turns]]\ntext = \"other model says {{user}}\"\n");
    }
    s.push_str("[[scripts]]\nagent = \"helper\"\n");
    for _ in 0..4 {
        s.push_str("[[scripts.turns]]\ntext = \"helper on the other model: {{user}}\"\n");
    }
    s
}

fn workspace(dir: &Path) {
    std::fs::create_dir_all(dir.join(".cadre/agents")).unwrap();
    std::fs::write(dir.join(".cadre/agents/helper.md"), HELPER).unwrap();
    std::fs::write(dir.join(".cadre/agents/writer.md"), WRITER).unwrap();
    std::fs::write(
        dir.join(".cadre/config.toml"),
        "[subagents]\nbackground_approvals = \"escalate\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("main.toml"), MAIN).unwrap();
    // A SessionEnd hook logs each session the UI leaves.
    std::fs::create_dir_all(dir.join(".claude")).unwrap();
    let log = dir.join("ended.jsonl");
    let hook = format!("cat >> {}; echo >> {}", log.display(), log.display());
    let settings = serde_json::json!({"hooks": {"SessionEnd": [
        {"hooks": [{"type": "command", "command": hook}]}
    ]}});
    std::fs::write(dir.join(".claude/settings.json"), settings.to_string()).unwrap();
    std::fs::write(dir.join("other.toml"), other_script()).unwrap();
}

fn start(name: &str, ws: &Path, extra: &[&str]) -> Tmux {
    let ws_arg = ws.display().to_string();
    let model = format!("scripted:{}", ws.join("main.toml").display());
    let mut args = vec!["--workspace", &ws_arg, "--model", &model];
    args.extend(extra);
    Tmux::start(
        name,
        &[
            ("XDG_CONFIG_HOME", ws.join("nocfg").display().to_string()),
            ("CADRE_MODEL", String::new()),
        ],
        &args,
    )
}

/// Type `line` and press Enter.
fn submit(tmux: &Tmux, line: &str) {
    tmux.text(line);
    tmux.keys(&["Enter"]);
}

/// In a list overlay, press Down until the picked row (`│› `) contains `needle`; each Down is
/// waited for (the picked row changes) before the next.
fn pick(tmux: &Tmux, needle: &str) {
    let picked = |s: &str| {
        s.lines()
            .find(|l| l.trim_start().starts_with("│› "))
            .unwrap_or_default()
            .to_string()
    };
    for _ in 0..20 {
        let now = picked(&tmux.screen());
        if now.contains(needle) {
            return;
        }
        tmux.keys(&["Down"]);
        tmux.wait("the pick to move", |s| picked(s) != now);
    }
    panic!("no row with {needle}:\n{}", tmux.screen());
}

/// The session id the status bar shows (`s-` and 8 hex digits), if the bar is drawn.
fn status_session(screen: &str) -> Option<String> {
    let bar = screen.lines().rev().find(|l| l.contains(" running · "))?;
    let at = bar.find(" s-")? + 1;
    bar.get(at..at + 10).map(str::to_string)
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
fn commands_follow_ups_escalations_and_resuming() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    workspace(ws);
    let tmux = start("tui-commands", ws, &[]);
    tmux.wait_for("main.toml");

    // /help and /agents; an unknown command is an error and reaches no model.
    submit(&tmux, "/help");
    tmux.wait("the help", |s| {
        s.contains("/resume") && s.contains("/cost") && s.contains("Ctrl+R")
    });
    // /agents lists what `cadre agents list` does: source, model, tools, problems.
    submit(&tmux, "/agents");
    tmux.wait("the agents listing", |s| {
        let writer = s.lines().find(|l| l.contains(".cadre/agents/writer.md"));
        writer.is_some_and(|l| l.contains("read_file, write_file") && l.contains("main.toml"))
            && s.contains("general-purpose")
            && s.contains("builtin")
            && s.contains("skill `missing-skill` not found")
    });
    submit(&tmux, "/bogus");
    tmux.wait_for("unknown command /bogus");
    submit(&tmux, "hello");
    tmux.wait_for("main says hello");
    assert!(
        !tmux.screen().contains("main says /bogus"),
        "the command never reached the model"
    );

    // A live child (agent_spawn) takes a follow-up from the task panel.
    submit(&tmux, "spawn a helper");
    tmux.wait_for("spawned the helper");
    tmux.keys(&["C-t"]);
    tmux.wait_for("Tasks — Enter open");
    pick(&tmux, "say hi");
    tmux.keys(&["s"]);
    tmux.text("more please");
    tmux.keys(&["Enter"]);
    tmux.wait_for("sent to helper as task_");
    tmux.wait("the follow-up's task done", |s| {
        s.lines()
            .any(|l| l.contains("more please") && l.contains("completed"))
    });
    // The follow-up ran in the background: its end is delivered in a turn of its own
    // (the script's "the follow-up is in"), behind the panel.
    pick(&tmux, "more please");
    tmux.keys(&["Enter"]);
    tmux.wait_for("helper again: more please");
    // One Escape at a time: two ESC bytes read at once are one Esc key (the terminal
    // parser takes ESC ESC for Esc), which on a loaded machine left the list open.
    tmux.keys(&["Escape"]);
    tmux.wait("the task view to close", |s| {
        s.contains("Tasks — Enter open") && !s.contains("s follow-up · Esc back")
    });
    tmux.keys(&["Escape"]);
    // Both levels closed: the list, and the task view the first Escape leaves (keys typed
    // while either shows go to the panel, not the input).
    tmux.wait("the panel to close", |s| {
        !s.contains("Tasks — Enter open") && !s.contains("s follow-up · Esc back")
    });

    // A background child's request is escalated to the dialog, named, and announced.
    submit(&tmux, "background write");
    tmux.wait(
        "the dialog naming the writer, announced in the status bar",
        |s| {
            s.contains("Approval needed")
                && s.contains("Sub-agent writer (task task_")
                && s.contains("write_file")
                && s.contains("⚠ 1 approval waiting")
        },
    );
    tmux.keys(&["y"]);
    tmux.wait_for("background delivered");
    assert_eq!(
        std::fs::read_to_string(ws.join("bg.txt")).unwrap(),
        "from the background"
    );

    // /model switches the model of the next turns; @agent runs a sub-agent directly.
    let other = format!("scripted:{}", ws.join("other.toml").display());
    submit(&tmux, &format!("/model {other}"));
    tmux.wait_for("from the next turn on");
    submit(&tmux, "again");
    tmux.wait_for("other model says again");
    submit(&tmux, "@helper job one");
    tmux.wait_for("helper on the other model: job one");

    // /clear starts a new session; /resume picks the old one back.
    let first = status_session(&tmux.screen()).expect("the status bar");
    submit(&tmux, "/clear");
    tmux.wait("the new session", |s| {
        s.contains(&format!("the previous one ({first}"))
            && !s.contains("main says hello")
            && status_session(s).is_some_and(|id| id != first)
    });
    // The session /clear left ends for `clear` (its SessionEnd hook ran).
    let ended = || std::fs::read_to_string(ws.join("ended.jsonl")).unwrap_or_default();
    tmux.wait("the SessionEnd hook of the cleared session", |_| {
        ended().lines().any(|l| {
            serde_json::from_str::<serde_json::Value>(l).is_ok_and(|j| {
                j["reason"] == "clear"
                    && j["session_id"]
                        .as_str()
                        .is_some_and(|id| id.starts_with(&first))
            })
        })
    });
    submit(&tmux, "/resume");
    tmux.wait_for("Resume a session");
    pick(&tmux, "hello");
    tmux.keys(&["Enter"]);
    tmux.wait("the old session back", |s| {
        s.contains("main says hello") && status_session(s).as_deref() == Some(first.as_str())
    });

    // Leaving prints the resume command; --continue opens that session again, and the
    // input history of this process is there (Up).
    tmux.keys(&["C-c"]);
    tmux.wait_for("Ctrl+C again within 2 s exits");
    tmux.keys(&["C-c"]);
    assert_eq!(tmux.exit_code(), 0);
    let end = tmux.with_history();
    assert!(
        end.contains(&format!("resume with: {} ", env!("CARGO_BIN_EXE_cadre")))
            && end.contains(&format!(" --resume {first}")),
        "{end}"
    );
    drop(tmux);
    let again = start("tui-continue", ws, &["--continue"]);
    again.wait("the same session", |s| {
        s.contains("main.toml") && status_session(s).as_deref() == Some(first.as_str())
    });
    again.keys(&["Up"]);
    again.wait_for("› /resume");
    again.keys(&["Up"]);
    again.wait_for("› /clear");
}
