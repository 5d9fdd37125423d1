//! The sub-agent runtime: one implementation behind every delegation surface. It prepares a
//! child (definition → workspace, prompt, narrowed tools, model, limits), runs it on the same
//! engine with a fresh `sub-<uuid>` session in its own tokio task, tracks it as a task, and
//! lets callers wait for it, cancel it or leave it running in the background.

mod adoption;
pub mod agent_policy;
pub(crate) mod agent_servers;
mod background_deny;
mod build;
pub(crate) mod checkpoint;
pub(crate) mod child_hooks;
pub(crate) mod child_job;
pub(crate) mod child_setup;
mod config;
pub(crate) mod forward;
mod job_run;
mod job_worktree;
mod lease;
pub mod live;
pub(crate) mod narrowing;
pub mod progress;
pub(crate) mod remote;
pub mod results;
mod servers;
use servers::ChildRoot;
pub mod spool;
mod start;
pub mod teams;
pub(crate) mod tracker;
mod types;
pub mod worktree;

pub use adoption::{Adopter, ELSEWHERE_LIMIT, Elsewhere};
pub use config::{BackgroundApprovals, RuntimeConfig, SandboxSettings, ToolSurface};
pub(crate) use types::RuntimeRef;
pub use types::{
    Child, ChildRunner, Inherited, LiveRequest, Parent, SpawnError, SpawnRequest, Started, Waited,
};
pub(crate) use types::{
    ChildMessage, ChildPlan, Decided, JobChild, JobStart, Resumed, Taking, WaitedHere,
};

use crate::definitions::registry::AgentRegistry;
use crate::definitions::skills::SkillSet;
use crate::runtime::child_job::ChildJob;
use crate::runtime::forward::ForwardSink;
use crate::runtime::live::{LiveChild, LiveChildren};
use crate::runtime::progress::ProgressLine;
use crate::runtime::spool::Spool;
use crate::runtime::tracker::{LocalTasks, Registered};
use cadre_llm::ProviderRegistry;
use cadre_store::{LiveChildEntry, StoreError, TaskRecord, TaskStore};
use cadre_tools::{ApprovalHandler, RunContext, ToolRegistry};
use cadre_types::{EventSink, TaskStatus};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// How long "no timeout" waits on the store (far beyond any run).
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
/// How long closing a live child waits for each of its cancelled tasks to end.
const CLOSE_WAIT: Duration = Duration::from_secs(30);

