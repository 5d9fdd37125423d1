//! Fixtures for runtime tests: a recording scripted provider with an in-flight counter, an
//! event collector, an approval answerer, small tools, and a parent wired to a runtime.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use cadre_engine::{Agent, ApprovalMode, PermissionPolicy, RunOutcome, Session, SessionMeta};
use cadre_llm::scripted::{ScriptFile, ScriptedProvider};
use cadre_llm::{ModelRequest, ModelStream, Provider, ProviderRegistry};
use cadre_subagents::hooks::{ClaudeHooks, HookSet, RunnerEnv};
use cadre_subagents::{
    AgentDefinition, AgentRegistry, RuntimeConfig, SubagentContext, SubagentRuntime,
};
use cadre_tools::{
    ApprovalHandler, RunContext, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, Workspace,
};
use cadre_types::{
    ApprovalDecision, ApprovalRequest, Event, EventEnvelope, EventSink, Message, ToolDefinition,
};
use futures::StreamExt;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Records requests and counts concurrent model calls of children.
pub struct Recording {
    inner: ScriptedProvider,
    pub requests: Mutex<Vec<ModelRequest>>,
    in_flight: Arc<AtomicUsize>,
    pub max_in_flight: Arc<AtomicUsize>,
}

struct InFlight(Arc<AtomicUsize>);
impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Provider for Recording {
    fn name(&self) -> &str {
        "rec"
    }
    fn stream(&self, request: ModelRequest) -> ModelStream {
        self.requests.lock().unwrap().push(request.clone());
        if request.metadata.agent == "main" {
            return self.inner.stream(request);
        }
        // Only children's model calls count as in flight.
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let guard = InFlight(self.in_flight.clone());
        self.inner
            .stream(request)
            .map(move |ev| {
                let _keep = &guard;
                ev
            })
            .boxed()
    }
}

impl Recording {
    /// Children's model calls whose stream is still held (not yet ended or dropped).
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

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

#[derive(Default)]
pub struct Collect(pub Mutex<Vec<EventEnvelope>>);
impl EventSink for Collect {
    fn emit(&self, event: EventEnvelope) {
        self.0.lock().unwrap().push(event);
    }
}
impl Collect {
    pub fn all(&self) -> Vec<EventEnvelope> {
        self.0.lock().unwrap().clone()
    }
    pub fn updates(&self) -> Vec<cadre_types::SubagentUpdate> {
        self.all()
            .into_iter()
            .filter_map(|e| match e.event {
                Event::SubagentUpdate { update } => Some(update),
                _ => None,
            })
            .collect()
    }
}

pub struct Answer {
    pub decision: ApprovalDecision,
    pub asked: Mutex<Vec<ApprovalRequest>>,
}
#[async_trait]
impl ApprovalHandler for Answer {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalDecision {
        self.asked.lock().unwrap().push(request);
        self.decision.clone()
    }
}

/// `echo` (read-only), `write` (mutating, echoes), `hang` (waits for cancel).
pub struct TestTool(pub &'static str);

#[async_trait]
impl Tool for TestTool {
    fn name(&self) -> &str {
        self.0
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.0.into(),
            description: "test".into(),
            parameters: json!({"type":"object","properties":{"text":{"type":"string"}}}),
        }
    }
    fn is_read_only(&self) -> bool {
        self.0 != "write"
    }
    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let text = args["text"].as_str().unwrap_or("").to_string();
        if self.0 == "hang" {
            ctx.cancel.cancelled().await;
            return Err(ToolError::Cancelled);
        }
        Ok(ToolOutput::ok(format!("{}:{text}", self.0)))
    }
}

pub fn base_tools() -> ToolRegistry {
    ToolRegistry::new()
        .with(Arc::new(TestTool("echo")))
        .with(Arc::new(TestTool("write")))
        .with(Arc::new(TestTool("hang")))
}

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub ws: std::path::PathBuf,
    pub rec: Arc<Recording>,
    pub runtime: Arc<SubagentRuntime>,
    pub parent: Agent,
    pub events: Arc<Collect>,
    pub approvals: Arc<Answer>,
    pub cancel: CancellationToken,
}

