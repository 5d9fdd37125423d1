//! The runtime's request, handle and error types.

use crate::child_setup::SetupError;
use crate::definition::RemoteSpec;
use crate::remote::RemoteExecutor;
use crate::tracker::TaskSnapshot;
use cadre_engine::{Agent, Session};
use cadre_tools::{RunContext, Workspace};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

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
    /// The task store refused or failed the write.
    #[error("task store: {0}")]
    Store(String),
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
    /// The parent's run (depth, default model, session).
    pub parent: Arc<RunContext>,
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

    /// Its spawn depth.
    pub fn depth(&self) -> u32 {
        match self {
            Self::Ready(c) => c.depth,
            Self::Planned(p) => p.depth,
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
