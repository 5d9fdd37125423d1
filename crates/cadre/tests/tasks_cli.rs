//! `cadre tasks` against the persisted store, across processes: listing, cross-process
//! cancel of a running child, and crash recovery (sweeper and restart).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cadre_testkit::wait::{wait_for, wait_until};

const SLOW_BACKGROUND: &str = r#"
[[scripts]]
agent = "main"
prompt_contains = "slow"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "sleeper", description = "sleepy job", prompt = "sleep", background = true } }]
[[scripts.turns]]
text = "waiting"
[[scripts.turns]]
text = "final: {{user}}"

[[scripts]]
agent = "main"
[[scripts.turns]]
text = "quick answer"

[[scripts]]
agent = "sleeper"
[[scripts.turns]]
delay_ms = 60000
text = "woke up"
[[scripts.turns]]
text = "should never be asked"
"#;

const SLEEPER: &str =
    "---\nname: sleeper\ndescription: Sleeps.\nworkspace: {mode: shared}\n---\nYou sleep.\n";

fn workspace(extra_config: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre/agents")).unwrap();
    std::fs::write(dir.path().join(".cadre/agents/sleeper.md"), SLEEPER).unwrap();
    std::fs::write(dir.path().join(".cadre/config.toml"), extra_config).unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SLOW_BACKGROUND).unwrap();
    (dir, format!("scripted:{}", script.display()))
}

fn cadre(ws: &Path, model: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.arg("--workspace").arg(ws).arg("--model").arg(model);
    cmd.env_remove("CADRE_MODEL").env_remove("CADRE_STORE_URL");
    cmd.env("XDG_CONFIG_HOME", ws.join("nocfg"));
    cmd
}

