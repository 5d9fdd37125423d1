//! Fixtures for the server and client tests: a harness whose agents run on the scripted
//! model (no network, zero latency), a server on a random loopback port, and HTTP helpers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use cadre_remote::{ServeOptions, Server};
use cadre_subagents::{AgentDefinition, Harness};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::oneshot;

/// The script: `echo` answers in one turn (streamed, with the prompt), `chatty` thinks aloud
/// and calls a tool first, `broken` fails, `slow` waits 30 s before answering (cancellation
/// cuts it short), `asker` runs `bash` (which needs approval: it writes `ran.txt`) and
/// answers with the tool's result, `boss` delegates to `asker`.
pub const SCRIPT: &str = r#"
[[scripts]]
agent = "echo"
[[scripts.turns]]
text = "echo: {{user}}"
[[scripts.turns]]
text = "again: {{user}}"
[[scripts.turns]]
text = "third: {{user}}"

[[scripts]]
agent = "chatty"
[[scripts.turns]]
text = "Let me look."
tool_calls = [{ name = "list_dir", args = { path = "." } }]
[[scripts.turns]]
text = "The answer is 42."

[[scripts]]
agent = "broken"
[[scripts.turns]]
error = "the model exploded"

[[scripts]]
agent = "slow"
[[scripts.turns]]
delay_ms = 30000
text = "too late"

[[scripts]]
agent = "asker"
[[scripts.turns]]
text = "I need to run something."
tool_calls = [{ name = "bash", args = { command = "echo ran | tee ran.txt" } }]
[[scripts.turns]]
text = "done: {{tool_results}}"

[[scripts]]
agent = "boss"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "asker", description = "run it", prompt = "run it" } }]
[[scripts.turns]]
text = "boss: {{tool_results}}"
"#;

/// A workspace with the script and a harness serving `echo`, `chatty` and `slow`.
pub struct Node {
    pub dir: tempfile::TempDir,
    pub harness: Harness,
}

pub fn node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let mut b = Harness::builder()
        .model(format!("scripted:{}", script.display()))
        .workspace(dir.path())
        .without_agent_files()
        .user_agents_dir(None)
        .in_memory_sessions()
        .runtime_config(|rc| rc.max_concurrent = 2048);
    for (name, desc) in [
        ("echo", "Echoes the message."),
        ("chatty", "Looks around, then answers."),
        ("slow", "Takes its time."),
        ("broken", "Always fails."),
        ("asker", "Runs a command."),
        ("boss", "Has asker run a command."),
    ] {
        let mut d = AgentDefinition::new(name, desc);
        d.prompt = format!("You are {name}.");
        d.workspace.mode = cadre_subagents::WorkspaceMode::Shared;
        d.can_delegate = name == "boss";
        b = b.subagent(d);
    }
    let harness = b.build().unwrap();
    Node { dir, harness }
}

pub fn options() -> ServeOptions {
    ServeOptions {
        default_agent: Some("echo".into()),
        ..ServeOptions::default()
    }
}

/// A running server; stops (gracefully) when `stop` is called or the value is dropped.
pub struct Running {
    pub addr: SocketAddr,
    /// The server's parent session (its tasks are children of it in the tracker).
    pub session: String,
    stop: Option<oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<Result<(), cadre_remote::ServeError>>,
}

impl Running {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Signal shutdown and wait for the server to end.
    pub async fn stop(mut self) -> Result<(), cadre_remote::ServeError> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        tokio::time::timeout(Duration::from_secs(30), &mut self.task)
            .await
            .expect("server stopped in time")
            .unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

pub async fn serve(node: &Node, opts: ServeOptions) -> Running {
    let server = Server::new(
        node.harness.runtime().clone(),
        &node.harness.agent().config().model.spec,
        opts,
    )
    .unwrap();
    let session = server.session_id().to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(listener, async move {
        let _ = rx.await;
    }));
    Running {
        addr,
        session,
        stop: Some(tx),
        task,
    }
}

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// POST a JSON-RPC call; returns the HTTP status and the parsed body.
pub async fn rpc(url: &str, method: &str, params: Value) -> (u16, Value) {
    rpc_with(&http(), url, None, method, params).await
}

pub async fn rpc_with(
    c: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> (u16, Value) {
    let mut rb = c.post(format!("{url}/")).json(&json!({
        "jsonrpc": "2.0", "id": 1, "method": method, "params": params,
    }));
    // As the SDKs do: v1.0 clients name their version, v0.3 clients send no header.
    if !method.contains('/') {
        rb = rb.header("A2A-Version", "1.0");
    }
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    let resp = rb.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A v1.0 user message.
pub fn message(text: &str) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// Whether `cond` comes to hold within `secs` seconds (polled, on tokio's clock).
pub async fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let within = Duration::from_secs(secs);
    cadre_testkit::poll_some(within, || {
        let holds = cond();
        async move { holds.then_some(()) }
    })
    .await
    .is_some()
}

/// [`eventually`] for a condition that reads the task store.
pub async fn eventually_async<F, Fut>(secs: u64, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let within = Duration::from_secs(secs);
    cadre_testkit::poll_some(within, || {
        let holds = cond();
        async move { holds.await.then_some(()) }
    })
    .await
    .is_some()
}

/// How many tasks the server has started (the task store holds them all).
pub async fn task_count(node: &Node, srv: &Running) -> usize {
    node.harness.runtime().tasks_of(&srv.session).await.len()
}
