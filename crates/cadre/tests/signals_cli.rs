//! SIGTERM and SIGHUP stop `cadre run` the way Ctrl-C does: the running turn is cancelled,
//! every tool's process group is killed, the background tasks end `cancelled` in the store
//! with the signal as their reason, and the exit code is 128 + the signal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod signals_support;

use nix::sys::signal::Signal;
use serde_json::Value;
use signals_support::*;
use std::process::Stdio;

/// Run the script, send `signal` once all three commands run, and check the aftermath.
fn signal_stops_the_run_cleanly(signal: Signal, code: i32) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let model = workspace(ws);
    let child = cadre(ws, &model)
        .args(["run", "--approval", "auto", "--output", "jsonl", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Three shells, each with its sleep.
    let pids = wait_for_the_commands(ws, child.id() as i32);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(
        stderr.contains(&format!("received {}", signal.as_str())),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let done: Value = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "done" && e["agent"] == "main")
        .expect("the main run's done event");
    assert_eq!(done["state"], "cancelled", "{done}");

    nothing_survives_and_the_tasks_are_cancelled(ws, &model, &pids, signal.as_str());
}

#[test]
fn sigterm_cancels_the_turn_kills_every_command_and_records_the_tasks_cancelled() {
    signal_stops_the_run_cleanly(Signal::SIGTERM, 143);
}

#[test]
fn sighup_does_the_same_with_exit_code_129() {
    signal_stops_the_run_cleanly(Signal::SIGHUP, 129);
}
