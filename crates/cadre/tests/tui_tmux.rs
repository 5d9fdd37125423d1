//! The full-screen UI end to end: the real binary in a real terminal (tmux), with the
//! scripted model of `examples/scripts/tui.toml` on a copy of `examples/demo`. Each step
//! types keys and waits (with a deadline) until the screen shows what it must.
//! Needs tmux (installed by `.ci/run`); without it the test says SKIPPED, and fails in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_support;

use tui_support::{Tmux, copy_dir, repo, tmux_available};

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
fn the_full_screen_ui_drives_sub_agents_tasks_and_approvals() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("demo");
    copy_dir(&repo().join("examples/demo"), &ws);
    let script = repo()
        .join("examples/scripts/tui.toml")
        .canonicalize()
        .unwrap();
    let ws_arg = ws.display().to_string();
    let model = format!("scripted:{}", script.display());
    let tmux = Tmux::start(
        "tui-demo",
        &[
            (
                "XDG_CONFIG_HOME",
                dir.path().join("nocfg").display().to_string(),
            ),
            ("CADRE_MODEL", String::new()),
        ],
        &["--workspace", &ws_arg, "--model", &model],
    );

    // The status bar names the model, on the alternate screen.
    tmux.wait_for("scripted:");
    assert_eq!(
        tmux.format("#{alternate_on}"),
        "1",
        "not on the alternate screen"
    );

    // "Review this project": the explorer's live progress and the background auditor.
    tmux.text("Review this project");
    tmux.keys(&["Enter"]);
    tmux.wait(
        "the explorer's progress and the auditor in the strip",
        |s| {
            s.contains("├─ explorer · task_")
                && s.contains("→ read_file src/inventory.py")
                && s.contains("⟳ auditor · task_")
        },
    );
    tmux.wait_for("Review complete");
    tmux.wait_for("delivered to the main agent");

    // Ctrl+T lists the task ids with their states; Esc closes the panel.
    tmux.keys(&["C-t"]);
    let panel_rows = |s: &str| {
        s.lines()
            .filter(|l| l.starts_with('│') && l.contains("task_") && l.contains("completed"))
            .count()
    };
    let panel = tmux.wait("the task panel", |s| {
        s.contains("Tasks — Enter open") && panel_rows(s) >= 2
    });
    let rows: Vec<&str> = panel
        .lines()
        .filter(|l| l.starts_with('│') && l.contains("task_") && l.contains("completed"))
        .collect();
    assert_eq!(rows.len(), 2, "{panel}");
    assert!(
        rows.iter().any(|r| r.contains("explorer")) && rows.iter().any(|r| r.contains("auditor"))
    );
    tmux.keys(&["Escape"]);
    tmux.wait("the panel to close", |s| !s.contains("Tasks — Enter open"));

    // Tab completes @expl to @explorer.
    tmux.text("@expl");
    tmux.keys(&["Tab"]);
    tmux.wait_for("› @explorer");
    tmux.keys(&["C-u"]);
    tmux.wait("the input to clear", |s| !s.contains("› @explorer"));

    // An approval answered "this session" is not asked again.
    tmux.text("write the notes");
    tmux.keys(&["Enter"]);
    tmux.wait("the dialog naming the main agent, with the diff", |s| {
        s.contains("Approval needed")
            && s.contains("The main agent wants to run write_file")
            && s.contains("+ first draft")
    });
    tmux.keys(&["s"]);
    let after = tmux.wait_for("Notes written twice.");
    assert!(!after.contains("Approval needed"), "{after}");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.md")).unwrap(),
        "# Notes\n\nsecond draft\n",
        "the second write ran without asking"
    );

    // A background task is cancelled from the panel; input typed while it runs is answered
    // at once (background work does not hold the turn).
    tmux.text("start the slow audit");
    tmux.keys(&["Enter"]);
    tmux.wait_for("The slow audit runs in the background.");
    tmux.text("after the audit");
    tmux.keys(&["Enter"]);
    tmux.wait_for("You said: after the audit");
    tmux.keys(&["C-t"]);
    tmux.wait("the slow audit in the panel", |s| {
        s.contains("Tasks — Enter open") && s.contains("slow audit")
    });
    tmux.keys(&["Down", "Down"]);
    tmux.wait("the slow audit selected", |s| {
        s.lines()
            .any(|l| l.contains("› task_") && l.contains("slow audit"))
    });
    tmux.keys(&["x"]);
    tmux.wait_for("press x again to cancel");
    tmux.keys(&["x"]);
    tmux.wait("the slow audit cancelled", |s| {
        s.lines()
            .any(|l| l.contains("slow audit") && l.contains("cancelled"))
    });
    tmux.keys(&["Escape"]);
    tmux.wait("the panel to close", |s| !s.contains("Tasks — Enter open"));
    tmux.wait("the cancelled audit's result, then the queued input", |s| {
        s.contains("You said: after the audit")
            && s.contains("Slow audit ended:")
            && s.contains("state=\"cancelled\"")
    });

    // Ctrl+C twice leaves with 0 and prints how to resume.
    tmux.keys(&["C-c"]);
    tmux.wait_for("Ctrl+C again within 2 s exits");
    tmux.keys(&["C-c"]);
    assert_eq!(tmux.exit_code(), 0);
    let end = tmux.with_history();
    // The hint names the binary as it can be run (it is not on PATH as `cadre` here).
    let exe = format!("resume with: {} ", env!("CARGO_BIN_EXE_cadre"));
    assert!(end.contains(&exe) && end.contains(" --resume s-"), "{end}");
    assert_eq!(
        tmux.format("#{alternate_on}"),
        "0",
        "left the alternate screen"
    );
}
