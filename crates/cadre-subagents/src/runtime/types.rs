//! The runtime's request, handle and error types.

use super::SubagentRuntime;
use crate::definitions::definition::RemoteSpec;
use crate::runtime::child_setup::SetupError;
use crate::runtime::remote::RemoteExecutor;
use cadre_engine::{Agent, Limits, PermissionPolicy, Session, ToolHook};
use cadre_tools::{RunContext, ToolGrant, ToolRegistry, Workspace};
use std::sync::{Arc, Mutex, Weak};
use tokio_util::sync::CancellationToken;

/// Why a child could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// No such agent.
    #[error("Unknown agent_id: {0}")]
    UnknownAgent(String),
    /// The depth cap.
    #[error("maximum spawn depth exceeded (max={0})")]
    DepthExceeded(u32),
    /// Workspace preparation failed.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The worktree of `isolation: worktree` could not be made.
    #[error(transparent)]
    Worktree(#[from] crate::runtime::worktree::WorktreeError),
    /// Isolation was asked for where it cannot apply.
    #[error("{0}")]
    Isolation(String),
    /// The child could not join the team it was spawned into.
    #[error("team: {0}")]
    Team(#[from] crate::runtime::teams::TeamError),
    /// The model could not be resolved.
    #[error("agent {agent}: {message}")]
    Model {
        /// Agent.
        agent: String,
        /// Why.
        message: String,
    },
    /// A factory failed.
    #[error("agent {agent}: factory failed: {source}")]
    Factory {
        /// Agent.
        agent: String,
        /// Why.
        source: crate::FactoryError,
    },
    /// Remote agents are run by the remote layer.
    #[error("agent {0} is remote, and this runtime has no remote executor configured")]
    Remote(String),
    /// The task store refused or failed the write.
    #[error("task store: {0}")]
    Store(#[from] cadre_store::StoreError),
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

/// How a delegation tool reaches its runtime: without owning it. The runtime holds live
/// children, a child holds its delegation tools, and a tool that held the runtime would keep
/// all three alive for ever; this is upgraded for each call instead.
#[derive(Clone)]
pub(crate) struct RuntimeRef(Weak<SubagentRuntime>);

impl RuntimeRef {
    /// A reference to `runtime`.
    pub(crate) fn new(runtime: &Arc<SubagentRuntime>) -> Self {
        Self(Arc::downgrade(runtime))
    }

    /// The runtime, if it still exists.
    pub(crate) fn upgrade(&self) -> Option<Arc<SubagentRuntime>> {
        self.0.upgrade()
    }

    /// The runtime for a call; an error the model sees once it is gone.
    pub(crate) fn get(&self) -> Result<Arc<SubagentRuntime>, cadre_tools::ToolError> {
        self.upgrade().ok_or_else(|| {
            cadre_tools::ToolError::Failed("the sub-agent runtime has shut down".to_string())
        })
    }
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
    /// Run the child in its own git worktree (besides definitions that always do).
    pub isolation: Option<crate::Isolation>,
    /// The parent's tool call that asks for it (a `task` call), recorded with the task so
    /// that the parent, resumed after a crash, takes this child's end as the call's result
    /// instead of starting another child.
    pub call_id: Option<String>,
}

/// What to create as a live child (`agent_spawn`).
#[derive(Debug, Clone, Default)]
pub struct LiveRequest {
    /// The sub-agent's name.
    pub agent: String,
    /// A name to address it by, unique in the parent session.
    pub label: Option<String>,
    /// Run it in its own git worktree for its whole life (besides definitions that always
    /// do).
    pub isolation: Option<crate::Isolation>,
    /// Its first message, started as a task as it is created (stored with it, in one write
    /// where the store can).
    pub task: Option<String>,
    /// Whether that task runs in the background.
    pub background: bool,
}

/// What a parent passes down to its children: every child runs under its hooks and its
/// approval policy, and `general-purpose` also mirrors its limits.
#[derive(Clone)]
pub struct Inherited {
    /// Hooks around every tool call of a child (the parent's, without its own guard).
    pub hooks: Vec<Arc<dyn ToolHook>>,
    /// The approval mode and rules a child starts from.
    pub permissions: PermissionPolicy,
    /// The parent's own limits, which `general-purpose` mirrors.
    pub limits: Limits,
    /// The sandbox the parent's processes run in: a child's is narrowed to it.
    pub sandbox: cadre_sandbox::SandboxPolicy,
}

/// The parent side of a spawn: who asks, what it has, and how cancellation reaches a
/// foreground child.
#[derive(Clone)]
pub struct Parent {
    /// The parent's run.
    pub run: Arc<RunContext>,
    /// Cancels a foreground child with the parent (the tool call's token). Ignored for
    /// background children, whose lifetime is the runtime's.
    pub cancel: CancellationToken,
    /// The tools the parent can call: a child's tools are narrowed from these (and from
    /// the parent's grant), never from anything wider.
    pub tools: Arc<ToolRegistry>,
    /// What the parent passes down to its children.
    pub inherited: Arc<Inherited>,
    /// Where the parent works: a worktree child branches from this checkout's HEAD.
    pub root: std::path::PathBuf,
}

impl Parent {
    /// The parent making the tool call `ctx`, which passes `inherited` down.
    pub fn of_call(ctx: &cadre_tools::ToolContext, inherited: &Arc<Inherited>) -> Self {
        Self {
            run: ctx.run.clone(),
            cancel: ctx.cancel.clone(),
            tools: ctx.tools.clone(),
            inherited: inherited.clone(),
            root: ctx.workspace.root().to_path_buf(),
        }
    }

    /// The names of the tools the parent may call: its tools within its run's grant.
    pub fn callable(&self) -> Vec<&str> {
        let grant = &self.run.tool_grant;
        self.tools
            .names()
            .into_iter()
            .filter(|n| grant.allows(n))
            .collect()
    }

    /// The same parent, as seen from `depth` (a live child restored from the store is
    /// rebuilt at the depth it was created at).
    pub(crate) fn at_depth(&self, depth: u32) -> Self {
        let mut run = (*self.run).clone();
        run.depth = depth;
        Self {
            run: Arc::new(run),
            ..self.clone()
        }
    }
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
    Done(Box<cadre_store::TaskRecord>),
    /// The timeout passed first.
    TimedOut,
    /// The waiter was cancelled.
    Aborted,
    /// No such task.
    Unknown,
}

/// The result of waiting for a task running here, which reads nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitedHere {
    /// The task ended (its end is stored), or does not run here.
    Ended,
    /// The timeout passed first.
    TimedOut,
    /// The waiter was cancelled.
    Aborted,
}

/// The result of waiting to take the result of a task running here
/// ([`crate::SubagentRuntime::wait_to_take`]).
#[derive(Debug)]
pub(crate) enum Taking {
    /// It ended, its delivery written with its end, and the store handed it back.
    Taken(Box<cadre_store::TaskRecord>),
    /// It ended and its end was written for this caller, delivered, unless the write was
    /// refused; the store did not hand it back: read it (and deliver it if it was not).
    Claimed,
    /// It ended without this caller taking it, or it does not run here: take it.
    Ended,
    /// The timeout passed first.
    TimedOut,
    /// The waiter was cancelled.
    Aborted,
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
    /// The tools its runs may call.
    pub grant: ToolGrant,
    /// The MCP servers of its definition (`mcpServers`), held while the child exists.
    pub own_servers: Option<Arc<crate::ServerLease>>,
    /// Its git worktree, with `isolation: worktree`: its root, for its whole life.
    pub worktree: Option<Arc<crate::runtime::worktree::Worktree>>,
    /// Its messages being created, waiting or running: a new one starts at once only when
    /// there are none, so messages keep their order.
    pub(crate) messages: Arc<std::sync::atomic::AtomicUsize>,
    /// Its seat in its parent's team, when it is a member of one.
    pub team: Option<Arc<crate::runtime::teams::TeamSeat>>,
}

/// A message of a live child, counted in [`Child::messages`] until its job ends.
pub(crate) struct ChildMessage(Arc<std::sync::atomic::AtomicUsize>);

impl ChildMessage {
    /// Count a new message of `child`; the second value says whether it is the only one.
    pub(crate) fn enter(child: &Child) -> (Self, bool) {
        let before = child
            .messages
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        (Self(child.messages.clone()), before == 0)
    }
}

impl Drop for ChildMessage {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// What is decided about a child before it is built.
#[derive(Clone)]
pub(crate) struct Decided {
    /// Whether it gets delegation tools.
    pub may_delegate: bool,
    /// The tools its runs may call.
    pub grant: ToolGrant,
    /// Its seat in its parent's team, when it was spawned into one.
    pub team: Option<Arc<crate::runtime::teams::TeamSeat>>,
}

impl Decided {
    /// The same, seated in `seat`: its runs may call the team tools too.
    pub(crate) fn seated(mut self, seat: Arc<crate::runtime::teams::TeamSeat>) -> Self {
        if let Some(names) = self.grant.names() {
            let mut names: Vec<String> = names.into_iter().map(str::to_string).collect();
            names.extend(crate::TEAM_TOOLS.iter().map(|n| (*n).to_string()));
            self.grant = ToolGrant::only(names);
        }
        self.team = Some(seat);
        self
    }
}

/// A one-off child that has been checked but not built: its task holds only this while it
/// waits for a slot, and the child is built when the slot is granted.
#[derive(Clone)]
pub(crate) struct ChildPlan {
    /// The sub-agent's name.
    pub agent: String,
    /// The model spec it will run on (`remote:<url>` for remote agents).
    pub model: String,
    /// Its session id, fixed now so the task can be recorded before the child exists.
    pub session_id: String,
    /// Its spawn depth.
    pub depth: u32,
    /// Where it runs, for remote agents.
    pub remote: Option<RemoteSpec>,
    /// Whether it may delegate and what it may call, decided now from what the parent may call.
    pub decided: Decided,
    /// The parent (its run, tools and what it passes down).
    pub parent: Parent,
    /// Where its worktree comes from, with `isolation: worktree`.
    pub worktree: Option<crate::runtime::worktree::WorktreeSpec>,
    /// The MCP servers of its definition, held from the spawn on.
    pub own_servers: Option<Arc<crate::ServerLease>>,
    /// Reopen its session's transcript if this node has one (an adopted task whose lost
    /// process shared this workspace), instead of creating it.
    pub reopen: bool,
}

/// The child a task runs: built already (a live child taking a new message) or planned.
pub(crate) enum JobChild {
    /// Built.
    Ready(Child),
    /// Built when the task gets its slot.
    Planned(Box<ChildPlan>),
}

impl JobChild {
    /// The sub-agent's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Ready(c) => &c.name,
            Self::Planned(p) => &p.agent,
        }
    }

    /// Its model spec.
    pub fn model(&self) -> &str {
        match self {
            Self::Ready(c) => &c.model,
            Self::Planned(p) => &p.model,
        }
    }

    /// Its session id.
    pub fn session_id(&self) -> &str {
        match self {
            Self::Ready(c) => &c.session_id,
            Self::Planned(p) => &p.session_id,
        }
    }

    /// Its `invoke_agent` telemetry span, a child of the current span; an adopted task's
    /// is a child of the span its task was started under (`trace_parent`, stored with the
    /// task), so the run goes on in its trace, and says where it was lost.
    pub fn span(
        &self,
        task_id: &str,
        background: bool,
        resumed: Option<&Resumed>,
        trace_parent: Option<&str>,
    ) -> tracing::Span {
        let span = cadre_tools::otel::invoke_agent(cadre_tools::otel::AgentSpan {
            agent: self.name(),
            task_id: Some(task_id),
            session_id: self.session_id(),
            model: self.model(),
            depth: self.depth(),
            background,
            remote: self.model().starts_with("remote:"),
        });
        if let Some(r) = resumed {
            if let Some(tp) = trace_parent {
                cadre_tools::otel::continue_trace(&span, tp, None);
            }
            cadre_tools::otel::adoption_event(&span, task_id, &r.lost_node);
            cadre_tools::otel::metrics::subagent_adopted(self.name());
        }
        span
    }

    /// Its spawn depth.
    pub fn depth(&self) -> u32 {
        match self {
            Self::Ready(c) => c.depth,
            Self::Planned(p) => p.depth,
        }
    }

    /// The tools its runs may call.
    pub fn grant(&self) -> &ToolGrant {
        match self {
            Self::Ready(c) => &c.grant,
            Self::Planned(p) => &p.decided.grant,
        }
    }

    /// True when another node could continue its task from a checkpoint: it runs locally
    /// and has no worktree (which lives on this node's disk).
    pub fn resumable(&self) -> bool {
        match self {
            Self::Ready(c) => matches!(c.runner, ChildRunner::Local { .. }) && c.worktree.is_none(),
            Self::Planned(p) => p.remote.is_none() && p.worktree.is_none(),
        }
    }

    /// Where it runs, for remote agents.
    pub fn remote(&self) -> Option<&RemoteSpec> {
        match self {
            Self::Ready(Child {
                runner: ChildRunner::Remote { spec, .. },
                ..
            }) => Some(spec),
            Self::Ready(_) => None,
            Self::Planned(p) => p.remote.as_ref(),
        }
    }
}

/// A stored task to run here: what [`SubagentRuntime::launch`] needs.
pub(crate) struct JobStart<'a> {
    /// The task's id (its record is stored already).
    pub task_id: String,
    /// The child it runs.
    pub child: JobChild,
    /// Delivered to the parent when it ends, rather than waited for.
    pub background: bool,
    /// Who asked for it.
    pub parent: &'a Parent,
    /// Checkpoint the child's conversation at every turn boundary.
    pub checkpoints: bool,
    /// The owner epoch the task is held at here.
    pub epoch: u64,
    /// Set when the task was adopted from a lost node and continues from its checkpoint.
    pub resumed: Option<Resumed>,
    /// The task as stored when it was handed to this process (its prompt and title; its end
    /// is read as this record ended while the end waits in the spool).
    pub created: cadre_store::TaskRecord,
    /// Its entry here, and the slot it holds already if it was created `running`.
    pub registered: crate::runtime::tracker::Registered,
    /// A live child's conversation, held already if the task was created `running`.
    pub conversation: Option<tokio::sync::OwnedMutexGuard<Session>>,
    /// A live child's message, counted until its job ends.
    pub message: Option<ChildMessage>,
}

/// An adopted task: where it takes up its conversation and whom it took it from.
pub(crate) struct Resumed {
    /// What the lost node had stored of the conversation (none: it had not completed a
    /// model turn, and the task starts again from its prompt).
    pub checkpoint: Option<cadre_store::Checkpoint>,
    /// The node that was lost.
    pub lost_node: String,
}
