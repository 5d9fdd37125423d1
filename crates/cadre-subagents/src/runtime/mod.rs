//! The sub-agent runtime: one implementation behind every delegation surface. It prepares a
//! child (definition → workspace, prompt, narrowed tools, model, limits), runs it on the same
//! engine with a fresh `sub-<uuid>` session in its own tokio task, tracks it as a task, and
//! lets callers wait for it, cancel it or leave it running in the background.

mod build;
mod config;
mod servers;
mod types;

pub use config::{BackgroundApprovals, RuntimeConfig, SandboxSettings, ToolSurface};
pub use types::{Child, ChildRunner, Inherited, Parent, SpawnError, SpawnRequest, Started, Waited};
pub(crate) use types::{ChildPlan, Decided, JobChild};

use crate::child_job::ChildJob;
use crate::forward::ForwardSink;
use crate::live::{LiveChild, LiveChildren};
use crate::persist::{Persist, TaskStart, snapshot_of};
use crate::registry::AgentRegistry;
use crate::skills::SkillSet;
use crate::tracker::{NewTask, TaskSnapshot, TaskStatus, TaskTracker};
use async_trait::async_trait;
use cadre_llm::ProviderRegistry;
use cadre_tools::{ApprovalHandler, RunContext, ToolRegistry};
use cadre_types::{ApprovalDecision, ApprovalRequest, EventSink, new_task_id};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The runtime. Create with [`SubagentRuntime::new`]; share the `Arc`.
pub struct SubagentRuntime {
    persist: Option<Persist>,
    detached: std::sync::atomic::AtomicBool,
    /// Why the process is shutting down (`cadre received SIGTERM`), once it is: the reason
    /// the tasks it cancels record.
    shutdown_reason: std::sync::OnceLock<String>,
    cfg: RuntimeConfig,
    registry: AgentRegistry,
    skills: SkillSet,
    providers: Arc<ProviderRegistry>,
    tracker: TaskTracker,
    root_cancel: CancellationToken,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    live: LiveChildren,
    /// Built agents shared by children that would be built the same.
    built: Mutex<BuiltAgents>,
    /// What top-level parents pass down: the configured hooks, permissions and limits.
    top_inherited: Arc<Inherited>,
    me: Weak<SubagentRuntime>,
}

/// Everything a shareable child agent is built from.
#[derive(PartialEq, Eq, Hash)]
struct BuiltKey {
    agent: String,
    parent_depth: u32,
    model: String,
    /// The parent's tools the child gets: (name, address of the tool object).
    tools: Vec<(String, usize)>,
    /// The address of what the parent passes down.
    inherited: usize,
}

/// Built agents and their workspaces by [`BuiltKey`], with what the parent passed down
/// (kept so the address in the key stays taken).
type BuiltAgents = HashMap<
    BuiltKey,
    (
        cadre_engine::Agent,
        Arc<cadre_tools::Workspace>,
        Arc<Inherited>,
    ),
