//! `cadre mcp serve`, driven by the official MCP Python SDK (`tests/fixtures/mcp_client.py`)
//! over stdio and streamable HTTP: `tools/list` offers `task` and the lifecycle tools,
//! `tools/call task` runs a scripted sub-agent and returns its answer (with progress
//! notifications), `agent_spawn` with `timeout_seconds: 0` then `task_output` works, a call
//! the client abandons cancels its child, the tasks are in `cadre tasks list`, and an
//! unauthenticated HTTP request gets 401.
//! Needs the venv of `.ci/run` (`target/mcp-venv`, or `$CADRE_MCP_VENV`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

fn python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = std::env::var_os("CADRE_MCP_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/mcp-venv"));
    let py = venv.join("bin/python");
    if py.exists() {
        return Some(py);
    }
    let msg = format!(
        "MCP Python SDK venv missing at {} (see .ci/run)",
        venv.display()
    );
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("\n!!!!!!!! SKIPPED: {msg}\n");
    None
}

fn driver() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_client.py")
}

const SCRIPT: &str = r#"
[[scripts]]
agent = "slow"
[[scripts.turns]]
delay_ms = 600000
text = "too late"

[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "list_dir", args = { path = "." } }]
[[scripts.turns]]
text = "worker says: {{user}}"
"#;

/// A workspace with a `worker` agent and the scripted model.
fn workspace() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre/agents")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/agents/worker.md"),
        "---\nname: worker\ndescription: Answers.\ntools: [list_dir]\n---\nYou answer.\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join(".cadre/agents/slow.md"),
        "---\nname: slow\ndescription: Takes its time.\ntools: []\n---\nYou wait.\n",
    )
    .unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    (dir, format!("scripted:{}", script.display()))
}

fn cadre(ws: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cadre").unwrap();
    cmd.arg("--workspace").arg(ws);
    cmd.env_remove("CADRE_MODEL");
    cmd.env("XDG_CONFIG_HOME", ws.join(".no-user-config"));
    cmd
}

fn check_session(out: &Value, ws: &Path, model: &str) {
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for t in [
        "task",
        "agent_spawn",
        "agent_send",
        "agent_list",
        "task_output",
        "task_cancel",
        "task_list",
    ] {
        assert!(tools.contains(&t), "{t} missing from {tools:?}");
    }
    assert_eq!(out["task"]["is_error"], false, "{out}");
    assert!(
        out["task"]["text"]
            .as_str()
            .unwrap()
            .contains("worker says: hello from python"),
        "{out}"
    );
    let progress: Vec<&str> = out["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    assert!(progress.contains(&"[worker] started"), "{progress:?}");
    assert!(
        progress
            .iter()
            .any(|p| p.starts_with("[worker] ▸ list_dir(")),
        "{progress:?}"
    );
    let spawn = out["spawn"]["text"].as_str().unwrap();
    assert!(spawn.contains("task_id:"), "{spawn}");
    let output = out["output"]["text"].as_str().unwrap();
    assert!(output.contains("worker says: second job"), "{output}");
    // The abandoned call's child was cancelled (it would otherwise wait ten minutes).
    let cancelled = out["cancelled"]["text"].as_str().unwrap();
    assert!(cancelled.contains("status: cancelled"), "{out}");

    // Both tasks went into the store.
    let listed = cadre(ws)
        .args(["--model", model, "tasks", "list", "--json"])
        .output()
        .unwrap();
    assert!(listed.status.success());
    let tasks: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let task_id = out["task_id"].as_str().unwrap();
    assert!(
        tasks
            .iter()
            .any(|t| t["task_id"] == task_id && t["status"] == "completed"),
        "{tasks:?}"
    );
    assert_eq!(
        tasks
            .iter()
            .filter(|t| t["agent_id"] == "worker" && t["parent_agent_id"] == "mcp")
            .count(),
        2,
        "{tasks:?}"
    );
    let slow = out["cancelled_task_id"].as_str().unwrap();
    assert!(
        tasks
            .iter()
            .any(|t| t["task_id"] == slow && t["status"] == "cancelled"),
        "{tasks:?}"
    );
}

#[test]
fn stdio_serves_task_and_the_lifecycle_tools_to_the_python_sdk() {
    let Some(py) = python() else { return };
    let (dir, model) = workspace();
    let out = std::process::Command::new(py)
        .arg(driver())
        .arg("stdio")
        .arg(env!("CARGO_BIN_EXE_cadre"))
        .arg(dir.path())
        .arg(&model)
        .env("XDG_CONFIG_HOME", dir.path().join(".no-user-config"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "driver failed: {stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_session(&result, dir.path(), &model);
}

/// `cadre mcp serve --http` on a free port, with a token; killed on drop.
struct HttpServe {
    child: std::process::Child,
    url: String,
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_serve(ws: &Path, model: &str, token: &str) -> HttpServe {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
        .arg("--workspace")
        .arg(ws)
        .args(["--model", model, "mcp", "serve", "--http", "127.0.0.1:0"])
        .env("CADRE_SERVE_TOKEN", token)
        .env("XDG_CONFIG_HOME", ws.join(".no-user-config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if let Some(rest) = line.split_once("streamable HTTP at ").map(|(_, r)| r) {
                let url = rest.split_whitespace().next().unwrap_or("").to_string();
                let _ = tx.send(url);
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("cadre mcp serve --http did not say where it listens");
    HttpServe { child, url }
}

#[tokio::test]
async fn http_serves_the_python_sdk_with_a_token_and_refuses_without_one() {
    let Some(py) = python() else { return };
    let (dir, model) = workspace();
    let server = http_serve(dir.path(), &model, "s3cret");

    let refused = reqwest::Client::new()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let wrong = reqwest::Client::new()
        .post(&server.url)
        .bearer_auth("nope")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    let out = tokio::process::Command::new(py)
        .arg(driver())
        .arg("http")
        .arg(&server.url)
        .arg("s3cret")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "driver failed: {stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_session(&result, dir.path(), &model);
}