pub struct Options {
    pub defs: Vec<AgentDefinition>,
    pub mode: ApprovalMode,
    pub answer: ApprovalDecision,
    pub tweak: Box<dyn FnOnce(&mut RuntimeConfig)>,
    pub parent_tool_timeout: std::time::Duration,
    pub providers: Option<Arc<ProviderRegistry>>,
    pub parent_model: String,
    /// The main agent's limits (what `general-purpose` mirrors).
    pub limits: cadre_engine::Limits,
    /// Files written in the workspace before its definitions are loaded (path, text).
    pub files: Vec<(&'static str, String)>,
    /// Run the Claude Code hooks of the workspace's settings files in the main agent and
    /// (as `claude_hooks`) in the runtime.
    pub claude_hooks: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            defs: vec![],
            mode: ApprovalMode::AutoApprove,
            answer: ApprovalDecision::AllowOnce,
            tweak: Box::new(|_| {}),
            parent_tool_timeout: std::time::Duration::from_secs(60),
            providers: None,
            parent_model: "rec:test".into(),
            limits: cadre_engine::Limits::default(),
            files: vec![],
            claude_hooks: false,
        }
    }
}

pub fn worker(name: &str) -> AgentDefinition {
    let mut d = AgentDefinition::new(name, format!("The {name} agent."));
    d.prompt = format!("You are the {name}.");
    d.workspace.mode = cadre_subagents::WorkspaceMode::Shared;
    d
}

/// A recording provider playing `script` (TOML).
pub fn recording(script: &str) -> Arc<Recording> {
    let file: ScriptFile = toml::from_str(script).unwrap();
    Arc::new(Recording {
        inner: ScriptedProvider::new(file),
        requests: Mutex::new(Vec::new()),
        in_flight: Arc::new(AtomicUsize::new(0)),
        max_in_flight: Arc::new(AtomicUsize::new(0)),
    })
}

pub fn fixture(script: &str, opts: Options) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let rec = recording(script);
    let providers = opts
        .providers
        .unwrap_or_else(|| Arc::new(ProviderRegistry::new(HashMap::new(), "rec")));
    providers.insert("rec", rec.clone());
    for (rel, text) in &opts.files {
        let path = ws.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let mut b = AgentRegistry::builder().workspace(&ws).user_dir(None);
    for d in opts.defs {
        b = b.declare(d);
    }
    let registry = b.load();
    assert!(registry.errors().is_empty(), "{:?}", registry.errors());
    let policy = PermissionPolicy {
        mode: opts.mode,
        rules: Default::default(),
    };
    let store: Arc<dyn cadre_store::TaskStore> = Arc::new(cadre_store::MemoryStore::new(
        cadre_store::NodeId::new("test"),
    ));
    let mut cfg = RuntimeConfig::new(ws.clone(), store);
    cfg.sessions_dir = Some(ws.join(".cadre/sessions"));
    cfg.base_tools = base_tools();
    cfg.permissions = policy.clone();
    cfg.parent_limits = opts.limits;
    if opts.claude_hooks {
        let (set, warnings) =
            HookSet::load(&cadre_subagents::hooks::standard_sources(None, &ws, &[]));
        assert!(warnings.is_empty(), "{warnings:?}");
        let env = RunnerEnv {
            workspace: ws.clone(),
            secrets: Default::default(),
        };
        let hooks = Arc::new(ClaudeHooks::new(
            Arc::new(set),
            env,
            "acceptEdits",
            ws.join(".cadre/sessions"),
        ));
        cfg.hooks.push(hooks.clone());
        cfg.claude_hooks = Some(hooks);
    }
    (opts.tweak)(&mut cfg);
    let parent_hooks = if opts.claude_hooks {
        cfg.hooks.clone()
    } else {
        Vec::new()
    };
    // The main agent has the configured base tools: its children narrow from them.
    let mut tools = cfg.base_tools.clone();
    let runtime = SubagentRuntime::new(
        cfg,
        registry,
        cadre_subagents::SkillSet::new(),
        providers.clone(),
    );
    for t in runtime.delegation_tools().iter() {
        tools.register(t.clone());
    }
    let mut parent = Agent::builder("main", providers.resolve(&opts.parent_model).unwrap())
        .system_prompt("PARENT SYSTEM PROMPT")
        .tools(tools)
        .permissions(policy)
        .limits(opts.limits)
        .tool_timeout(opts.parent_tool_timeout)
        .extension(Arc::new(SubagentContext::new(runtime.clone())));
    for h in parent_hooks {
        parent = parent.hook(h);
    }
    let parent = parent.build();
    Fixture {
        dir,
        ws,
        rec,
        runtime,
        parent,
        events: Arc::new(Collect::default()),
        approvals: Arc::new(Answer {
            decision: opts.answer,
            asked: Mutex::new(vec![]),
        }),
        cancel: CancellationToken::new(),
    }
}

