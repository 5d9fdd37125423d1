//! The sub-agent runtime: one implementation behind every delegation surface. It prepares a
//! child (definition → workspace, prompt, narrowed tools, model, limits), runs it on the same
//! engine with a fresh `sub-<uuid>` session in its own tokio task, tracks it as a task, and
//! lets callers wait for it, cancel it or leave it running in the background.

use crate::child_job::ChildJob;
use crate::child_setup::{SetupError, child_prompt, plan_workspace};
use crate::definition::{AgentDefinition, DefinitionSource, FactoryInput, RemoteSpec};
use crate::forward::ForwardSink;
use crate::guard::DelegationGuard;
use crate::live::{LiveChild, LiveChildren};
use crate::narrowing::narrow;
use crate::registry::AgentRegistry;
use crate::remote::RemoteExecutor;
use crate::skills::SkillSet;
use crate::tracker::{NewTask, TaskSnapshot, TaskTracker};
use crate::{DELEGATION_TOOLS, surface};
use async_trait::async_trait;
use cadre_engine::{Agent, Limits, Offloader, PermissionPolicy, Session, SessionMeta, ToolHook};
use cadre_llm::ProviderRegistry;
use cadre_tools::{ApprovalHandler, RunContext, ToolRegistry, Workspace};
use cadre_types::{
    ApprovalDecision, ApprovalRequest, EventSink, Usage, new_sub_session_id, new_task_id,
    unix_millis,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// How background children's approval requests are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackgroundApprovals {
    /// Denied with a reason the child sees (fail closed).
    #[default]
    Deny,
    /// Passed to the parent's approval channel (queued for the human).
    Escalate,
}

/// Which delegation tools the parent model sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolSurface {
    /// Only `task`.
    Task,
    /// Only the lifecycle tools (`agent_spawn`, ...).
    Lifecycle,
    /// Both.
    #[default]
    Both,
}

/// Settings of the runtime.
#[derive(Clone)]
pub struct RuntimeConfig {
    /// The main workspace (canonical).
    pub main_workspace: PathBuf,
    /// Where child transcripts go (`None`: in memory only).
    pub sessions_dir: Option<PathBuf>,
    /// The tools children narrow from (the parent's tools without delegation tools).
    pub base_tools: ToolRegistry,
    /// Hooks every child runs with (the parent's).
    pub hooks: Vec<Arc<dyn ToolHook>>,
    /// The parent's approval mode and rules; children inherit them.
    pub permissions: PermissionPolicy,
    /// The parent's limits, mirrored by `general-purpose`.
    pub parent_limits: Limits,
    /// Per-tool timeout inside children.
    pub tool_timeout: Duration,
    /// Parallel tool calls inside a child.
    pub max_parallel_tools: usize,
    /// Offload threshold inside children.
    pub offload_threshold: usize,
    /// Spawn depth cap (default 3).
    pub max_depth: u32,
    /// Children running at once per parent session (default 16); more wait as `pending`.
    pub max_concurrent: usize,
    /// Max turns of declared sub-agents without their own (default 10).
    pub default_max_turns: u32,
    /// Background approvals policy.
    pub background_approvals: BackgroundApprovals,
    /// Delegation tools offered.
    pub surface: ToolSurface,
    /// Runs agents whose definition has a `url` (none: such agents cannot be started).
    pub remote: Option<Arc<dyn RemoteExecutor>>,
    /// How long a foreground `task` call waits before its child is moved to the background
    /// (`None`: wait until it ends).
    pub task_timeout: Option<Duration>,
}

impl RuntimeConfig {
    /// Defaults for a main workspace.
    pub fn new(main_workspace: PathBuf) -> Self {
        Self {
            main_workspace,
            sessions_dir: None,
            base_tools: ToolRegistry::new(),
            hooks: Vec::new(),
            permissions: PermissionPolicy::default(),
            parent_limits: Limits::default(),
            tool_timeout: cadre_engine::DEFAULT_TOOL_TIMEOUT,
            max_parallel_tools: cadre_engine::DEFAULT_MAX_PARALLEL_TOOLS,
            offload_threshold: cadre_engine::DEFAULT_OFFLOAD_THRESHOLD,
            max_depth: 3,
            max_concurrent: 16,
            default_max_turns: 10,
            background_approvals: BackgroundApprovals::Deny,
            surface: ToolSurface::Both,
            task_timeout: None,
            remote: None,
        }
    }
}

