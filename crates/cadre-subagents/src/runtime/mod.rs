//! The sub-agent runtime: one implementation behind every delegation surface. It prepares a
//! child (definition → workspace, prompt, narrowed tools, model, limits), runs it on the same
//! engine with a fresh `sub-<uuid>` session in its own tokio task, tracks it as a task, and
//! lets callers wait for it, cancel it or leave it running in the background.

mod build;
mod config;
mod types;

pub use config::{BackgroundApprovals, RuntimeConfig, ToolSurface};
pub use types::{Child, ChildRunner, Parent, SpawnError, SpawnRequest, Started, Waited};

use crate::child_job::ChildJob;
use crate::forward::ForwardSink;
use crate::live::{LiveChild, LiveChildren};
use crate::registry::AgentRegistry;
use crate::skills::SkillSet;
use crate::surface;
use crate::tracker::{NewTask, TaskSnapshot, TaskTracker};
use async_trait::async_trait;
use cadre_llm::ProviderRegistry;
use cadre_tools::{ApprovalHandler, RunContext, ToolRegistry};
use cadre_types::{ApprovalDecision, ApprovalRequest, EventSink, Usage, new_task_id};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

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
    /// wait with [`wait`](Self::wait).
    /// Start a one-off child (the `task` tool). It runs in its own task; foreground callers
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