fn tasks_json(ws: &Path, model: &str) -> Vec<Value> {
    let out = cadre(ws, model)
        .args(["tasks", "list", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn wait_for_running(ws: &Path, model: &str) -> String {
    wait_for("a running task", Duration::from_secs(20), || {
        tasks_json(ws, model)
            .iter()
            .find(|t| t["status"] == "running")
            .map(|t| t["task_id"].as_str().unwrap().to_string())
    })
}

fn spawn_slow(ws: &Path, model: &str) -> Child {
    cadre(ws, model)
        .args(["run", "--output", "jsonl", "slow job"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_cancel_from_another_process_stops_the_child_within_a_second() {
    let (dir, model) = workspace("");
    let ws = dir.path();
    let mut run = spawn_slow(ws, &model);
    let id = wait_for_running(ws, &model);
    let asked = Instant::now();
    let out = cadre(ws, &model)
        .args(["tasks", "cancel", &id])
        .output()
        .unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(said.contains(&format!("{id}: cancelled")), "{said}");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "took {:?}",
        asked.elapsed()
    );
    // The parent got the cancellation delivered and finished on its own.
    let status = run.wait().unwrap();
    assert!(status.success());
    let task = tasks_json(ws, &model)
        .into_iter()
        .find(|t| t["task_id"] == id.as_str())
        .unwrap();
    assert_eq!(task["status"], "cancelled");
    assert_eq!(task["complete"], false, "{task}");
    assert_eq!(task["reason"], "cancelled", "{task}");
    // The child never made a second model call: its transcript has no assistant reply.
    let child = task["child_session_id"].as_str().unwrap();
    let transcript =
        std::fs::read_to_string(ws.join(format!(".cadre/sessions/{child}.jsonl"))).unwrap();
    assert!(
        !transcript.contains("\"role\":\"assistant\""),
        "{transcript}"
    );
}

#[test]
fn a_killed_owner_is_swept_after_the_orphan_timeout_and_failed_on_restart() {
    let (dir, model) = workspace("[store]\norphan_timeout_secs = 2\nheartbeat_secs = 1\n");
    let ws = dir.path();

    // 1. Killed owner, then the sweeper.
    let mut run = spawn_slow(ws, &model);
    let swept = wait_for_running(ws, &model);
    run.kill().unwrap(); // SIGKILL
    run.wait().unwrap();
    let all = tasks_json(ws, &model);
    assert_eq!(all.len(), 1, "the record is intact: {all:?}");
    // The sweeper fails the task once its heartbeat is older than the orphan timeout; ask it
    // again until it does rather than guessing when that is.
    wait_until(
        "the sweeper to fail the killed owner's task",
        Duration::from_secs(20),
        || {
            let out = cadre(ws, &model).args(["tasks", "sweep"]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).contains(&format!("{swept}: failed"))
        },
    );
    let t = tasks_json(ws, &model)
        .into_iter()
        .find(|t| t["task_id"] == swept.as_str())
        .unwrap();
    assert_eq!(t["status"], "failed");
    assert!(
        t["error"]
            .as_str()
            .unwrap()
            .starts_with("executor lost: no heartbeat since"),
        "{t}"
    );

    // 2. Killed owner, then a restart of the same node fails its tasks at once.
    let mut run = spawn_slow(ws, &model);
    let died = wait_for_running(ws, &model);
    run.kill().unwrap();
    run.wait().unwrap();
    let out = cadre(ws, &model).args(["run", "quick"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = tasks_json(ws, &model)
        .into_iter()
        .find(|t| t["task_id"] == died.as_str())
        .unwrap();
    assert_eq!(t["status"], "failed");
    assert!(
        t["error"].as_str().unwrap().contains("executor died"),
        "{t}"
    );
    assert!(ws.join(".cadre/cadre.db").exists());
}

#[test]
fn the_list_filters_and_show_work() {
    let (dir, model) = workspace("");
    let ws = dir.path();
    let out = cadre(ws, &model).args(["run", "quick"]).output().unwrap();
    assert!(out.status.success());
    assert!(tasks_json(ws, &model).is_empty());
    let out = cadre(ws, &model)
        .args(["tasks", "show", "task_nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no task task_nope"));
    let out = cadre(ws, &model)
        .args(["tasks", "list", "--status", "bogus"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn detach_returns_without_waiting_and_leaves_honest_records() {
    let (dir, model) = workspace("");
    let ws = dir.path();
    let started = Instant::now();
    let out = cadre(ws, &model)
        .args(["run", "--detach", "slow job"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "did not wait for the 60 s child"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 background task(s) still running were cancelled at exit"),
        "{stderr}"
    );
    let tasks = tasks_json(ws, &model);
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0]["status"], "cancelled", "{tasks:?}");
}

#[test]
fn tasks_show_the_tokens_and_cost_of_each_sub_agent() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(
        ws.join(".cadre/agents/counter.md"),
        "---\nname: counter\ndescription: Counts.\nworkspace: {mode: shared}\n---\nYou count.\n",
    )
    .unwrap();
    let script = ws.join("script.toml");
    std::fs::write(
        &script,
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "counter", description = "count", prompt = "count" } }]
[[scripts.turns]]
text = "done"

[[scripts]]
agent = "counter"
[[scripts.turns]]
text = "42"
usage = { input_tokens = 1000, output_tokens = 100, cached_input_tokens = 500 }
"#,
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    // A price for the scripted model: $1 in, $0.10 cached, $2 out per million.
    std::fs::write(
        ws.join(".cadre/config.toml"),
        format!("[models.prices.{model:?}]\ninput = 1.0\ncached_input = 0.1\noutput = 2.0\n"),
    )
    .unwrap();
    let out = cadre(ws, &model).args(["run", "go"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tasks = tasks_json(ws, &model);
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    // 500 uncached × $1 + 500 cached × $0.10 + 100 out × $2, per million.
    let want = serde_json::json!({"input_tokens": 1000, "output_tokens": 100,
        "cached_input_tokens": 500, "cache_write_tokens": 0, "cost_usd": 0.00075});
    assert_eq!(tasks[0]["usage"], want);
    let id = tasks[0]["task_id"].as_str().unwrap();
    let out = cadre(ws, &model)
        .args(["tasks", "show", "--json", id])
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["usage"], want);
    let out = cadre(ws, &model)
        .args(["tasks", "show", id])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(
            "tokens          1100 (in 1000, cached 500, out 100)\ncost            $0.0008\n"
        ),
        "{shown}"
    );
}

/// Runs `cadre run quick` against a PostgreSQL URL at `port` on 127.0.0.1 and returns its
/// stderr, failing the test if the process has not ended by the deadline.
fn run_against_postgres_at(port: u16, extra_config: &str) -> String {
    let (dir, model) = workspace(extra_config);
    let mut child = cadre(dir.path(), &model)
        .env(
            "CADRE_STORE_URL",
            format!("postgres://cadre@127.0.0.1:{port}/cadre"),
        )
        .args(["run", "quick"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_for(
        "cadre to give up opening the store",
        Duration::from_secs(20),
        || child.try_wait().unwrap(),
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    stderr
}

#[test]
fn an_unreachable_store_is_named_with_what_was_reached() {
    // A closed port: the connection is refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let stderr = run_against_postgres_at(port, "");
    assert!(
        stderr.contains(&format!(
            "store unreachable: connection refused at 127.0.0.1:{port}"
        )),
        "{stderr}"
    );

    // A port that accepts and never answers: given up after connect_timeout_secs.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let stderr = run_against_postgres_at(port, "[store]\nconnect_timeout_secs = 1\n");
    assert!(
        stderr.contains(&format!(
            "store unreachable: no answer within 1s at 127.0.0.1:{port}"
        )),
        "{stderr}"
    );
    drop(silent);
}

#[test]
fn a_running_task_whose_cost_is_not_known_yet_does_not_show_zero_dollars() {
    let (dir, model) = workspace("");
    let ws = dir.path();
    let mut run = spawn_slow(ws, &model);
    let id = wait_for_running(ws, &model);
    let out = cadre(ws, &model)
        .args(["tasks", "show", &id])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    let json = tasks_json(ws, &model)
        .into_iter()
        .find(|t| t["task_id"] == id.as_str())
        .unwrap();
    let _ = cadre(ws, &model).args(["tasks", "cancel", &id]).output();
    let _ = run.wait();
    assert!(out.status.success(), "{shown}");
    let cost = shown
        .lines()
        .find(|l| l.starts_with("cost "))
        .unwrap_or_else(|| panic!("a cost line: {shown}"));
    assert!(!cost.contains('$'), "{cost}");
    assert!(cost.ends_with('—'), "{cost}");
    assert!(json["usage"]["cost_usd"].is_null(), "{json}");
}