>;

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
        ApprovalDecision::Refused {
            policy: "subagents.background_approvals = \"deny\"".into(),
            feedback: Some(format!(
                "{} needs approval, and background sub-agents cannot ask for it. Do without it and report what you could not do.",
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
        let persist = cfg.store.clone().map(|store| Persist { store });
        let top_inherited = Arc::new(Inherited {
            hooks: cfg.hooks.clone(),
            permissions: cfg.permissions.clone(),
            limits: cfg.parent_limits,
            sandbox: cfg
                .sandbox
                .as_ref()
                .map(|s| s.main_policy(&cfg.main_workspace))
                .unwrap_or_default(),
        });
        let runtime = Arc::new_cyclic(|me| Self {
            persist,
            detached: std::sync::atomic::AtomicBool::new(false),
            shutdown_reason: std::sync::OnceLock::new(),
            cfg,
            registry,
            skills,
            providers,
            tracker: TaskTracker::default(),
            root_cancel: CancellationToken::new(),
            slots: Mutex::new(HashMap::new()),
            live: LiveChildren::default(),
            built: Mutex::new(HashMap::new()),
            top_inherited,
            me: me.clone(),
        });
        runtime.watch_cancellations();
        runtime
    }

    /// With a store: cancel requests written by any process or node reach the children
    /// running here (LISTEN/NOTIFY on PostgreSQL, polling on SQLite).
    fn watch_cancellations(&self) {
        let (Some(p), Ok(handle)) = (&self.persist, tokio::runtime::Handle::try_current()) else {
            return;
        };
        let store = p.store.clone();
        let tracker = self.tracker.clone();
        let stop = self.root_cancel.clone();
        handle.spawn(async move {
            let node = store.node_id().clone();
            let mut watch = match store.watch_cancellations(&node).await {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch for cancellations");
                    return;
                }
            };
            loop {
                tokio::select! {
                    id = watch.recv() => match id {
                        Some(id) => {
                            let _ = tracker.request_cancel(&id);
                        }
                        None => return,
                    },
                    _ = stop.cancelled() => return,
                }
            }
        });
    }

    /// The persistent store, if the runtime has one.
    pub fn store(&self) -> Option<&Arc<dyn cadre_store::TaskStore>> {
        self.persist.as_ref().map(|p| &p.store)
    }

    /// Move a foreground task to the background (timeout promotion), here and in the store.
    pub async fn promote(&self, id: &str) {
        self.tracker.promote(id);
        if let Some(p) = &self.persist
            && let Err(e) = p.store.promote(id).await
        {
            tracing::warn!(task = id, error = %e, "store: promote failed");
        }
    }

    /// Mark a task's result delivered to the parent, here and in the store.
    pub async fn mark_delivered(&self, id: &str) {
        self.tracker.mark_delivered(id);
        if let Some(p) = &self.persist
            && let Err(e) = p.store.mark_delivered(id).await
        {
            tracing::warn!(task = id, error = %e, "store: mark delivered failed");
        }
    }

    /// Request cancellation of a task of `session`, wherever it runs: the local child stops
    /// at once; a task owned by another process or node is flagged in the store and its owner
    /// stops it. `None` when the session has no such task.
    pub async fn cancel_task(&self, session: &str, id: &str) -> Option<TaskStatus> {
        let local = self
            .tracker
            .get(id)
            .filter(|t| t.parent_session_id == session)
            .and_then(|_| self.tracker.request_cancel(id).ok());
        let stored = match &self.persist {
            Some(p) => match p.store.get(id).await {
                Ok(Some(r)) if r.parent_session_id == session => {
                    p.store.request_cancel(id).await.ok()
                }
                _ => None,
            },
            None => None,
        };
        local.or(stored)
    }

    /// A task of `session`: the live local view, else the store's record.
    pub async fn task(&self, session: &str, id: &str) -> Option<TaskSnapshot> {
        if let Some(t) = self
            .tracker
            .get(id)
            .filter(|t| t.parent_session_id == session)
        {
            return Some(t);
        }
        let p = self.persist.as_ref()?;
        match p.store.get(id).await {
            Ok(Some(r)) if r.parent_session_id == session => Some(snapshot_of(&r)),
            _ => None,
        }
    }

    /// Wait for a task of any process or node: the local watch when it runs here, else the
    /// store (notifications on PostgreSQL, polling on SQLite). Never cancels the task.
    pub async fn wait_task(
        &self,
        id: &str,
        abort: &CancellationToken,
        timeout: Duration,
    ) -> Waited {
        if self.tracker.get(id).is_some() {
            return self.wait_for(id, abort, Some(timeout)).await;
        }
        let Some(p) = &self.persist else {
            return Waited::Unknown;
        };
        tokio::select! {
            r = p.store.wait_terminal(id, timeout) => match r {
                Ok(Some(rec)) => Waited::Done(Box::new(snapshot_of(&rec))),
                Ok(None) => Waited::TimedOut,
                Err(e) => {
                    tracing::warn!(task = id, error = %e, "store: waiting failed");
                    Waited::Unknown
                }
            },
            _ = abort.cancelled() => Waited::Aborted,
        }
    }

    /// Every task of `session`, oldest first: the store's records (tasks of earlier processes
    /// included) with the live local view where there is one.
    pub async fn tasks_of(&self, session: &str) -> Vec<TaskSnapshot> {
        let local = self.tracker.of_session(session);
        let Some(p) = &self.persist else {
            return local;
        };
        match p.store.list_by_session(session).await {
            Ok(records) => {
                let mut out: Vec<TaskSnapshot> = records
                    .iter()
                    .map(|r| {
                        local
                            .iter()
                            .find(|l| l.id == r.id)
                            .cloned()
                            .unwrap_or_else(|| snapshot_of(r))
                    })
                    .collect();
                for l in local {
                    if !out.iter().any(|o| o.id == l.id) {
                        out.push(l);
                    }
                }
                out
            }
            Err(e) => {
                tracing::warn!(error = %e, "store: listing tasks failed; showing this process's");
                local
            }
        }
    }

    /// The definitions.
    pub fn registry(&self) -> &AgentRegistry {
        &self.registry
    }

    /// The settings.
    pub fn config(&self) -> &RuntimeConfig {
        &self.cfg
    }

    /// The result of a finished task as its parent model is shown it: whole, or above
    /// `max_result_bytes` stored under `.cadre/results/` and shown by its head.
    pub fn shown_result(&self, snap: &TaskSnapshot) -> crate::results::ShownResult {
        crate::results::shown_result(
            snap.result.as_deref().unwrap_or(""),
            &snap.id,
            &self.cfg.main_workspace.join(".cadre").join("results"),
            self.cfg.max_result_bytes,
        )
    }

    /// The task tracker.
    pub fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    /// Cancel every child (process shutdown, Ctrl-C).
    pub fn shutdown(&self) {
        self.root_cancel.cancel();
    }

    /// Cancel every child and wait (up to `timeout`) until each has recorded its end state,
    /// so a process that exits leaves honest records. Returns how many did not finish in time.
    pub async fn shutdown_and_drain(&self, timeout: Duration) -> usize {
        self.root_cancel.cancel();
        let waits = self
            .tracker
            .unfinished()
            .into_iter()
            .map(|mut rx| async move {
                let _ = rx.wait_for(|s| s.is_terminal()).await;
            });
        let all = futures::future::join_all(waits);
        match tokio::time::timeout(timeout, all).await {
            Ok(_) => 0,
            Err(_) => self.tracker.unfinished().len(),
        }
    }

    /// Say why the process is shutting down, before cancelling: every task cancelled from
    /// now on records `reason` as its error. The first reason given stays.
    pub fn set_shutdown_reason(&self, reason: impl Into<String>) {
        let _ = self.shutdown_reason.set(reason.into());
    }

    /// Why the process is shutting down, once [`set_shutdown_reason`] said so.
    ///
    /// [`set_shutdown_reason`]: Self::set_shutdown_reason
    pub fn shutdown_reason(&self) -> Option<String> {
        self.shutdown_reason.get().cloned()
    }

    /// Stop holding finished parents open for their background tasks (`cadre run --detach`).
    pub fn detach_background(&self) {
        self.detached
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// True after [`detach_background`](Self::detach_background).
    pub fn is_detached(&self) -> bool {
        self.detached.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// What top-level parents pass down to their children.
    pub fn top_inherited(&self) -> &Arc<Inherited> {
        &self.top_inherited
    }

    /// The delegation tools of a top-level agent, per the configured surface.
    pub fn delegation_tools(&self) -> ToolRegistry {
        self.delegation_tools_for(&self.top_inherited)
    }

    fn built_agents(&self) -> std::sync::MutexGuard<'_, BuiltAgents> {
        match self.built.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
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

    /// Start a one-off child (the `task` tool). It is checked now and built when it gets a
    /// slot; it runs in its own task, and foreground callers wait with [`wait`](Self::wait).
    pub async fn spawn(&self, req: SpawnRequest, parent: &Parent) -> Result<Started, SpawnError> {
        let own = self.own_servers(&req.agent, parent).await;
        let mut plan = self.plan_child(&req.agent, parent, own)?;
        let isolation = req
            .isolation
            .or_else(|| self.registry.get(&req.agent).and_then(|d| d.isolation));
        if isolation == Some(crate::Isolation::Worktree) {
            if plan.remote.is_some() {
                return Err(SpawnError::Isolation(format!(
                    "agent {} runs remotely; isolation: worktree applies to local agents",
                    plan.agent
                )));
            }
            plan.worktree = Some(
                crate::worktree::WorktreeSpec::prepare(&parent.root, &self.cfg.main_workspace)
                    .await?,
            );
        }
        self.start_job(
            JobChild::Planned(Box::new(plan)),
            req.prompt,
            req.description,
            req.background,
            parent,
        )
        .await
    }

    /// Give `child` a message to work on, as a new task. The child keeps its history; a child
    /// already busy takes the message when its current task ends.
    pub async fn start(
        &self,
        child: &Child,
        prompt: String,
        description: String,
        background: bool,
        parent: &Parent,
    ) -> Result<Started, SpawnError> {
        self.start_job(
            JobChild::Ready(child.clone()),
            prompt,
            description,
            background,
            parent,
        )
        .await
    }

    async fn start_job(
        &self,
        child: JobChild,
        prompt: String,
        description: String,
        background: bool,
        parent: &Parent,
    ) -> Result<Started, SpawnError> {
        let task_id = new_task_id();
        let name = child.name().to_string();
        let session_id = child.session_id().to_string();
        if let Some(p) = &self.persist {
            p.created(TaskStart {
                id: &task_id,
                agent: &name,
                parent_agent: &parent.run.agent,
                parent_session_id: &parent.run.session_id,
                child_session_id: &session_id,
                user_id: parent.run.user_id.as_deref(),
                prompt: &prompt,
                description: &description,
                background,
                remote: child.remote().map(|r| (r.url.as_str(), &r.headers)),
            })
            .await
            .map_err(|e| SpawnError::Store(e.to_string()))?;
        }
        let cancel = if background {
            self.root_cancel.child_token()
        } else {
            parent.cancel.child_token()
        };
        let job_description = description.clone();
        self.tracker.insert(
            NewTask {
                id: task_id.clone(),
                agent: name.clone(),
                parent_session_id: parent.run.session_id.clone(),
                child_session_id: session_id.clone(),
                description,
                background,
            },
            cancel.clone(),
        );
        let forward = Arc::new(ForwardSink {
            parent: parent.run.events.clone(),
            parent_budget: parent.run.budget.clone(),
            parent_session_id: parent.run.session_id.clone(),
            parent_agent: parent.run.agent.clone(),
            parent_task_id: parent.run.task_id.clone(),
            agent: name.clone(),
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
            session_id: session_id.clone(),
            agent: name.clone(),
            model: child.model().to_string(),
            task_id: Some(task_id.clone()),
            user_id: parent.run.user_id.clone(),
            parent_session_id: Some(parent.run.session_id.clone()),
            depth: child.depth(),
            tool_grant: child.grant().clone(),
            budget: parent.run.budget.clone(),
            trace_id: parent.run.trace_id.clone(),
            events: forward.clone() as Arc<dyn EventSink>,
            approvals,
        });
        let span = tracing::info_span!("subagent", agent = %name, task = %task_id, session = %session_id, depth = child.depth());
        let job = ChildJob {
            task_id: task_id.clone(),
            child,
            runtime: self.me.clone(),
            prompt,
            description: job_description,
            run: child_run,
            cancel,
            slot: self.slot(&parent.run.session_id),
            tracker: self.tracker.clone(),
            forward,
            persist: self.persist.clone(),
        };
        tokio::spawn(job.run().instrument(span));
        Ok(Started {
            task_id,
            session_id,
        })
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

    /// Wait for a foreground task of `parent`: when the parent's token fires the task is
    /// cancelled too and waited for, unless the parent stops because its budget ran out (the
    /// child's ran out with it, and it ends `limit reached` by itself with its partial
    /// output); when `timeout` passes, `None` (the task keeps running).
    pub async fn wait(
        &self,
        task_id: &str,
        parent: &Parent,
        timeout: Option<Duration>,
    ) -> Option<TaskSnapshot> {
        match self.wait_for(task_id, &parent.cancel, timeout).await {
            Waited::Done(s) => Some(*s),
            Waited::TimedOut | Waited::Unknown => None,
            Waited::Aborted => {
                if parent.run.budget.exceeded().is_none() {
                    let _ = self.tracker.request_cancel(task_id);
                }
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

    /// Create a live child of `agent` with an optional label, scoped to the parent session
    /// (and recorded in the store, so it can be found again after a restart).
    pub async fn spawn_live(
        &self,
        agent: &str,
        label: Option<String>,
        parent: &Parent,
    ) -> Result<Arc<LiveChild>, SpawnError> {
        let session = &parent.run.session_id;
        if let Some(l) = &label
            && self.live.label_taken(session, l)
        {
            return Err(SpawnError::LabelInUse(l.clone()));
        }
        let child = self.open_child(agent, parent).await?;
        let key = format!("agent:{}:{}", child.name, uuid::Uuid::new_v4());
        let live = LiveChild {
            key,
            agent_id: child.name.clone(),
            label,
            child,
            last_task: Mutex::new(None),
        };
        if let Some(p) = &self.persist {
            p.live_child(session, &live).await.map_err(|e| match e {
                cadre_store::StoreError::LabelInUse(_) => {
                    SpawnError::LabelInUse(live.label.clone().unwrap_or_default())
                }
                other => SpawnError::Store(other.to_string()),
            })?;
        }
        self.live
            .add(session, live)
            .map_err(|e| SpawnError::LabelInUse(e.0))
    }

    /// A live child of the parent session by key or label: the one in memory, else the one
    /// recorded in the store, rebuilt with its history from its transcript.
    pub async fn find_live(
        &self,
        parent: &Parent,
        key: Option<&str>,
        label: Option<&str>,
    ) -> Result<Option<Arc<LiveChild>>, SpawnError> {
        let session = &parent.run.session_id;
        let here = match (key, label) {
            (Some(k), _) => self.live.by_key(session, k),
            (None, Some(l)) => self.live.by_label(session, l),
            (None, None) => None,
        };
        if here.is_some() {
            return Ok(here);
        }
        let Some(p) = &self.persist else {
            return Ok(None);
        };
        let found = match (key, label) {
            (Some(k), _) => p.store.find_live_by_key(session, k).await,
            (None, Some(l)) => p.store.find_live_by_label(session, l).await,
            (None, None) => Ok(None),
        }
        .map_err(|e| SpawnError::Store(e.to_string()))?;
        let Some(entry) = found else {
            return Ok(None);
        };
        let at = parent.at_depth(entry.depth.saturating_sub(1));
        let own = self.own_servers(&entry.agent_id, &at).await;
        let child = self.build_child(&entry.agent_id, &at, Some(&entry.child_session_id), own)?;
        let live = LiveChild {
            key: entry.agent_key,
            agent_id: entry.agent_id,
            label: entry.label,
            child,
            last_task: Mutex::new(None),
        };
        // Another call may have restored it meanwhile; keep the first.
        match self.live.add(session, live) {
            Ok(c) => Ok(Some(c)),
            Err(_) => Ok(match (key, label) {
                (Some(k), _) => self.live.by_key(session, k),
                (None, Some(l)) => self.live.by_label(session, l),
                (None, None) => None,
            }),
        }
    }

    /// Run `agent` in the foreground for `parent` and wait for it (the `@agent` direct run).
    pub async fn run_direct(
        &self,
        agent: &str,
        prompt: String,
        parent: &Parent,
    ) -> Result<TaskSnapshot, SpawnError> {
        let started = self
            .spawn(
                SpawnRequest {
                    agent: agent.to_string(),
                    description: crate::short_title(&prompt),
                    prompt,
                    background: false,
                    isolation: None,
                },
                parent,
            )
            .await?;
        match self.wait(&started.task_id, parent, None).await {
            Some(s) => Ok(s),
            None => Err(SpawnError::UnknownAgent(agent.to_string())),
        }
    }
}
