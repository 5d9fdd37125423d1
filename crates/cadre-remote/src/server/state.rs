//! The server's shared state: the runtime, the server-side parent run every served task is
//! a child of, the event sink, the task book and the settings.

use super::book::{ServedTask, TaskBook};
use super::origin::SiteRules;
use super::sink::ServeSink;
use super::{ApprovalPolicy, ServeError, ServeOptions};
use crate::a2a::A2aState;
use crate::a2a::card::SkillInfo;
use crate::a2a::render::TaskView;
use cadre_engine::NonInteractiveApprovals;
use cadre_subagents::{GENERAL_PURPOSE, Parent, SubagentRuntime, TaskSnapshot, TaskStatus};
use cadre_tools::RunContext;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use tokio_util::sync::CancellationToken;

/// Shared by every handler.
pub(crate) struct State {
    pub runtime: Arc<SubagentRuntime>,
    /// The parent of every served task; its token is [`State::hard_stop`].
    pub parent: Parent,
    /// Cancels every served task (end of the shutdown grace period).
    pub hard_stop: CancellationToken,
    /// Set once shutdown began: no new tasks.
    pub draining: CancellationToken,
    pub sink: Arc<ServeSink>,
    pub book: TaskBook,
    pub opts: ServeOptions,
    /// The exposed agents.
    pub skills: Vec<SkillInfo>,
    pub default_agent: String,
    /// Which origins and hosts requests may come from.
    pub site: SiteRules,
    /// The address the server listens on, once it does.
    local_addr: OnceLock<SocketAddr>,
    /// When the server was built, Unix ms (the card's `Last-Modified`).
    pub started_at: u64,
}

impl State {
    pub(crate) fn new(
        runtime: Arc<SubagentRuntime>,
        model: &str,
        opts: ServeOptions,
    ) -> Result<Arc<Self>, ServeError> {
        let registry = runtime.registry();
        let available = || registry.names().join(", ");
        if let Some(list) = &opts.expose {
            for name in list {
                if !registry.contains(name) {
                    return Err(ServeError::UnknownAgent {
                        name: name.clone(),
                        available: available(),
                    });
                }
            }
        }
        let skills: Vec<SkillInfo> = registry
            .list()
            .filter(|d| opts.expose.as_ref().is_none_or(|e| e.contains(&d.name)))
            .map(|d| SkillInfo {
                name: d.name.clone(),
                description: d.description.clone(),
            })
            .collect();
        if skills.is_empty() {
            return Err(ServeError::NoAgents);
        }
        let default_agent = match &opts.default_agent {
            Some(name) if skills.iter().any(|s| &s.name == name) => name.clone(),
            Some(name) => {
                return Err(ServeError::UnknownAgent {
                    name: name.clone(),
                    available: skills
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            None => skills
                .iter()
                .find(|s| s.name == GENERAL_PURPOSE)
                .or_else(|| skills.first())
                .map(|s| s.name.clone())
                .ok_or(ServeError::NoAgents)?,
        };
        let site = SiteRules::new(&opts.allowed_origins, &opts.allowed_hosts)?;
        let sink = Arc::new(ServeSink::default());
        let approve = opts.approvals == ApprovalPolicy::Approve;
        let approvals = NonInteractiveApprovals::new(approve)
            .policy("serve.approvals = \"deny\"")
            .with_notice(|req, approved| {
            tracing::info!(agent = %req.agent, tool = %req.tool, approved, "approval request answered by the serve policy");
        });
        let hard_stop = CancellationToken::new();
        let run = Arc::new(RunContext {
            session_id: format!("serve-{}", uuid::Uuid::new_v4()),
            agent: "serve".into(),
            model: model.to_string(),
            task_id: None,
            user_id: None,
            parent_session_id: None,
            depth: 0,
            tool_grant: cadre_tools::ToolGrant::unrestricted(),
            budget: cadre_tools::Budget::unlimited(),
            trace_id: uuid::Uuid::new_v4().simple().to_string(),
            events: sink.clone(),
            approvals: Arc::new(approvals),
        });
        let book = TaskBook::new(opts.max_concurrent_tasks, opts.max_remembered_input_bytes);
        let parent = runtime.top_level_parent(run, hard_stop.clone());
        Ok(Arc::new(Self {
            runtime,
            parent,
            hard_stop,
            draining: CancellationToken::new(),
            sink,
            book,
            opts,
            skills,
            default_agent,
            site,
            local_addr: OnceLock::new(),
            started_at: cadre_types::unix_millis(),
        }))
    }

    pub(crate) fn set_local_addr(&self, addr: SocketAddr) {
        let _ = self.local_addr.set(addr);
    }

    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr.get().copied()
    }

    /// The runtime's view of a served task.
    pub(crate) fn snapshot(&self, task: &ServedTask) -> Option<TaskSnapshot> {
        self.runtime.tracker().get(&task.id)
    }

    /// Served tasks not yet terminal.
    pub(crate) fn unfinished(&self) -> Vec<Arc<ServedTask>> {
        self.book
            .list()
            .into_iter()
            .filter(|t| self.snapshot(t).is_some_and(|s| !s.status.is_terminal()))
            .collect()
    }

    /// Wait until every served task is terminal.
    pub(crate) async fn wait_idle(&self) {
        let never = CancellationToken::new();
        // Tasks started while waiting are refused (draining), so this ends.
        for _ in 0..3 {
            let open = self.unfinished();
            if open.is_empty() {
                return;
            }
            for t in open {
                let _ = self.runtime.wait_for(&t.id, &never, None).await;
            }
        }
    }
}

/// An A2A view of a served task and its runtime snapshot.
pub(crate) fn view<'a>(task: &'a ServedTask, snap: &'a TaskSnapshot) -> TaskView<'a> {
    TaskView {
        id: &task.id,
        context_id: &task.context_id,
        agent: &task.agent,
        state: A2aState::from_status(snap.status),
        input: &task.input,
        input_message_id: &task.message_id,
        output: snap.result.as_deref(),
        error: snap.error.as_deref(),
        usage: snap.usage,
        updated_at: snap.updated_at,
    }
}

/// The task protocol's name of a status.
pub(crate) fn protocol_status(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Pending => "pending",
        TaskStatus::Running => "running",
        TaskStatus::Completed => "success",
        TaskStatus::Failed => "error",
        TaskStatus::Cancelled => "cancelled",
    }
}
