//! Fixtures for the MCP client tests: the reference server (`server-everything`, installed
//! by `.ci/run` under `target/mcp-npm`, or `$CADRE_MCP_EVERYTHING`), the Python SDK venv
//! (`target/mcp-venv`, or `$CADRE_MCP_VENV`) with its fixture server, a recording scripted
//! model, an event collector and a harness wired with MCP tools. Without the installs the
//! tests say SKIPPED, and fail under `CI=true`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use cadre_llm::scripted::{ScriptFile, ScriptedProvider};
use cadre_llm::{ModelRequest, ModelStream, Provider};
use cadre_mcp::{McpServers, ServerEntry};
use cadre_subagents::Harness;
use cadre_tools::{ApprovalHandler, RunContext, ToolContext, ToolRegistry, Workspace};
use cadre_types::{ApprovalDecision, ApprovalRequest, Event, EventEnvelope, EventSink};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn missing(msg: String) {
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("\n!!!!!!!! SKIPPED: {msg}\n");
}

/// `dist/index.js` of `@modelcontextprotocol/server-everything`.
pub fn everything() -> Option<PathBuf> {
    let path = std::env::var_os("CADRE_MCP_EVERYTHING")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            root().join(
                "target/mcp-npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            )
        });
    if path.exists() {
        return Some(path);
    }
    missing(format!(
        "server-everything missing at {} (see .ci/run)",
        path.display()
    ));
    None
}

/// The Python of the MCP SDK venv.
pub fn python() -> Option<PathBuf> {
    let venv = std::env::var_os("CADRE_MCP_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/mcp-venv"));
    let py = venv.join("bin/python");
    if py.exists() {
        return Some(py);
    }
    missing(format!(
        "MCP Python SDK venv missing at {} (see .ci/run)",
        venv.display()
    ));
    None
}

/// The Python fixture server script.
pub fn py_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/py_server.py")
}

/// A stdio entry for `command args...`.
pub fn stdio_entry(command: &Path, args: &[&str]) -> ServerEntry {
    ServerEntry {
        command: Some(command.display().to_string()),
        args: args.iter().map(std::string::ToString::to_string).collect(),
        ..ServerEntry::default()
    }
}

/// The everything server over stdio, as server `everything`.
pub fn everything_stdio(index: &Path) -> (String, ServerEntry, String) {
    (
        "everything".into(),
        stdio_entry(Path::new("node"), &[&index.display().to_string(), "stdio"]),
        "test".into(),
    )
}

/// The everything server listening on a free loopback port (streamable HTTP); killed on drop.
pub struct HttpEverything {
    child: std::process::Child,
    pub url: String,
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start it and wait until it says it listens.
pub fn http_everything(index: &Path) -> HttpEverything {
    use std::io::BufRead;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = std::process::Command::new("node")
        .arg(index)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if line.contains("listening on port") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("server-everything did not start listening");
    HttpEverything {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

/// Approves everything.
pub struct AllowAll;

#[async_trait::async_trait]
impl ApprovalHandler for AllowAll {
    async fn decide(&self, _request: ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::AllowOnce
    }
}

/// Collects events and wakes waiters.
#[derive(Default)]
pub struct Collect {
    pub events: Mutex<Vec<EventEnvelope>>,
    notify: tokio::sync::Notify,
}

impl EventSink for Collect {
    fn emit(&self, event: EventEnvelope) {
        self.events.lock().unwrap().push(event);
        self.notify.notify_waiters();
    }
}

impl Collect {
    /// Notices seen so far.
    pub fn notices(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match &e.event {
                Event::Notice { message } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }

    /// Wait (up to 60 s) until `pred` holds for the events.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&[EventEnvelope]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let notified = self.notify.notified();
            if pred(&self.events.lock().unwrap()) {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "timed out waiting for {what}");
            let _ = tokio::time::timeout(left.min(Duration::from_millis(200)), notified).await;
        }
    }
}

/// A context for calling a tool directly.
pub fn ctx(root: &Path, events: Arc<dyn EventSink>) -> ToolContext {
    ToolContext {
        hidden: Default::default(),
        call_id: "call-1".into(),
        workspace: Arc::new(Workspace::new(root).unwrap()),
        cancel: CancellationToken::new(),
        run: Arc::new(RunContext {
            session_id: "s-test".into(),
            agent: "main".into(),
            model: "rec:test".into(),
            task_id: None,
            user_id: None,
            parent_session_id: None,
            depth: 0,
            tool_grant: cadre_tools::ToolGrant::unrestricted(),
            budget: cadre_tools::Budget::unlimited(),
            trace_id: "trace".into(),
            events,
            approvals: Arc::new(AllowAll),
        }),
        tools: Arc::new(ToolRegistry::new()),
    }
}

/// A scripted model that records every request.
pub struct Recording {
    inner: ScriptedProvider,
    pub requests: Mutex<Vec<ModelRequest>>,
}

impl Recording {
    /// From a script in TOML.
    pub fn new(script: &str) -> Arc<Self> {
        let file: ScriptFile = toml::from_str(script).unwrap();
        Arc::new(Self {
            inner: ScriptedProvider::new(file),
            requests: Mutex::new(Vec::new()),
        })
    }

    /// Requests of `agent`.
    pub fn of(&self, agent: &str) -> Vec<ModelRequest> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.metadata.agent == agent)
            .cloned()
            .collect()
    }
}

impl Provider for Recording {
    fn name(&self) -> &str {
        "rec"
    }
    fn stream(&self, request: ModelRequest) -> ModelStream {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.stream(request)
    }
}

/// Start `servers` (asserting they all start) and build a harness in `ws` with `defs`, whose
/// tools are the built-ins plus the servers' tools, on the recording model, permissions
/// bypassed.
pub async fn harness(
    ws: &Path,
    servers: &McpServers,
    model: Arc<Recording>,
    defs: Vec<cadre_subagents::AgentDefinition>,
) -> Harness {
    let failures = servers.start_all().await;
    assert!(failures.is_empty(), "{failures:?}");
    let mut tools: ToolRegistry = cadre_tools::builtin::builtin_tools();
    for t in servers.tools() {
        tools.register(t);
    }
    let policy = cadre_engine::PermissionPolicy {
        mode: cadre_engine::ApprovalMode::Bypass,
        ..Default::default()
    };
    let mut b = Harness::builder();
    for d in defs {
        b = b.subagent(d);
    }
    b.workspace(ws)
        .provider_instance("rec", model)
        .model("rec:test")
        .tools(tools)
        .permissions(policy)
        .user_agents_dir(None)
        .in_memory_sessions()
        .build()
        .unwrap()
}
