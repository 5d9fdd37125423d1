//! `cadre run` end to end on a budget stop with eight children in flight, against a mock
//! OpenAI server that counts the tokens it bills: the run's `done.usage` and the task
//! records carry every billed token, and every call the mock answered is reported.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_testkit::{MockServer, OpenAiStream, RecordedRequest};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const KEY_VAR: &str = "CADRE_BUDGET_STOP_TEST_KEY";
const CHILDREN: usize = 8;
const PER_CHILD_CALL: u64 = 1000;
const MAIN_CALL: u64 = 10;

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
             [limits]\nmax_tokens = 3500\n",
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

#[tokio::test(flavor = "multi_thread")]
async fn eight_children_crossing_max_tokens_report_every_billed_token() {
    let mock = MockServer::start().await.unwrap();
    let billed = Arc::new(AtomicU64::new(0));
    mock.set_responder(responder(billed.clone()));
    let dir = workspace(&mock);
    let ws = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        cadre(&ws)
            .args(["run", "--output", "jsonl", "go"])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["reason"], "budget", "{done}");
    let billed = billed.load(Ordering::SeqCst);
    assert!(billed > 3500, "the budget was crossed: {billed}");
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