impl Fixture {
    pub fn run_context(&self, session: &Session) -> Arc<RunContext> {
        Arc::new(RunContext {
            session_id: session.id().to_string(),
            agent: "main".into(),
            model: self.parent.config().model.spec.clone(),
            task_id: None,
            user_id: Some("tester".into()),
            parent_session_id: None,
            depth: 0,
            tool_grant: cadre_tools::ToolGrant::unrestricted(),
            budget: cadre_tools::Budget::unlimited(),
            trace_id: "trace-1".into(),
            events: self.events.clone(),
            approvals: self.approvals.clone(),
        })
    }

    pub fn session(&self) -> Session {
        Session::in_memory(SessionMeta {
            id: cadre_types::new_session_id(),
            agent: "main".into(),
            model: "rec:test".into(),
            created_at: 0,
            parent_session_id: None,
        })
    }

    pub async fn run(&self, prompt: &str) -> (RunOutcome, Session) {
        let mut s = self.session();
        let out = self.run_in(&mut s, prompt).await;
        (out, s)
    }

    /// The parent's run of `prompt` in `session`, on a task of its own.
    pub fn spawn_run(
        &self,
        mut session: Session,
        prompt: &str,
    ) -> tokio::task::JoinHandle<(RunOutcome, Session)> {
        let (parent, cancel) = (self.parent.clone(), self.cancel.clone());
        let ws = Arc::new(Workspace::new(&self.ws).unwrap());
        let ctx = self.run_context(&session);
        let prompt = prompt.to_string();
        tokio::spawn(async move {
            let out = parent
                .run(&mut session, Some(prompt), ctx, ws, cancel)
                .await;
            (out, session)
        })
    }

    pub async fn run_in(&self, s: &mut Session, prompt: &str) -> RunOutcome {
        let run = self.run_context(s);
        let ws = Arc::new(Workspace::new(&self.ws).unwrap());
        self.parent
            .run(s, Some(prompt.into()), run, ws, self.cancel.clone())
            .await
    }
}

/// Call one of the runtime's delegation tools as the main agent of `session` would.
pub async fn call(f: &Fixture, session: &str, tool: &str, args: serde_json::Value) -> ToolOutput {
    let ctx = tool_context(f, session);
    let tools = f.runtime.delegation_tools();
    match tools.get(tool).unwrap().call(args, &ctx).await {
        Ok(o) => o,
        Err(e) => ToolOutput::error(e.to_string()),
    }
}

/// The context of a tool call by the main agent of `session`.
pub fn tool_context(f: &Fixture, session: &str) -> ToolContext {
    let mut run = (*f.run_context(&f.session())).clone();
    run.session_id = session.to_string();
    ToolContext {
        hidden: Default::default(),
        call_id: "c".into(),
        tools: Arc::new(f.parent.config().tools.clone()),
        workspace: Arc::new(Workspace::new(&f.ws).unwrap()),
        cancel: f.cancel.clone(),
        run: Arc::new(run),
    }
}

/// The value of a `key: value` line of a tool's reply.
pub fn field(out: &ToolOutput, key: &str) -> String {
    out.content
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in {}", out.content))
        .to_string()
}

pub fn tool_results(messages: &[Message]) -> Vec<(String, bool)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

/// The user messages among `messages` that start with `tag` (what the runtime injects).
pub fn user_messages(messages: &[Message], tag: &str) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::User { content } if content.starts_with(tag) => Some(content.clone()),
            _ => None,
        })
        .collect()
}

/// The background-task deliveries among `messages` (the user messages that carry results).
pub fn delivered(messages: &[Message]) -> Vec<String> {
    user_messages(messages, "<background-task-results>")
}

/// Store `task` and mark it running, as the node that runs it would; its id.
pub async fn stored_running(
    store: &dyn cadre_store::TaskStore,
    task: cadre_store::NewTask,
) -> String {
    let id = task.id.clone();
    store.create(&task).await.unwrap();
    store
        .transition(&id, cadre_store::Transition::running())
        .await
        .unwrap();
    id
}
