//! Shared fixtures for the engine's integration tests: a recording provider over a
//! scripted model, an event collector, and small test tools.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use cadre_engine::{Agent, AgentBuilder, Session, SessionMeta};
use cadre_llm::scripted::{ScriptFile, ScriptedProvider};
use cadre_llm::{ModelRequest, ModelStream, Provider, ResolvedModel};
use cadre_tools::{
    ApprovalHandler, PermissionSubject, RunContext, Tool, ToolContext, ToolError, ToolOutput,
    Workspace,
};
use cadre_types::{
    ApprovalDecision, ApprovalRequest, Event, EventEnvelope, EventSink, ToolDefinition,
};
use serde_json::json;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Wraps a provider and records every request.
pub struct Recording {
    inner: Arc<dyn Provider>,
    pub requests: Mutex<Vec<ModelRequest>>,
}

impl Provider for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    fn stream(&self, request: ModelRequest) -> ModelStream {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.stream(request)
    }
}

pub fn scripted(toml_text: &str) -> (ResolvedModel, Arc<Recording>) {
    let file: ScriptFile = toml::from_str(toml_text).expect("script parses");
    recorded(ResolvedModel {
        provider: Arc::new(ScriptedProvider::new(file)),
        model: "test".into(),
        spec: "scripted:test".into(),
        price: None,
    })
}

/// `model` with every request recorded when it is made (when the call starts, before
/// anything reaches the wire, which may never happen for a call dropped at once).
pub fn recorded(model: ResolvedModel) -> (ResolvedModel, Arc<Recording>) {
    let rec = Arc::new(Recording {
        inner: model.provider,
        requests: Mutex::new(Vec::new()),
    });
    let model = ResolvedModel {
        provider: rec.clone(),
        ..model
    };
    (model, rec)
}

#[derive(Default)]
pub struct Collect(pub Mutex<Vec<EventEnvelope>>);

impl EventSink for Collect {
    fn emit(&self, event: EventEnvelope) {
        self.0.lock().unwrap().push(event);
    }
}

impl Collect {
    pub fn events(&self) -> Vec<Event> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.event.clone())
            .collect()
    }
}

/// Approves or denies and counts the requests.
pub struct Answer {
    pub decision: ApprovalDecision,
    pub asked: Mutex<Vec<ApprovalRequest>>,
}

impl Answer {
    pub fn new(decision: ApprovalDecision) -> Arc<Self> {
        Arc::new(Self {
            decision,
            asked: Mutex::new(Vec::new()),
        })
    }
    pub fn count(&self) -> usize {
        self.asked.lock().unwrap().len()
    }
}

#[async_trait]
impl ApprovalHandler for Answer {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalDecision {
        self.asked.lock().unwrap().push(request);
        self.decision.clone()
    }
}

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub events: Arc<Collect>,
    pub approvals: Arc<Answer>,
    pub cancel: CancellationToken,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_answer(ApprovalDecision::AllowOnce)
    }

    pub fn with_answer(decision: ApprovalDecision) -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            events: Arc::new(Collect::default()),
            approvals: Answer::new(decision),
            cancel: CancellationToken::new(),
        }
    }

    pub fn session(&self) -> Session {
        Session::create(
            &self.dir.path().join(".cadre/sessions"),
            SessionMeta {
                id: cadre_types::new_session_id(),
                agent: "main".into(),
                model: "scripted:test".into(),
                created_at: 0,
                parent_session_id: None,
            },
        )
        .unwrap()
    }

    pub fn run_context(&self, session: &Session) -> Arc<RunContext> {
        Arc::new(RunContext {
            session_id: session.id().to_string(),
            agent: "main".into(),
            model: "scripted:test".into(),
            task_id: None,
            user_id: None,
            parent_session_id: None,
            depth: 0,
            tool_grant: cadre_tools::ToolGrant::unrestricted(),
            budget: cadre_tools::Budget::unlimited(),
            trace_id: "t".into(),
            events: self.events.clone(),
            approvals: self.approvals.clone(),
        })
    }

    pub async fn run(
        &self,
        agent: &Agent,
        session: &mut Session,
        prompt: &str,
    ) -> cadre_engine::RunOutcome {
        let run = self.run_context(session);
        let ws = Arc::new(Workspace::new(self.dir.path()).unwrap());
        agent
            .run(session, Some(prompt.into()), run, ws, self.cancel.clone())
            .await
    }
}

pub fn builder(model: ResolvedModel) -> AgentBuilder {
    Agent::builder("main", model).permissions(cadre_engine::PermissionPolicy {
        mode: cadre_engine::ApprovalMode::AutoApprove,
        rules: Default::default(),
    })
}

