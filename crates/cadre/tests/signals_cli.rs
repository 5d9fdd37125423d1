//! SIGTERM and SIGHUP stop `cadre run` the way Ctrl-C does: the running turn is cancelled,
//! every tool's process group is killed, the background tasks end `cancelled` in the store
//! with the signal as their reason, and the exit code is 128 + the signal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use nix::sys::signal::Signal;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The main agent starts two background children, then a foreground command; each
/// child starts a command of its own. Every shell writes its PID and its `sleep`'s.
const SCRIPT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [
  { name = "task", args = { subagent_type = "sleeper", description = "one", prompt = "sleep", background = true } },
  { name = "task", args = { subagent_type = "sleeper", description = "two", prompt = "sleep", background = true } },
  { name = "bash", args = { command = "sleep 300 & echo $$ $! >> pids; wait", timeout_ms = 600000 } },
]
[[scripts.turns]]
text = "never"

[[scripts]]
agent = "sleeper"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { command = "sleep 300 & echo $$ $! >> pids; wait", timeout_ms = 600000 } }]
[[scripts.turns]]
text = "never"
"#;

const SLEEPER: &str =
    "---\nname: sleeper\ndescription: Sleeps.\nworkspace: {mode: shared}\n---\nYou sleep.\n";

/// Longest wait for anything here; the test fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(30);

fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// Poll `done` until it holds, failing after [`DEADLINE`] with `what`.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < DEADLINE, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn cadre(ws: &Path, model: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.arg("--workspace").arg(ws).arg("--model").arg(model);
    cmd.env_remove("CADRE_MODEL").env_remove("CADRE_STORE_URL");
    cmd.env("XDG_CONFIG_HOME", ws.join("nocfg"));
    cmd
}

fn pids(ws: &Path) -> Vec<i32> {
    std::fs::read_to_string(ws.join("pids"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// Run the script, send `signal` once all three commands run, and check the aftermath.
fn signal_stops_the_run_cleanly(signal: Signal, code: i32) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(ws.join(".cadre/agents/sleeper.md"), SLEEPER).unwrap();
    // Background children ask for no approval (they could not get one headless).
    std::fs::write(
        ws.join(".cadre/config.toml"),
        "[permissions]\nmode = \"auto-approve\"\n",
    )
    .unwrap();
    let script = ws.join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let model = format!("scripted:{}", script.display());
    let child = cadre(ws, &model)
        .args(["run", "--approval", "auto", "--output", "jsonl", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Three shells, each with its sleep.
    wait_until("the three commands never started", || pids(ws).len() == 6);
    let pids = pids(ws);
    assert!(pids.iter().all(|p| alive(*p)));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(
        stderr.contains(&format!("received {}", signal.as_str())),
        "{stderr}"
    );
    for pid in &pids {
        wait_until(&format!("process {pid} survived {signal}"), || !alive(*pid));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let done: Value = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "done" && e["agent"] == "main")
        .expect("the main run's done event");
    assert_eq!(done["state"], "cancelled", "{done}");

    let listed = cadre(ws, &model)
        .args(["tasks", "list", "--json"])
        .output()
        .unwrap();
    assert!(listed.status.success());
    let tasks: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    for t in &tasks {
        assert_eq!(t["status"], "cancelled", "{t}");
        assert_eq!(
            t["error"],
            format!("cadre received {}", signal.as_str()),
            "{t}"
        );
    }
}

#[test]
fn sigterm_cancels_the_turn_kills_every_command_and_records_the_tasks_cancelled() {
    signal_stops_the_run_cleanly(Signal::SIGTERM, 143);
}

#[test]
fn sighup_does_the_same_with_exit_code_129() {
    signal_stops_the_run_cleanly(Signal::SIGHUP, 129);
}
