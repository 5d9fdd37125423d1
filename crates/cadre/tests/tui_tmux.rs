//! The full-screen UI end to end: the real binary in a real terminal (tmux), with the
//! scripted model of `examples/scripts/tui.toml` on a copy of `examples/demo`. Each step
//! types keys and waits (with a deadline) until the screen shows what it must.
//! Needs tmux (installed by `.ci/run`); without it the test says SKIPPED, and fails in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of this test alone, killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-t", "ui"])
    }

    /// The screen with the lines scrolled off it.
    fn with_history(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-S", "-200", "-t", "ui"])
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "ui"];
        args.extend(keys);
        self.run(&args);
    }

    fn text(&self, text: &str) {
        self.run(&["send-keys", "-t", "ui", "-l", text]);
    }

    fn format(&self, f: &str) -> String {
        self.run(&["display-message", "-p", "-t", "ui", f])
            .trim()
            .to_string()
    }

    /// Wait until `pred` holds for the screen; the screen it held for.
    fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_for(&self, needle: &str) -> String {
        self.wait(needle, |s| s.contains(needle))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_full_screen_ui_drives_sub_agents_tasks_and_approvals() {
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is missing (see .ci/run)"
        );
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("demo");
    copy_dir(&repo().join("examples/demo"), &ws);
    let script = repo()
        .join("examples/scripts/tui.toml")
        .canonicalize()
        .unwrap();
    let tmux = Tmux {
        socket: format!("cadre-tui-test-{}", std::process::id()),
    };
    // The shell reports the exit code on the screen once the UI has left it.
    let command = format!(
        "'{}' --workspace '{}' --model 'scripted:{}'; echo \"cadre exited with $?\"",
        env!("CARGO_BIN_EXE_cadre"),
        ws.display(),
        script.display()
    );
    tmux.run(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "ui",
        "-x",
        "120",
        "-y",
        "45",
        "-e",
        &format!("XDG_CONFIG_HOME={}", dir.path().join("nocfg").display()),
        "-e",
        "CADRE_MODEL=",
        "-e",
        "TERM=xterm-256color",
        &command,
    ]);
    tmux.run(&["set-option", "-t", "ui", "remain-on-exit", "on"]);

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
    let dialog = tmux.wait_for("Approval needed");
    assert!(
        dialog.contains("The main agent wants to run write_file"),
        "{dialog}"
    );
    assert!(
        dialog.contains("+ first draft"),
        "the dialog shows the diff: {dialog}"
    );
    tmux.keys(&["s"]);
    let after = tmux.wait_for("Notes written twice.");
    assert!(!after.contains("Approval needed"), "{after}");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.md")).unwrap(),
        "# Notes\n\nsecond draft\n",
        "the second write ran without asking"
    );

    // A background task is cancelled from the panel; input typed meanwhile waits its turn.
    tmux.text("start the slow audit");
    tmux.keys(&["Enter"]);
    tmux.wait_for("The slow audit runs in the background.");
    tmux.text("after the audit");
    tmux.keys(&["Enter"]);
    tmux.wait_for("queued: after the audit");
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
    let done = tmux.wait_for("You said: after the audit");
    assert!(done.contains("Slow audit ended:"), "{done}");
    assert!(done.contains("state=\"cancelled\""), "{done}");

    // Ctrl+C twice leaves with 0 and prints how to resume.
    tmux.keys(&["C-c"]);
    tmux.wait_for("Ctrl+C again within 2 s exits");
    tmux.keys(&["C-c"]);
    let end = tmux.wait_for("cadre exited with");
    assert!(end.contains("cadre exited with 0"), "{end}");
    let end = tmux.with_history();
    assert!(end.contains("resume with: cadre --resume s-"), "{end}");
    assert_eq!(
        tmux.format("#{alternate_on}"),
        "0",
        "left the alternate screen"
    );
}
