//! `RemoteClient` against an agent built with the official A2A Python SDK (the fixture
//! `a2a_echo_server.py`, run on a free loopback port): streaming and polling, and a cancel
//! that reaches the SDK's task. Needs the venv of `.ci/run` (`$CADRE_A2A_VENV`, else
//! `target/a2a-venv`); without it the tests say SKIPPED, and fail under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_remote::RemoteClient;
use cadre_subagents::{RemoteExecutor, RemoteProtocol, RemoteRequest, RemoteSpec};
use cadre_types::{EndState, Event, EventEnvelope, EventSink};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn venv_python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = std::env::var_os("CADRE_A2A_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/a2a-venv"));
    let python = venv.join("bin/python");
    if python.exists() {
        return Some(python);
    }
    let msg = format!("a2a-sdk venv missing at {} (see .ci/run)", venv.display());
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("\n!!!!!!!! SKIPPED: {msg}\n");
    None
}

/// The SDK echo agent as a child process; killed when dropped.
struct SdkAgent {
    child: Child,
    url: String,
}

impl Drop for SdkAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn sdk_agent(py: &Path, flags: &[&str]) -> SdkAgent {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/a2a_echo_server.py");
    let child = Command::new(py)
        .arg(script)
        .arg(port.to_string())
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let agent = SdkAgent {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let card = format!("{}/.well-known/agent-card.json", agent.url);
    cadre_testkit::eventually(
        "the SDK agent to serve its card",
        Duration::from_secs(30),
        || async {
            reqwest::get(&card)
                .await
                .is_ok_and(|r| r.status().is_success())
        },
    )
    .await;
    agent
}

#[derive(Default)]
struct Collect(Mutex<Vec<EventEnvelope>>);
impl EventSink for Collect {
    fn emit(&self, e: EventEnvelope) {
        self.0.lock().unwrap().push(e);
    }
}

fn request(url: &str, prompt: &str) -> RemoteRequest {
    RemoteRequest {
        agent: "sdk".into(),
        spec: RemoteSpec {
            url: url.into(),
            headers: Default::default(),
            protocol: RemoteProtocol::Auto,
        },
        prompt: prompt.into(),
        task_id: format!("task_{}", uuid::Uuid::new_v4()),
        session_id: "sub-x".into(),
        context_id: None,
        on_remote_id: None,
        approvals: cadre_subagents::RemoteApprovals(std::sync::Arc::new(
            cadre_engine::NonInteractiveApprovals::new(false),
        )),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_streams_from_and_polls_an_sdk_agent() {
    let Some(py) = venv_python() else { return };
    let client = RemoteClient::new().unwrap();
    for flags in [&["--streaming"][..], &[][..]] {
        let agent = sdk_agent(&py, flags).await;
        let events = Arc::new(Collect::default());
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            client.run(
                request(&agent.url, "ping"),
                events.clone(),
                CancellationToken::new(),
            ),
        )
        .await
        .unwrap();
        assert_eq!(out.state, EndState::Completed, "{flags:?}: {out:?}");
        assert_eq!(out.output, "echo: ping", "{flags:?}");
        assert!(out.remote_task_id.is_some() && out.context_id.is_some());
        if flags.contains(&"--streaming") {
            let got = events.0.lock().unwrap().clone();
            assert!(
                got.iter()
                    .any(|e| matches!(&e.event, Event::TextDelta { text } if text == "echo: ping")),
                "{got:?}"
            );
            assert!(
                got.iter()
                    .any(|e| matches!(&e.event, Event::Notice { message } if message == "echoing")),
                "{got:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_reaches_the_sdk_agents_task() {
    let Some(py) = venv_python() else { return };
    let client = Arc::new(RemoteClient::new().unwrap());
    for flags in [&["--slow", "--streaming"][..], &["--slow"][..]] {
        let agent = sdk_agent(&py, flags).await;
        let cancel = CancellationToken::new();
        // Cancel once the agent has accepted the task (it then works for 30 s).
        let accepted = Arc::new(tokio::sync::Notify::new());
        let run = tokio::spawn({
            let client = client.clone();
            let cancel = cancel.clone();
            let mut req = request(&agent.url, "slowly");
            let accepted = accepted.clone();
            req.on_remote_id = Some(cadre_subagents::OnRemoteId::new(move |_| {
                accepted.notify_one();
            }));
            async move { client.run(req, Arc::new(Collect::default()), cancel).await }
        });
        tokio::time::timeout(Duration::from_secs(15), accepted.notified())
            .await
            .unwrap_or_else(|_| panic!("{flags:?}: the agent never accepted the task"));
        cancel.cancel();
        let out = tokio::time::timeout(Duration::from_secs(15), run)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(out.state, EndState::Cancelled, "{flags:?}: {out:?}");
        let id = out.remote_task_id.expect("the remote task is known");
        let v: Value = reqwest::Client::new()
            .post(format!("{}/", agent.url))
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            v["result"]["status"]["state"], "TASK_STATE_CANCELED",
            "{flags:?}: {v}"
        );
    }
}