/// The runtime. Create with [`SubagentRuntime::new`]; share the `Arc`.
///
/// Task state has one owner, the configured [`TaskStore`]: every reader (the delegation
/// tools, `cadre serve`, `cadre tasks`) reads it there. The runtime keeps only what cannot be
/// stored, for the tasks it runs: their cancellation tokens, status watches and progress.
pub struct SubagentRuntime {
    store: Arc<dyn TaskStore>,
    detached: std::sync::atomic::AtomicBool,
    /// Top-level runs end when their model is done; see [`SubagentRuntime::release_top_level`].
    top_released: std::sync::atomic::AtomicBool,
    /// Why the process is shutting down (`cadre received SIGTERM`), once it is: the reason
    /// the tasks it cancels record.
    shutdown_reason: std::sync::OnceLock<String>,
    cfg: RuntimeConfig,
    registry: AgentRegistry,
    skills: SkillSet,
    providers: Arc<ProviderRegistry>,
    local: LocalTasks,
    root_cancel: CancellationToken,
    live: Arc<LiveChildren>,
    /// Built agents shared by children that would be built the same.
    built: Mutex<BuiltAgents>,
    /// What top-level parents pass down: the configured hooks, permissions and limits.
    top_inherited: Arc<Inherited>,
    /// Ends the store could not take, kept until it can (and read here meanwhile).
    spool: Arc<Spool>,
    /// Sessions whose lost tasks the next top-level run of the session takes up.
    reattach_pending: Mutex<std::collections::HashSet<String>>,
    /// The teams each session leads.
    led: teams::LedTeams,
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

impl Drop for SubagentRuntime {
    /// Nothing can reach the runtime any more: its background children and its watch of the
    /// store stop (a foreground child stops with its caller anyway).
    fn drop(&mut self) {
        self.root_cancel.cancel();
    }
}

impl std::fmt::Debug for SubagentRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentRuntime")
            .field("agents", &self.registry.names())
            .finish_non_exhaustive()
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
        let store = cfg.store.clone();
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
        let spool = Spool::new(Spool::dir_of(&cfg.main_workspace));
        let runtime = Arc::new_cyclic(|me| Self {
            spool,
            store,
            detached: std::sync::atomic::AtomicBool::new(false),
            top_released: std::sync::atomic::AtomicBool::new(false),
            shutdown_reason: std::sync::OnceLock::new(),
            cfg,
            registry,
            skills,
            providers,
            local: LocalTasks::default(),
            root_cancel: CancellationToken::new(),
            reattach_pending: Mutex::default(),
            live: Arc::default(),
            built: Mutex::new(HashMap::new()),
            top_inherited,
            led: teams::LedTeams::default(),
            me: me.clone(),
        });
        runtime.watch_cancellations();
        runtime
            .spool
            .spawn_flusher(runtime.store.clone(), runtime.root_cancel.clone());
        runtime
    }

    /// Cancel requests written by any process or node reach the children running here
    /// (LISTEN/NOTIFY on PostgreSQL, polling on SQLite, at once in memory).
    fn watch_cancellations(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.store.clone();
        let local = self.local.clone();
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
                            local.cancel(&id);
                        }
                        None => return,
                    },
                    _ = stop.cancelled() => return,
                }
            }
        });
    }

    /// The teams each session leads (formed by spawning into them here).
    pub fn led_teams(&self) -> &teams::LedTeams {
        &self.led
    }

    /// The task store, the one owner of task state.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.store
    }

    /// Move a foreground task to the background (timeout promotion): its result will be
    /// delivered to the parent.
    pub async fn promote(&self, id: &str) {
        if let Err(e) = self.store.promote(id).await {
            tracing::warn!(task = id, error = %e, "store: promote failed");
        }
        self.local.promote(id);
    }

    /// Mark a task's result, as read in `t`, delivered to the parent. A background task's
    /// record that says it is delivered costs no write (it cannot become undelivered). A
    /// foreground record is written anyway: it may be older than the task's promotion to
    /// the background (a record read from the spool is as the task was created).
    pub async fn mark_delivered(&self, t: &TaskRecord) {
        if t.background && t.delivered {
            return;
        }
        let id = t.id.as_str();
        if let Err(e) = self.store.mark_delivered(id).await {
            tracing::warn!(task = id, error = %e, "store: mark delivered failed");
        }
    }

    /// Request cancellation of a task of `session`, wherever it runs: the request is stored
    /// (its owner, another process or node, stops the child), and a child running here stops
    /// at once. `None` when the session has no such task.
    pub async fn cancel_task(&self, session: &str, id: &str) -> Option<TaskStatus> {
        self.task(session, id).await?;
        let status = match self.store.request_cancel(id).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(task = id, error = %e, "store: cancel request failed");
                return None;
            }
        };
        self.local.cancel(id);
        Some(status)
    }

    /// A task of `session`, as stored.
    pub async fn task(&self, session: &str, id: &str) -> Option<TaskRecord> {
        self.task_record(id)
            .await
            .filter(|r| r.parent_session_id == session)
    }

    /// Any task, as stored (or as it ended here, while its end waits in the spool for the
    /// store).
    pub async fn task_record(&self, id: &str) -> Option<TaskRecord> {
        if let Some(r) = self.spool.record(id) {
            return Some(r);
        }
        match self.store.get(id).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(task = id, error = %e, "store: reading a task failed");
                None
            }
        }
    }

    /// Every task of `session`, oldest first (tasks of earlier processes and other nodes
    /// included).
    pub async fn tasks_of(&self, session: &str) -> Vec<TaskRecord> {
        let spooled = self.spool.records_of(session);
        let mut records = match self.store.list_by_session(session).await {
            Ok(records) => records,
            Err(e) => {
                tracing::warn!(error = %e, "store: listing tasks failed");
                Vec::new()
            }
        };
        // An end waiting in the spool is newer than the stored record.
        for s in spooled {
            match records.iter_mut().find(|r| r.id == s.id) {
                Some(r) => *r = s,
                None => records.push(s),
            }
        }
        records
    }

    /// The spool of ends the store could not take.
    pub fn spool(&self) -> &Arc<Spool> {
        &self.spool
    }

    /// A task's recent progress, oldest first, while it runs here.
    pub fn progress_of(&self, id: &str) -> Vec<ProgressLine> {
        self.local.log_of(id)
    }

    /// The tokens a task has used so far, while it runs here (its stored record gets the
    /// total when it ends).
    pub fn live_usage(&self, id: &str) -> Option<cadre_types::Usage> {
        self.local.usage_of(id)
    }

    /// A watch of a task's status, while it runs here.
    pub fn watch_status(&self, id: &str) -> Option<watch::Receiver<TaskStatus>> {
        self.local.watch(id)
    }

    /// True while the task runs in this process.
    pub fn runs_here(&self, id: &str) -> bool {
        self.local.contains(id)
    }

    /// True while the task runs in this process for a parent of `session`.
    pub fn runs_here_for(&self, session: &str, id: &str) -> bool {
        self.local.runs_for(id, session)
    }

    /// How many tasks run here right now (and so hold memory here).
    pub fn running_here(&self) -> usize {
        self.local.len()
    }

    /// How many parent sessions have tasks running here.
    pub fn sessions_here(&self) -> usize {
        self.local.sessions()
    }

    /// Background tasks of `session` running here.
    pub fn open_background(&self, session: &str) -> usize {
        self.local.open_background_of(session)
    }

    pub(crate) fn local(&self) -> &LocalTasks {
        &self.local
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
    pub fn shown_result(&self, snap: &TaskRecord) -> crate::runtime::results::ShownResult {
        crate::runtime::results::shown_result(
            snap.result.as_deref().unwrap_or(""),
            &snap.id,
            &self.cfg.main_workspace.join(".cadre").join("results"),
            self.cfg.max_result_bytes,
        )
    }

    /// Cancel every child (process shutdown, Ctrl-C).
    pub fn shutdown(&self) {
        self.root_cancel.cancel();
    }

    /// Cancel every child and wait (up to `timeout`) until each has recorded its end state,
    /// so a process that exits leaves honest records. Returns how many did not finish in time.
    pub async fn shutdown_and_drain(&self, timeout: Duration) -> usize {
        self.root_cancel.cancel();
        match tokio::time::timeout(timeout, self.wait_idle()).await {
            Ok(()) => 0,
            Err(_) => self.local.len(),
        }
    }

    /// Wait until no task runs here (each has stored its end), without cancelling any.
    pub async fn wait_idle(&self) {
        loop {
            let running = self.local.unfinished();
            if running.is_empty() {
                return;
            }
            let waits = running.into_iter().map(|mut rx| async move {
                let _ = rx.wait_for(|s| s.is_terminal()).await;
            });
            futures::future::join_all(waits).await;
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

    /// Stop holding top-level runs (depth 0) open for their background tasks, while
    /// sub-agents still wait for theirs: for a conversation that goes on (the TUI), whose
    /// next run, or a run of its own ([`crate::Harness::deliver_in`]), takes the results.
    pub fn release_top_level(&self) {
        self.top_released
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a finished run at `depth` is held open for its background tasks.
    pub fn holds_for_background(&self, depth: u32) -> bool {
        let released = self.top_released.load(std::sync::atomic::Ordering::SeqCst);
        !self.is_detached() && (depth > 0 || !released)
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

    /// Register a task here, before its record is created or as it is adopted; with
    /// `try_slot`, taking a free concurrency slot for it now.
    pub(crate) fn register(
        &self,
        task_id: &str,
        parent: &Parent,
        background: bool,
        try_slot: bool,
    ) -> Registered {
        let cancel = if background {
            self.root_cancel.child_token()
        } else {
            parent.cancel.child_token()
        };
        self.local.register(
            task_id,
            &parent.run.session_id,
            background,
            cancel,
            self.cfg.max_concurrent,
            try_slot,
        )
    }

    /// Run a task whose record is stored and which is registered here: give it its child's
    /// run context and event forwarding, and start its job.
    pub(crate) fn launch(&self, start: JobStart<'_>) -> Started {
        let JobStart {
            task_id,
            child,
            background,
            parent,
            checkpoints,
            epoch,
            resumed,
            created,
            registered,
            conversation,
            message,
        } = start;
        let (prompt, description) = (created.prompt.clone(), created.description.clone());
        let name = child.name().to_string();
        let session_id = child.session_id().to_string();
        let (cancel, slot, permit) = registered.launched();
        let forward = Arc::new(ForwardSink {
            parent: parent.run.events.clone(),
            parent_budget: parent.run.budget.clone(),
            parent_session_id: parent.run.session_id.clone(),
            parent_agent: parent.run.agent.clone(),
            parent_task_id: parent.run.task_id.clone(),
            agent: name.clone(),
            task_id: task_id.clone(),
            local: self.local.clone(),
            // A resumed task's log says where it went, whoever waits for it.
            log: background || resumed.is_some(),
            lease: std::sync::OnceLock::new(),
        });
        let approvals: Arc<dyn ApprovalHandler> =
            if background && self.cfg.background_approvals == BackgroundApprovals::Deny {
                Arc::new(background_deny::BackgroundDeny)
            } else {
                parent.run.approvals.clone()
            };
        let child_run = Arc::new(RunContext {
            session_id: session_id.clone(),
            agent: name,
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
        // Opened here, in the spawning call's span, before the job is spawned: a background
        // child that outlives that call still hangs under it.
        let span = child.span(
            &task_id,
            background,
            resumed.as_ref(),
            created.trace_parent.as_deref(),
        );
        let job = ChildJob {
            task_id: task_id.clone(),
            one_off: matches!(child, JobChild::Planned(_)),
            child,
            runtime: self.me.clone(),
            live: self.live.clone(),
            prompt,
            description,
            run: child_run,
            cancel,
            slot,
            permit,
            conversation,
            _message: message,
            local: self.local.clone(),
            forward,
            store: self.store.clone(),
            checkpoints,
            epoch,
            resumed,
            created,
            spool: self.spool.clone(),
            write_retry: self.cfg.store_write_retry,
        };
        if job.created_running() {
            self.local.started(&job.task_id);
        }
        let in_flight = cadre_tools::otel::metrics::InFlight::start(job.child.name());
        tokio::spawn(
            async move {
                let _in_flight = in_flight;
                job.run().await;
            }
            .instrument(span),
        );
        Started {
            task_id,
            session_id,
        }
    }

    /// Wait until the task is terminal, `abort` fires or `timeout` passes, and read it from
    /// the store: through its status watch when it runs here (its end handed over as the
    /// store returned it, when it did, instead of read back), else through the store
    /// (notifications on PostgreSQL, polling on SQLite), so a task of any process or node can
    /// be waited for. Never cancels the task.
    pub async fn wait_for(
        &self,
        task_id: &str,
        abort: &CancellationToken,
        timeout: Option<Duration>,
    ) -> Waited {
        if let Some(r) = self.spool.record(task_id) {
            return Waited::Done(Box::new(r));
        }
        let Some((rx, end)) = self.local.watch_end(task_id) else {
            let stored = tokio::select! {
                r = self.store.wait_terminal(task_id, timeout.unwrap_or(FOREVER)) => r,
                _ = abort.cancelled() => return Waited::Aborted,
            };
            return match stored {
                Ok(Some(r)) => Waited::Done(Box::new(r)),
                Ok(None) => Waited::TimedOut,
                Err(StoreError::NotFound(_)) => Waited::Unknown,
                Err(e) => {
                    tracing::warn!(task = task_id, error = %e, "store: waiting failed");
                    Waited::Unknown
                }
            };
        };
        match wait_on(rx, abort, timeout).await {
            // Its end as the store returned it (boxed before the match: a record matched on
            // across the read's await is laid beside the wait in this future), else as it
            // reads now.
            WaitedHere::Ended => match end.record().map(Box::new) {
                Some(r) => Waited::Done(r),
                None => self.stored_end(task_id).await,
            },
            WaitedHere::Aborted => Waited::Aborted,
            WaitedHere::TimedOut => Waited::TimedOut,
        }
    }

    /// The end of a task whose watch here told it ended, as stored (or spooled): it was
    /// stored before the watch saw it. `Unknown` if it is not there.
    pub(crate) async fn stored_end(&self, task_id: &str) -> Waited {
        match self.task_record(task_id).await {
            Some(r) if r.status.is_terminal() => Waited::Done(Box::new(r)),
            _ => Waited::Unknown,
        }
    }

    /// Wait until a task running here for `session` ends, `abort` fires or `timeout` passes,
    /// to take its result: its delivery is then written with its end, and the task comes
    /// back as stored. A wait that ends while the end is being written for it waits for that
    /// write, which delivers it.
    pub(crate) async fn wait_to_take(
        &self,
        session: &str,
        task_id: &str,
        abort: &CancellationToken,
        timeout: Option<Duration>,
    ) -> Taking {
        let Some((rx, end)) = self.local.take_end(task_id, session) else {
            return Taking::Ended;
        };
        let mut waited = wait_on(rx.clone(), abort, timeout).await;
        if waited != WaitedHere::Ended && !end.withdraw() {
            waited = wait_on(rx, &CancellationToken::new(), None).await;
        }
        match waited {
            WaitedHere::Ended => match end.record() {
                Some(r) if end.claimed() => Taking::Taken(Box::new(r)),
                _ if end.claimed() => Taking::Claimed,
                _ => Taking::Ended,
            },
            WaitedHere::TimedOut => Taking::TimedOut,
            WaitedHere::Aborted => Taking::Aborted,
        }
    }

    /// A task of `session` that has ended, marked delivered whether or not it was (one
    /// write on SQLite). `None` otherwise (it runs, is another session's or unknown, its end
    /// waits in the spool, or the store failed); the caller then reads it as usual.
    pub(crate) async fn deliver_finished(
        &self,
        session: &str,
        task_id: &str,
    ) -> Option<TaskRecord> {
        if self.spool.record(task_id).is_some() {
            return None;
        }
        match self.store.deliver_finished(task_id, session).await {
            Ok(shown) => shown,
            Err(e) => {
                tracing::warn!(task = task_id, error = %e, "store: delivering a finished task failed");
                None
            }
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
    ) -> Option<TaskRecord> {
        match self.wait_for(task_id, &parent.cancel, timeout).await {
            Waited::Done(s) => Some(*s),
            Waited::TimedOut | Waited::Unknown => None,
            Waited::Aborted => {
                if parent.run.budget.exceeded().is_none() {
                    self.local.cancel(task_id);
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

    /// A live child of the parent session by key or label: the one in memory, else the one
    /// recorded in the store, rebuilt with its history from its transcript (and in its
    /// worktree, when it has one).
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
        let found = match (key, label) {
            (Some(k), _) => self.store.find_live_by_key(session, k).await,
            (None, Some(l)) => self.store.find_live_by_label(session, l).await,
            (None, None) => Ok(None),
        }?;
        let Some(entry) = found else {
            return Ok(None);
        };
        let at = parent.at_depth(entry.depth.saturating_sub(1));
        let worktree = self.reopen_worktree(&entry, &at).await?;
        let root = worktree.as_ref().map(|w| w.root());
        let in_root = root.as_deref().map_or(ChildRoot::Planned, ChildRoot::At);
        let own = self.own_servers_at(&entry.agent_id, &at, in_root).await;
        let child = self.build_child(
            &entry.agent_id,
            &at,
            Some(&entry.child_session_id),
            own,
            worktree,
        )?;
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

    /// The worktree of a live child restored from the store: the one it had (its directory,
    /// or its branch added back), else a new one when its definition asks for isolation.
    async fn reopen_worktree(
        &self,
        entry: &LiveChildEntry,
        parent: &Parent,
    ) -> Result<Option<Arc<crate::runtime::worktree::Worktree>>, SpawnError> {
        let wants = self
            .registry
            .get(&entry.agent_id)
            .is_some_and(|d| d.isolation.is_some());
        let name = crate::runtime::worktree::live_name(&entry.agent_key);
        let spec = match crate::runtime::worktree::WorktreeSpec::prepare(
            &parent.root,
            &self.cfg.main_workspace,
        )
        .await
        {
            Ok(spec) => spec,
            Err(e) if wants => return Err(e.into()),
            Err(_) => return Ok(None),
        };
        let worktree = match crate::runtime::worktree::Worktree::reopen(
            &spec,
            &name,
            &entry.agent_id,
        )
        .await?
        {
            Some(w) => Some(w),
            None if wants => Some(
                crate::runtime::worktree::Worktree::create(&spec, &name, &entry.agent_id).await?,
            ),
            None => None,
        };
        Ok(worktree.map(Arc::new))
    }

    /// Close a live child of the parent session: it is forgotten (here and in the store),
    /// its unfinished tasks are cancelled and waited for, and its worktree, if it has one, is
    /// removed (the branch stays when it has commits). Returns the worktree's report.
    pub async fn close_live(
        &self,
        session: &str,
        child: &LiveChild,
    ) -> Option<crate::runtime::worktree::WorktreeReport> {
        self.live.remove(session, &child.key);
        if let Err(e) = self.store.remove_live_child(session, &child.key).await {
            tracing::warn!(agent = %child.key, error = %e, "store: cannot forget a live child");
        }
        if let Some(w) = &child.child.worktree {
            // From here on no task of it starts (each checks before it runs).
            w.mark_closed();
        }
        self.stop_tasks(session, &child.child).await;
        self.close_worktree(&child.child).await
    }

    /// The life of a live child in a worktree is over (the one-off parent that spawned it
    /// ended): refuse its further tasks, stop and wait for those it has, and remove its
    /// worktree. A child without a worktree is only forgotten, as before.
    pub(crate) async fn end_live(&self, session: &str, child: &Child) {
        let Some(w) = &child.worktree else {
            return;
        };
        w.mark_closed();
        self.stop_tasks(session, child).await;
        self.close_worktree(child).await;
    }

    /// Cancel the unfinished tasks of a live child of `session` and wait for each to end
    /// (a while: one running on a node that died is left to the sweeper).
    async fn stop_tasks(&self, session: &str, child: &Child) {
        let unfinished: Vec<String> = self
            .tasks_of(session)
            .await
            .into_iter()
            .filter(|t| {
                !t.status.is_terminal()
                    && t.child_session_id.as_deref() == Some(child.session_id.as_str())
            })
            .map(|t| t.id)
            .collect();
        for id in &unfinished {
            self.cancel_task(session, id).await;
        }
        for id in &unfinished {
            let _ = self
                .wait_for(id, &CancellationToken::new(), Some(CLOSE_WAIT))
                .await;
        }
    }

    async fn close_worktree(
        &self,
        child: &Child,
    ) -> Option<crate::runtime::worktree::WorktreeReport> {
        let w = child.worktree.as_ref()?;
        Some(w.close(&format!("cadre: {} closed", child.name)).await)
    }

    /// Run `agent` in the foreground for `parent` and wait for it (the `@agent` direct run).
    pub async fn run_direct(
        &self,
        agent: &str,
        prompt: String,
        parent: &Parent,
    ) -> Result<TaskRecord, SpawnError> {
        let started = self
            .spawn(
                SpawnRequest {
                    agent: agent.to_string(),
                    description: crate::short_title(&prompt),
                    prompt,
                    background: false,
                    isolation: None,
                    call_id: None,
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

/// Wait on a task's status watch until it shows an end, `abort` fires or `timeout` passes.
async fn wait_on(
    mut rx: watch::Receiver<TaskStatus>,
    abort: &CancellationToken,
    timeout: Option<Duration>,
) -> WaitedHere {
    let limit = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = rx.wait_for(|s| s.is_terminal()) => WaitedHere::Ended,
        _ = abort.cancelled() => WaitedHere::Aborted,
        _ = limit => WaitedHere::TimedOut,
    }
}