/// A configurable tool for tests.
pub struct TestTool {
    pub name: &'static str,
    pub read_only: bool,
    pub exempt: bool,
    pub behaviour: Behaviour,
}

pub enum Behaviour {
    /// Echo the `text` argument.
    Echo,
    /// Fail with a message.
    Fail(&'static str),
    /// Produce this many bytes.
    Big(usize),
    /// Wait at the barrier, then return the `text` argument; records order of completion.
    Barrier(Arc<tokio::sync::Barrier>, Arc<Mutex<Vec<String>>>),
    /// Sleep until cancelled; record that the cancel arrived.
    Hang(Arc<Mutex<Vec<String>>>),
    /// Return a note and one PNG image.
    Image,
    /// Count the calls inside at once (`.0` now, `.1` the most), wait at the barrier, then
    /// return the `text` argument.
    Counted(
        Arc<(
            std::sync::atomic::AtomicUsize,
            std::sync::atomic::AtomicUsize,
        )>,
        Arc<tokio::sync::Barrier>,
    ),
}

impl TestTool {
    pub fn new(name: &'static str, behaviour: Behaviour) -> Arc<Self> {
        Arc::new(Self {
            name,
            read_only: true,
            exempt: false,
            behaviour,
        })
    }
    pub fn mutating(name: &'static str, behaviour: Behaviour) -> Arc<Self> {
        Arc::new(Self {
            name,
            read_only: false,
            exempt: false,
            behaviour,
        })
    }
    pub fn exempt(name: &'static str, behaviour: Behaviour) -> Arc<Self> {
        Arc::new(Self {
            name,
            read_only: true,
            exempt: true,
            behaviour,
        })
    }
}

#[async_trait]
impl Tool for TestTool {
    fn name(&self) -> &str {
        self.name
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.into(),
            description: "test tool".into(),
            parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        }
    }
    fn is_read_only(&self) -> bool {
        self.read_only
    }
    fn timeout_exempt(&self) -> bool {
        self.exempt
    }
    fn permission_subject(
        &self,
        args: &serde_json::Value,
        _workspace: &Workspace,
    ) -> Result<PermissionSubject, ToolError> {
        Ok(args
            .get("text")
            .and_then(|t| t.as_str())
            .map_or(PermissionSubject::None, |t| {
                PermissionSubject::Path(t.into())
            }))
    }
    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let text = args
            .get("text")
            .and_then(|t| t.as_str())
            .unwrap_or("")
            .to_string();
        match &self.behaviour {
            Behaviour::Echo => Ok(ToolOutput::ok(format!("echo:{text}"))),
            Behaviour::Fail(m) => Err(ToolError::Failed(m.to_string())),
            Behaviour::Big(n) => Ok(ToolOutput::ok("x".repeat(*n))),
            Behaviour::Image => {
                let mut out = ToolOutput::ok("[image image/png]");
                out.images.push(cadre_types::Image {
                    media_type: "image/png".into(),
                    data: "iVBORw==".into(),
                });
                Ok(out)
            }
            Behaviour::Counted(inside, barrier) => {
                use std::sync::atomic::Ordering::SeqCst;
                let now = inside.0.fetch_add(1, SeqCst) + 1;
                inside.1.fetch_max(now, SeqCst);
                barrier.wait().await;
                inside.0.fetch_sub(1, SeqCst);
                Ok(ToolOutput::ok(format!("done:{text}")))
            }
            Behaviour::Barrier(b, done) => {
                b.wait().await;
                // Finish in reverse call order: later calls finish first, 50 ms apart (250 ms
                // for the first). A tool that takes this long is what the test is about, so
                // this sleep is the fixture's.
                let delay: u64 = text.trim_start_matches('c').parse().unwrap_or(0);
                tokio::time::sleep(std::time::Duration::from_millis(50 * (5 - delay.min(5)))).await;
                done.lock().unwrap().push(text.clone());
                Ok(ToolOutput::ok(format!("done:{text}")))
            }
            Behaviour::Hang(log) => {
                ctx.cancel.cancelled().await;
                log.lock().unwrap().push(format!("{} cancelled", self.name));
                Err(ToolError::Cancelled)
            }
        }
    }
}

/// The tool results of a conversation, in order: (content, is_error).
pub fn tool_results(messages: &[cadre_types::Message]) -> Vec<(String, bool)> {
    messages
        .iter()
        .filter_map(|m| match m {
            cadre_types::Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}
