//! `cadre run` end to end on a budget stop with eight children in flight, against a mock
//! OpenAI server that counts the tokens it bills: the run's `done.usage` and the task
//! records carry every billed token, every call the mock answered is reported, and no child
//! starts a call once the stop is reported.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_testkit::{MockServer, OpenAiStream, RecordedRequest};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const KEY_VAR: &str = "CADRE_BUDGET_STOP_TEST_KEY";
const CHILDREN: usize = 8;
const PER_CHILD_CALL: u64 = 1000;
const MAIN_CALL: u64 = 10;
const MAX_TOKENS: u64 = 3500;

/// The child a request is for (its system prompt says `You are cN.`), none for main.
fn child_of(r: &RecordedRequest) -> Option<usize> {
    let body = r.body.to_string();
    (0..CHILDREN).find(|n| body.contains(&format!("You are c{n}.")))
}

fn has_tool_results(r: &RecordedRequest) -> bool {
    r.body["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
}

/// Main delegates to all eight children in one reply, then answers; each child lists the
/// directory forever, every reply after its own latency. Each reply's tokens are billed
/// when the mock answers the request.
fn responder(billed: Arc<AtomicU64>) -> cadre_testkit::Responder {
    Arc::new(move |r: &RecordedRequest| match child_of(r) {
        Some(n) => {
            billed.fetch_add(PER_CHILD_CALL, Ordering::SeqCst);
            OpenAiStream::new()
                .role()
                .tool_call(0, &format!("l{n}"), "list_dir", r#"{"path":"."}"#)
                .finish("tool_calls")
                .usage(PER_CHILD_CALL, 0, 0)
                .done()
                .into_reply()
                .delayed(Duration::from_millis(40 * (n as u64 + 1)))
        }
        None => {
            billed.fetch_add(MAIN_CALL, Ordering::SeqCst);
            let mut s = OpenAiStream::new().role();
            if has_tool_results(r) {
                s = s.text("main done").finish("stop");
            } else {
                for n in 0..CHILDREN {
                    let args = format!(r#"{{"subagent_type":"c{n}","prompt":"work {n}"}}"#);
                    s = s.tool_call(n, &format!("t{n}"), "task", &args);
                }
                s = s.finish("tool_calls");
            }
            s.usage(MAIN_CALL, 0, 0).done().into_reply()
        }
    })
}

fn workspace(mock: &MockServer) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join(".cadre/agents");
    std::fs::create_dir_all(&agents).unwrap();
    for n in 0..CHILDREN {
        std::fs::write(
            agents.join(format!("c{n}.md")),
            format!(
                "---\nname: c{n}\ndescription: Child {n}.\nworkspace: {{mode: shared}}\n---\nYou are c{n}.\n"
            ),
        )
        .unwrap();
    }
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        format!(
            "[providers.openai]\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\
             [limits]\nmax_tokens = {MAX_TOKENS}\n",
            mock.openai_base_url()
        ),
    )
    .unwrap();
    dir
}

fn cadre(ws: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.env_remove("CADRE_MODEL")
        .env_remove("CADRE_STORE_URL")
        .env("XDG_CONFIG_HOME", ws.join("nocfg"))
        .env(KEY_VAR, "sk-test")
        .arg("--workspace")
        .arg(ws)
        .arg("--model")
        .arg("openai:gpt-4o-mini");
    cmd
}

fn total(v: &Value) -> u64 {
    v["input_tokens"].as_u64().unwrap() + v["output_tokens"].as_u64().unwrap()
}

/// `cadre run --output jsonl go` in `ws`: its output, its events, and when the usage report
/// that took the reported total to the limit was read.
fn run_jsonl(ws: &Path) -> (std::process::Output, Vec<Value>, Option<Instant>) {
    let mut child = cadre(ws)
        .args(["run", "--output", "jsonl", "go"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (mut events, mut spent, mut stop_seen) = (Vec::new(), 0, None);
    for line in BufReader::new(stdout).lines() {
        let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if event["type"] == "usage" {
            spent += total(&event["usage"]);
            if spent >= MAX_TOKENS && stop_seen.is_none() {
                stop_seen = Some(Instant::now());
            }
        }
        events.push(event);
    }
    (child.wait_with_output().unwrap(), events, stop_seen)
}

#[tokio::test(flavor = "multi_thread")]
async fn eight_children_crossing_max_tokens_report_every_billed_token() {
    let mock = MockServer::start().await.unwrap();
    let billed = Arc::new(AtomicU64::new(0));
    mock.set_responder(responder(billed.clone()));
    let dir = workspace(&mock);
    let ws = dir.path().to_path_buf();
    let (out, events, stop_seen) = tokio::task::spawn_blocking(move || run_jsonl(&ws))
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["reason"], "budget", "{done}");
    let billed = billed.load(Ordering::SeqCst);
    assert!(billed > MAX_TOKENS, "the budget was crossed: {billed}");
    assert_eq!(
        total(&done["usage"]),
        billed,
        "done.usage is what was billed"
    );
    // Every call a child made was answered and reported: one usage event per request.
    let requests = mock.requests();
    for n in 0..CHILDREN {
        let asked = requests.iter().filter(|r| child_of(r) == Some(n)).count();
        let reported = events
            .iter()
            .filter(|e| e["type"] == "usage" && e["subagent"] == format!("c{n}").as_str())
            .count();
        assert_eq!(reported, asked, "c{n}: calls reported vs made");
    }
    // The stop is the usage report that takes the run's total to the limit. A call admitted
    // before it may reach the mock a moment after (a request on its way), so a child has at
    // most that one request arriving after the stop was seen; a call started after the
    // stop would be a second (each child's calls follow one another).
    let stop_seen = stop_seen.expect("a usage report crossed the limit");
    for n in 0..CHILDREN {
        let late = requests
            .iter()
            .filter(|r| child_of(r) == Some(n) && r.received_at > stop_seen)
            .count();
        assert!(late <= 1, "c{n} started {late} calls after the stop");
    }
    // The task records carry the children's part of it.
    let list = cadre(dir.path())
        .args(["tasks", "list", "--json"])
        .output()
        .unwrap();
    let tasks: Vec<Value> = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(tasks.len(), CHILDREN, "{tasks:?}");
    let in_tasks: u64 = tasks.iter().map(|t| total(&t["usage"])).sum();
    let main_calls = requests.iter().filter(|r| child_of(r).is_none()).count() as u64;
    assert_eq!(in_tasks + main_calls * MAIN_CALL, billed, "{tasks:?}");
}