/// Why a child could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// No such agent.
    #[error("Unknown agent_id: {0}")]
    UnknownAgent(String),
    /// The depth cap.
    #[error("Maximum spawn depth exceeded (max={0})")]
    DepthExceeded(u32),
    /// Workspace preparation failed.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The model could not be resolved.
    #[error("agent {agent}: {message}")]
    Model {
        /// Agent.
        agent: String,
        /// Why.
        message: String,
    },
    /// A factory failed.
    #[error("agent {agent}: factory failed: {message}")]
    Factory {
        /// Agent.
        agent: String,
        /// Why.
        message: String,
    },
    /// Remote agents are run by the remote layer.
    #[error("agent {0} is remote, and this runtime has no remote executor configured")]
    Remote(String),
    /// The label is taken in this session.
    #[error("Label already in use: {0}")]
    LabelInUse(String),
    /// The child session could not be created.
    #[error("agent {agent}: cannot create its session: {message}")]
    Session {
        /// Agent.
        agent: String,
        /// Why.
        message: String,
    },
}

/// What to start.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    /// The sub-agent's name.
    pub agent: String,
    /// The task: the only context the child gets.
    pub prompt: String,
    /// A short title.
    pub description: String,
    /// Deliver the completion to the parent (background) rather than to a waiting caller.
    pub background: bool,
}

/// The parent side of a spawn: who asks, and how cancellation reaches a foreground child.
#[derive(Clone)]
pub struct Parent {
    /// The parent's run.
    pub run: Arc<RunContext>,
    /// Cancels a foreground child with the parent (the tool call's token). Ignored for
    /// background children, whose lifetime is the runtime's.
    pub cancel: CancellationToken,
}

/// A started child.
#[derive(Debug, Clone)]
pub struct Started {
    /// `task_<uuid>`.
    pub task_id: String,
    /// `sub-<uuid>`.
    pub session_id: String,
}

/// The result of waiting for a task.
#[derive(Debug, Clone)]
pub enum Waited {
    /// The task is terminal.
    Done(Box<TaskSnapshot>),
    /// The timeout passed first.
    TimedOut,
    /// The waiter was cancelled.
    Aborted,
    /// No such task.
    Unknown,
}

/// What runs a child's tasks.
#[derive(Clone)]
pub enum ChildRunner {
    /// A local agent on the same engine.
    Local {
        /// The built child agent.
        agent: Agent,
        /// Its runtime workspace.
        workspace: Arc<Workspace>,
    },
    /// A remote agent.
    Remote {
        /// Where it runs.
        spec: RemoteSpec,
        /// Who talks to it.
        executor: Arc<dyn RemoteExecutor>,
        /// The remote conversation, once there is one.
        context_id: Arc<Mutex<Option<String>>>,
    },
}

/// A child agent with its own session, ready to take messages.
#[derive(Clone)]
pub struct Child {
    /// The sub-agent's name.
    pub name: String,
    /// The model spec it runs on (`remote:<url>` for remote agents).
    pub model: String,
    /// What runs its tasks.
    pub runner: ChildRunner,
    /// `sub-<uuid>`.
    pub session_id: String,
    /// Its conversation; a run holds the lock while it works.
    pub session: Arc<tokio::sync::Mutex<Session>>,
    /// Its spawn depth.
    pub depth: u32,
}

/// The runtime. Create with [`SubagentRuntime::new`]; share the `Arc`.
pub struct SubagentRuntime {
    cfg: RuntimeConfig,
    registry: AgentRegistry,
    skills: SkillSet,
    providers: Arc<ProviderRegistry>,
    tracker: TaskTracker,
    root_cancel: CancellationToken,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    live: LiveChildren,
    me: Weak<SubagentRuntime>,
}

impl std::fmt::Debug for SubagentRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentRuntime")
            .field("agents", &self.registry.names())
            .finish_non_exhaustive()
    }
}

/// Denies every request of a background child (fail closed), with a reason it sees.
struct BackgroundDeny;

