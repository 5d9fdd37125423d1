//! No process cadre starts for an agent outlives it: SIGKILL of `cadre run` (no handler can
//! run) leaves no command of its shells and no stdio MCP server (nor its helpers) alive,
//! and a second SIGTERM right after the first kills every group at once and still leaves
//! no task `running`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod signals_support;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;
use signals_support::*;
use std::process::Stdio;

fn start(ws: &std::path::Path) -> (std::process::Child, Vec<i32>, String) {
    let model = workspace(ws);
    let child = cadre(ws, &model)
        .args(["run", "--approval", "auto", "--output", "jsonl", "go"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = wait_for_the_commands(ws, child.id() as i32);
    (child, pids, model)
}

#[test]
fn sigkill_of_cadre_leaves_no_command_alive() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, pids, _) = start(dir.path());
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    for pid in &pids {
        wait_until(&format!("process {pid} survived SIGKILL of cadre"), || {
            !alive(*pid)
        });
    }
}

#[test]
fn a_double_sigterm_leaves_no_process_and_no_running_task() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let (mut child, pids, model) = start(ws);
    let pid = Pid::from_raw(child.id() as i32);
    kill(pid, Signal::SIGTERM).unwrap();
    kill(pid, Signal::SIGTERM).unwrap();
    child.wait().unwrap();
    for p in &pids {
        wait_until(&format!("process {p} survived two SIGTERMs"), || !alive(*p));
    }
    let listed = cadre(ws, &model)
        .args(["tasks", "list", "--json"])
        .output()
        .unwrap();
    assert!(listed.status.success());
    let tasks: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    for t in &tasks {
        assert_ne!(t["status"], "running", "{t}");
        assert_ne!(t["status"], "queued", "{t}");
    }
}

#[test]
fn sigkill_of_cadre_leaves_no_stdio_mcp_server_alive() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let writer = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/writer_mcp.py")
        .canonicalize()
        .unwrap();
    let pidfile = ws.join("server-pids");
    // Started with the session; its helper `sleep` outlives the server's stdin closing, so
    // only the group's death ends it.
    std::fs::write(
        ws.join(".mcp.json"),
        format!(
            r#"{{"mcpServers": {{"writer": {{"command": "python3", "args": [{:?}, {:?}], "startup": "eager"}}}}}}"#,
            writer.display().to_string(),
            pidfile.display().to_string()
        ),
    )
    .unwrap();
    let (mut child, _, _) = start(ws);
    wait_until("the MCP server never started", || pidfile.exists());
    // The numbers in the file are the server's own view (a sandboxed server has a PID
    // namespace of its own): its processes are found below cadre instead.
    let server: Vec<String> = std::fs::read_to_string(&pidfile)
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(server.len(), 2, "{server:?}");
    let pids = descendants(child.id() as i32);
    let commands = |name: &str| {
        pids.iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(name))
            })
            .count()
    };
    assert!(commands("writer_mcp.py") >= 1, "{pids:?}");
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    for pid in &pids {
        wait_until(&format!("process {pid} survived SIGKILL of cadre"), || {
            !alive(*pid)
        });
    }
}
