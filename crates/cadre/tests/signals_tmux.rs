//! SIGTERM and SIGHUP stop the interactive surfaces, in a real terminal (tmux), as they stop
//! `cadre run`: the running turn is cancelled, every tool's process group is killed (checked
//! by PID), the background tasks end `cancelled` in the store with the signal as their
//! reason, the session is saved, the terminal is given back (the full-screen UI leaves the
//! alternate screen and mouse mode) and the exit code is 128 + the signal.
//! Needs tmux (installed by `.ci/run`); without it the test says SKIPPED, and fails in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod signals_support;
mod tui_support;

use nix::sys::signal::Signal;
use signals_support::*;
use tui_support::{Tmux, tmux_available};

/// Start cadre in tmux on a workspace with the signal script (`extra` arguments after the
/// model), send `go`, wait until the three commands run, send `signal` to cadre and check
/// the aftermath. The screen at the end.
fn signal_stops_the_surface(name: &str, extra: &[&str], signal: Signal, code: i32) -> String {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let model = workspace(ws);
    let ws_arg = ws.display().to_string();
    let mut args = vec!["--workspace", &ws_arg, "--model", &model];
    args.extend(extra);
    let tmux = Tmux::start(
        name,
        &[
            ("XDG_CONFIG_HOME", ws.join("nocfg").display().to_string()),
            ("CADRE_MODEL", String::new()),
        ],
        &args,
    );
    tmux.wait_for("scripted:");
    tmux.text("go");
    tmux.keys(&["Enter"]);
    // The pane's shell runs cadre, then writes its exit status.
    let shell: i32 = tmux.format("#{pane_pid}").parse().unwrap();
    let cadre_pid = child_named(shell, "cadre");
    let pids = wait_for_the_commands(ws, cadre_pid);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(cadre_pid), signal).unwrap();
    assert_eq!(tmux.exit_code(), code, "{}", tmux.with_history());
    nothing_survives_and_the_tasks_are_cancelled(ws, &model, &pids, signal.as_str());
    assert_eq!(
        tmux.format("#{alternate_on}"),
        "0",
        "still on the alternate screen"
    );
    assert_eq!(
        tmux.format("#{mouse_any_flag}"),
        "0",
        "mouse reporting left on"
    );
    let screen = tmux.with_history();
    assert!(
        screen.contains(&format!("received {}", signal.as_str())),
        "{screen}"
    );
    assert!(screen.contains("saved — resume with"), "{screen}");
    screen
}

#[test]
fn sigterm_stops_the_full_screen_ui_cleanly() {
    if !tmux_available() {
        return;
    }
    signal_stops_the_surface("sig-tui-term", &[], Signal::SIGTERM, 143);
}

#[test]
fn sighup_stops_the_full_screen_ui_cleanly() {
    if !tmux_available() {
        return;
    }
    signal_stops_the_surface("sig-tui-hup", &[], Signal::SIGHUP, 129);
}

#[test]
fn sigterm_stops_the_line_repl_cleanly() {
    if !tmux_available() {
        return;
    }
    signal_stops_the_surface("sig-repl-term", &["--no-tui"], Signal::SIGTERM, 143);
}

#[test]
fn sighup_stops_the_line_repl_cleanly() {
    if !tmux_available() {
        return;
    }
    signal_stops_the_surface("sig-repl-hup", &["--no-tui"], Signal::SIGHUP, 129);
}
