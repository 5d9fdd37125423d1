//! Session transcripts are written buffered (at turn boundaries); none of that may be lost:
//! after a normal run and after SIGTERM, every session file holds every record of its run,
//! and every tool call in it has its result.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_testkit::wait_until;
use nix::sys::signal::Signal;
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const WORKER: &str =
    "---\nname: worker\ndescription: Works.\nworkspace: {mode: shared}\n---\nYou work.\n";

fn cadre(ws: &Path, script: &str) -> Command {
    let path = ws.join("script.toml");
    std::fs::write(&path, script).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.arg("--workspace")
        .arg(ws)
        .arg("--model")
        .arg(format!("scripted:{}", path.display()));
    cmd.env_remove("CADRE_MODEL").env_remove("CADRE_STORE_URL");
    cmd.env("XDG_CONFIG_HOME", ws.join("nocfg"));
    cmd
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(ws.join(".cadre/agents/worker.md"), WORKER).unwrap();
    std::fs::write(
        ws.join(".cadre/config.toml"),
        "[permissions]\nmode = \"auto-approve\"\n",
    )
    .unwrap();
    dir
}

/// Every session file: (meta record, the other records), each line parsed.
fn transcripts(ws: &Path) -> Vec<(Value, Vec<Value>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(ws.join(".cadre/sessions")).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'), "{}: a cut last line", path.display());
        let mut records: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect();
        let meta = records.remove(0);
        assert_eq!(meta["kind"], "meta", "{}", path.display());
        out.push((meta, records));
    }
    out.sort_by_key(|(m, _)| m["agent"].as_str().unwrap_or_default().to_string());
    out
}

/// The messages of a transcript, as (role, the message).
fn messages(records: &[Value]) -> Vec<(String, Value)> {
    records
        .iter()
        .filter(|r| r["kind"] == "message")
        .map(|r| {
            let m = r["message"].clone();
            (m["role"].as_str().unwrap_or_default().to_string(), m)
        })
        .collect()
}

/// Every tool call of the transcript has its result after it.
fn assert_calls_answered(agent: &str, msgs: &[(String, Value)]) {
    let mut open = HashSet::new();
    for (role, m) in msgs {
        if role == "assistant" {
            for c in m["tool_calls"].as_array().into_iter().flatten() {
                open.insert(c["id"].as_str().unwrap().to_string());
            }
        } else if role == "tool" {
            assert!(
                open.remove(m["tool_call_id"].as_str().unwrap()),
                "{agent}: a result without its call: {m}"
            );
        }
    }
    assert!(open.is_empty(), "{agent}: calls without results: {open:?}");
}

#[test]
fn a_normal_run_leaves_every_transcript_complete() {
    let dir = workspace();
    let ws = dir.path();
    let out = cadre(
        ws,
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [
  { name = "task", args = { subagent_type = "worker", description = "w", prompt = "work" } },
  { name = "bash", args = { command = "echo main-ran" } },
]
[[scripts.turns]]
text = "all done"

[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { command = "echo worker-ran" } }]
[[scripts.turns]]
text = "worker done"
"#,
    )
    .args(["run", "--approval", "auto", "go"])
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = transcripts(ws);
    assert_eq!(t.len(), 2, "the main session and the worker's");
    for (meta, records) in &t {
        let agent = meta["agent"].as_str().unwrap();
        let msgs = messages(records);
        let roles: Vec<&str> = msgs.iter().map(|(r, _)| r.as_str()).collect();
        let expected: &[&str] = if agent == "main" {
            &["user", "assistant", "tool", "tool", "assistant"]
        } else {
            &["user", "assistant", "tool", "assistant"]
        };
        assert_eq!(roles, expected, "{agent}");
        let last = &msgs.last().unwrap().1;
        let want = if agent == "main" {
            "all done"
        } else {
            "worker done"
        };
        assert_eq!(last["content"], want, "{agent}");
        assert_calls_answered(agent, &msgs);
    }
}

#[test]
fn sigterm_leaves_every_transcript_complete() {
    let dir = workspace();
    let ws = dir.path();
    let child = cadre(
        ws,
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [
  { name = "task", args = { subagent_type = "worker", description = "bg", prompt = "sleep", background = true } },
  { name = "bash", args = { command = "echo main >> started; sleep 300", timeout_ms = 600000 } },
]
[[scripts.turns]]
text = "never"

[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { command = "echo worker >> started; sleep 300", timeout_ms = 600000 } }]
[[scripts.turns]]
text = "never"
"#,
    )
    .args(["run", "--approval", "auto", "go"])
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Both commands run: each session has records buffered since its last request.
    wait_until("both commands to start", Duration::from_secs(30), || {
        std::fs::read_to_string(ws.join("started"))
            .unwrap_or_default()
            .lines()
            .count()
            >= 2
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = transcripts(ws);
    assert_eq!(t.len(), 2, "the main session and the worker's");
    for (meta, records) in &t {
        let agent = meta["agent"].as_str().unwrap();
        let msgs = messages(records);
        let roles: Vec<&str> = msgs.iter().map(|(r, _)| r.as_str()).collect();
        let expected: &[&str] = if agent == "main" {
            &["user", "assistant", "tool", "tool"]
        } else {
            &["user", "assistant", "tool"]
        };
        assert_eq!(roles, expected, "{agent}: {records:?}");
        assert_calls_answered(agent, &msgs);
    }
}