#[async_trait]
impl ApprovalHandler for BackgroundDeny {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Deny {
            feedback: Some(format!(
                "{} needs approval, and background sub-agents cannot ask for it (subagents.background_approvals = \"deny\"). Do without it and report what you could not do.",
                request.tool
            )),
        }
    }
}

impl SubagentRuntime {
    /// Build the runtime.
    pub fn new(
        cfg: RuntimeConfig,
        registry: AgentRegistry,
        skills: SkillSet,
        providers: Arc<ProviderRegistry>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            cfg,
            registry,
            skills,
            providers,
            tracker: TaskTracker::default(),
            root_cancel: CancellationToken::new(),
            slots: Mutex::new(HashMap::new()),
            live: LiveChildren::default(),
            me: me.clone(),
        })
    }

    /// The definitions.
    pub fn registry(&self) -> &AgentRegistry {
        &self.registry
    }

    /// The settings.
    pub fn config(&self) -> &RuntimeConfig {
        &self.cfg
    }

    /// The task tracker.
    pub fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    /// Cancel every child (process shutdown, Ctrl-C).
    pub fn shutdown(&self) {
        self.root_cancel.cancel();
    }

    /// Tokens used by the children of `session` (the roll-up).
    pub fn usage_of(&self, session: &str) -> Usage {
        self.tracker.usage_of(session)
    }

    /// The delegation tools for a parent at `depth`, per the configured surface.
    pub fn delegation_tools(&self) -> ToolRegistry {
        match self.me.upgrade() {
            Some(rt) => surface::tools(&rt, self.cfg.surface),
            None => ToolRegistry::new(),
        }
    }

    fn slot(&self, session: &str) -> Arc<Semaphore> {
        let mut slots = match self.slots.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        slots
            .entry(session.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.cfg.max_concurrent.max(1))))
            .clone()
    }

    /// Build the child agent for `def` under a parent at `parent_depth`.
    fn prepare(
        &self,
        def: &AgentDefinition,
        parent: &RunContext,
    ) -> Result<(Agent, PathBuf), SpawnError> {
        let depth = parent.depth + 1;
        if depth > self.cfg.max_depth {
            return Err(SpawnError::DepthExceeded(self.cfg.max_depth));
        }
        let plan = plan_workspace(def, &self.cfg.main_workspace)?;
        let spec = def.model.clone().unwrap_or_else(|| parent.model.clone());
        let model = self
            .providers
            .resolve(&spec)
            .map_err(|e| SpawnError::Model {
                agent: def.name.clone(),
                message: e.to_string(),
            })?;
        let can_delegate = def.can_delegate && depth < self.cfg.max_depth;
        let mut tools = narrow(
            &self.cfg.base_tools,
            def.tools.as_deref(),
            &def.disallowed_tools,
            DELEGATION_TOOLS,
        );
        if can_delegate {
            // Delegation tools are offered to delegating agents, still minus what they deny.
            let allowed = narrow(&self.delegation_tools(), None, &def.disallowed_tools, &[]);
            for t in allowed.iter() {
                tools.register(t.clone());
            }
        }
        let (skills_section, _missing) = self.skills.preload(&def.skills);
        let prompt = child_prompt(def, &plan, !can_delegate, &skills_section);
        let limits = if def.source == DefinitionSource::Builtin {
            self.cfg.parent_limits
        } else {
            Limits {
                max_turns: def.max_turns.unwrap_or(self.cfg.default_max_turns),
                wall_clock: def.wall_clock_secs.map(Duration::from_secs),
                max_tokens: def.max_tokens,
            }
        };
        if let Some(factory) = &def.factory {
            let input = FactoryInput {
                model,
                tools,
                workspace: plan.root.clone(),
                system_prompt: prompt,
            };
            let agent = factory(&input).map_err(|message| SpawnError::Factory {
                agent: def.name.clone(),
                message,
            })?;
            return Ok((agent, plan.root));
        }
        let mut b = Agent::builder(def.name.clone(), model)
            .system_prompt(prompt)
            .tools(tools)
            .limits(limits)
            .tool_timeout(self.cfg.tool_timeout)
            .max_parallel_tools(self.cfg.max_parallel_tools)
            .permissions(self.cfg.permissions.clone())
            .offloader(Offloader::new(&plan.root, self.cfg.offload_threshold));
        for h in &self.cfg.hooks {
            b = b.hook(h.clone());
        }
        b = b.hook(Arc::new(DelegationGuard::new(
            can_delegate,
            self.cfg.max_depth,
        )));
        Ok((b.build(), plan.root))
    }

    /// Create a child of `agent` for `parent`: its agent, workspace and a fresh `sub-<uuid>`
    /// session, ready to take messages with [`start`](Self::start).
    pub fn create_child(&self, agent: &str, parent: &RunContext) -> Result<Child, SpawnError> {
        let def = self
            .registry
            .get(agent)
            .cloned()
            .ok_or_else(|| SpawnError::UnknownAgent(agent.to_string()))?;
        let (runner, model) = match &def.remote {
            Some(spec) => {
                if parent.depth + 1 > self.cfg.max_depth {
                    return Err(SpawnError::DepthExceeded(self.cfg.max_depth));
                }
                let executor = self
                    .cfg
                    .remote
                    .clone()
                    .ok_or_else(|| SpawnError::Remote(def.name.clone()))?;
                let runner = ChildRunner::Remote {
                    spec: spec.clone(),
                    executor,
                    context_id: Arc::new(Mutex::new(None)),
                };
                (runner, format!("remote:{}", spec.url))
            }
            None => {
                let (built, root) = self.prepare(&def, parent)?;
                let workspace = Workspace::new(&root).map_err(|e| {
                    SpawnError::Setup(SetupError::Io {
                        agent: def.name.clone(),
                        path: root.clone(),
                        source: e,
                    })
                })?;
                let model = built.config().model.spec.clone();
                let runner = ChildRunner::Local {
                    agent: built,
                    workspace: Arc::new(workspace),
                };
                (runner, model)
            }
        };
        let session_id = new_sub_session_id();
        let meta = SessionMeta {
            id: session_id.clone(),
            agent: def.name.clone(),
            model: model.clone(),
            created_at: unix_millis(),
            parent_session_id: Some(parent.session_id.clone()),
        };
        let session = match &self.cfg.sessions_dir {
            Some(dir) => Session::create(dir, meta).map_err(|e| SpawnError::Session {
                agent: def.name.clone(),
                message: e.to_string(),
            })?,
            None => Session::in_memory(meta),
        };
        Ok(Child {
            name: def.name,
            model,
            runner,
            session_id,
            session: Arc::new(tokio::sync::Mutex::new(session)),
            depth: parent.depth + 1,
        })
    }

    /// Start a one-off child (the `task` tool). It runs in its own task; foreground callers
    /// wait with [`wait`](Self::wait).
    pub fn spawn(&self, req: SpawnRequest, parent: &Parent) -> Result<Started, SpawnError> {
        let child = self.create_child(&req.agent, &parent.run)?;
        Ok(self.start(&child, req.prompt, req.description, req.background, parent))
    }

    /// Give `child` a message to work on, as a new task. The child keeps its history; a child
    /// already busy takes the message when its current task ends.
    pub fn start(
        &self,
        child: &Child,
        prompt: String,
        description: String,
        background: bool,
        parent: &Parent,
    ) -> Started {
        let task_id = new_task_id();
        let cancel = if background {
            self.root_cancel.child_token()
        } else {
            parent.cancel.child_token()
        };
        self.tracker.insert(
            NewTask {
                id: task_id.clone(),
                agent: child.name.clone(),
                parent_session_id: parent.run.session_id.clone(),
                child_session_id: child.session_id.clone(),
                description,
                background,
            },
            cancel.clone(),
        );
        let forward = Arc::new(ForwardSink {
            parent: parent.run.events.clone(),
            parent_session_id: parent.run.session_id.clone(),
            parent_agent: parent.run.agent.clone(),
            parent_task_id: parent.run.task_id.clone(),
            agent: child.name.clone(),
            task_id: task_id.clone(),
            tracker: self.tracker.clone(),
            log: background,
        });
        let approvals: Arc<dyn ApprovalHandler> =
            if background && self.cfg.background_approvals == BackgroundApprovals::Deny {
                Arc::new(BackgroundDeny)
            } else {
                parent.run.approvals.clone()
            };
        let child_run = Arc::new(RunContext {
            session_id: child.session_id.clone(),
            agent: child.name.clone(),
            model: child.model.clone(),
            task_id: Some(task_id.clone()),
            user_id: parent.run.user_id.clone(),
            parent_session_id: Some(parent.run.session_id.clone()),
            depth: child.depth,
            trace_id: parent.run.trace_id.clone(),
            events: forward.clone() as Arc<dyn EventSink>,
            approvals,
        });
        let job = ChildJob {
            task_id: task_id.clone(),
            child: child.clone(),
            prompt,
            run: child_run,
            cancel,
            slot: self.slot(&parent.run.session_id),
            tracker: self.tracker.clone(),
            forward,
        };
        let span = tracing::info_span!("subagent", agent = %child.name, task = %task_id, session = %child.session_id, depth = child.depth);
        tokio::spawn(job.run().instrument(span));
        Started {
            task_id,
            session_id: child.session_id.clone(),
        }
    }

    /// Wait until the task is terminal, `abort` fires or `timeout` passes. Never cancels
    /// the task itself.
    pub async fn wait_for(
        &self,
        task_id: &str,
        abort: &CancellationToken,
        timeout: Option<Duration>,
    ) -> Waited {
        let Some(mut rx) = self.tracker.watch(task_id) else {
            return Waited::Unknown;
        };
        let limit = async {
            match timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = rx.wait_for(|s| s.is_terminal()) => {}
            _ = abort.cancelled() => return Waited::Aborted,
            _ = limit => return Waited::TimedOut,
        }
        match self.tracker.get(task_id) {
            Some(s) => Waited::Done(Box::new(s)),
            None => Waited::Unknown,
        }
    }

    /// Wait for a foreground task: when `cancel` fires the task is cancelled too and waited
    /// for; when `timeout` passes, `None` (the task keeps running).
    pub async fn wait(
        &self,
        task_id: &str,
        cancel: &CancellationToken,
        timeout: Option<Duration>,
    ) -> Option<TaskSnapshot> {
        match self.wait_for(task_id, cancel, timeout).await {
            Waited::Done(s) => Some(*s),
            Waited::TimedOut | Waited::Unknown => None,
            Waited::Aborted => {
                let _ = self.tracker.request_cancel(task_id);
                match self
                    .wait_for(task_id, &CancellationToken::new(), None)
                    .await
                {
                    Waited::Done(s) => Some(*s),
                    _ => None,
                }
            }
        }
    }

    /// Live children (`agent_spawn`).
    pub fn live(&self) -> &LiveChildren {
        &self.live
    }

    /// Create a live child of `agent` with an optional label, scoped to the parent session.
    pub fn spawn_live(
        &self,
        agent: &str,
        label: Option<String>,
        parent: &RunContext,
    ) -> Result<Arc<LiveChild>, SpawnError> {
        if let Some(l) = &label
            && self.live.label_taken(&parent.session_id, l)
        {
            return Err(SpawnError::LabelInUse(l.clone()));
        }
        let child = self.create_child(agent, parent)?;
        let key = format!("agent:{}:{}", child.name, uuid::Uuid::new_v4());
        self.live
            .add(
                &parent.session_id,
                LiveChild {
                    key,
                    agent_id: child.name.clone(),
                    label,
                    child,
                    last_task: Mutex::new(None),
                },
            )
            .map_err(|e| SpawnError::LabelInUse(e.0))
    }

    /// Run `agent` in the foreground for `parent` and wait for it (the `@agent` direct run).
    pub async fn run_direct(
        &self,
        agent: &str,
        prompt: String,
        parent: &Parent,
    ) -> Result<TaskSnapshot, SpawnError> {
        let started = self.spawn(
            SpawnRequest {
                agent: agent.to_string(),
                description: crate::short_title(&prompt),
                prompt,
                background: false,
            },
            parent,
        )?;
        match self.wait(&started.task_id, &parent.cancel, None).await {
            Some(s) => Ok(s),
            None => Err(SpawnError::UnknownAgent(agent.to_string())),
        }
    }
}
