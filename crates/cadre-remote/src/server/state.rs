//! The server's shared state: the runtime, the server-side parent run every served task is
//! a child of, the event sink, the task book and the settings.

use super::approval::{ApprovalGate, TaskApprovals};
use super::book::{Journal, Said as Logged, ServedTask, TaskBook};
use super::origin::SiteRules;
use super::sink::ServeSink;
use super::{AnswerStyle, ApprovalPolicy, ServeError, ServeOptions};
use crate::a2a::A2aState;
use crate::a2a::card::SkillInfo;
use crate::a2a::parts::AnswerForm;
use crate::a2a::render::{Role, Said, TaskView};
use cadre_store::TaskFilter;
use cadre_subagents::{GENERAL_PURPOSE, Parent, SubagentRuntime, TaskRecord, TaskStatus};
use cadre_tools::RunContext;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use tokio_util::sync::CancellationToken;

/// The agent name of every node's server-side parent: the parent agent of served tasks.
const SERVE_AGENT: &str = "serve";
/// How every node's server-side parent session id begins.
const SERVE_SESSION_PREFIX: &str = "serve-";
/// A listing reads at most this many served tasks from the store (bounds its memory).
pub(crate) const MAX_FOREIGN_LISTED: u32 = 1000;

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
    /// Who answers the agents' approval requests.
    pub approvals: ApprovalPolicy,
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
        if let Some(name) = opts
            .answers
            .keys()
            .find(|n| !skills.iter().any(|s| &s.name == *n))
        {
            return Err(ServeError::UnknownAgent {
                name: name.clone(),
                available: skills
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
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
        let policy = opts.approvals.unwrap_or(if opts.token.is_some() {
            ApprovalPolicy::Ask
        } else {
            ApprovalPolicy::Deny
        });
        // Every task gets its own handler (see `parent_for`); this one answers anything
        // started with the bare parent.
        let approvals = TaskApprovals {
            policy,
            gate: None,
            timeout: opts.approval_timeout,
        };
        let hard_stop = CancellationToken::new();
        let run = Arc::new(RunContext {
            session_id: format!("{SERVE_SESSION_PREFIX}{}", uuid::Uuid::new_v4()),
            agent: SERVE_AGENT.into(),
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
            approvals: policy,
        }))
    }

    pub(crate) fn set_local_addr(&self, addr: SocketAddr) {
        let _ = self.local_addr.set(addr);
    }

    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr.get().copied()
    }

    /// The parent for a task's turns: the server's parent, with the task's approval
    /// handler (asking through `gate` when the policy asks).
    pub(crate) fn parent_for(&self, gate: Option<Arc<ApprovalGate>>) -> Parent {
        let mut run = (*self.parent.run).clone();
        run.approvals = Arc::new(TaskApprovals {
            policy: self.approvals,
            gate,
            timeout: self.opts.approval_timeout,
        });
        Parent {
            run: Arc::new(run),
            ..self.parent.clone()
        }
    }

    /// How `agent`'s answers are delivered.
    pub(crate) fn answer_style(&self, agent: &str) -> AnswerStyle {
        self.opts.answers.get(agent).copied().unwrap_or_default()
    }

    /// A served task by id (`external`: the task protocol's, which may be the caller's
    /// id): one this server started, else one another `cadre serve` node on the same store
    /// runs or ran, read from the store (see [`State::foreign`]).
    pub(crate) async fn find_task(&self, id: &str, external: bool) -> Option<Arc<ServedTask>> {
        let here = if external {
            self.book.find(id)
        } else {
            self.book.get(id)
        };
        if here.is_some() {
            return here;
        }
        self.foreign(self.runtime.task_record(id).await?)
    }

    /// The view of a stored task that another `cadre serve` node started (its parent is a
    /// serve session that is not ours): one turn, whose context is its child session and
    /// which takes no messages here. `None` for any other record.
    fn foreign(&self, rec: TaskRecord) -> Option<Arc<ServedTask>> {
        let served = rec.parent_agent_id.as_deref() == Some(SERVE_AGENT)
            && rec.parent_session_id.starts_with(SERVE_SESSION_PREFIX)
            && rec.parent_session_id != self.parent.run.session_id;
        if !served {
            return None;
        }
        let journal = Arc::new(Journal::new(
            rec.prompt.clone(),
            format!("{}-input", rec.id),
        ));
        journal.started(rec.id.clone());
        let session_id = rec
            .child_session_id
            .clone()
            .unwrap_or_else(|| rec.id.clone());
        Some(Arc::new(ServedTask {
            id: rec.id,
            external_id: None,
            context_id: session_id.clone(),
            agent: rec.agent_id,
            session_id,
            continuable: false,
            parent_session: rec.parent_session_id,
            created_at: rec.created_at,
            gate: Arc::new(ApprovalGate::new(journal.clone())),
            journal,
        }))
    }

    /// The tasks other `cadre serve` nodes on the same store started, newest first, each
    /// with its record: those among the [`MAX_FOREIGN_LISTED`] newest served tasks in the
    /// store (ours included, which the book has), only those in `status` when given.
    pub(crate) async fn foreign_tasks(
        &self,
        status: Option<TaskStatus>,
    ) -> Vec<(Arc<ServedTask>, TaskRecord)> {
        let filter = TaskFilter {
            parent_agent: Some(SERVE_AGENT.to_string()),
            status,
            limit: Some(MAX_FOREIGN_LISTED),
            newest_first: true,
            ..TaskFilter::default()
        };
        let records = match self.runtime.store().list(&filter).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "store: listing other nodes' tasks failed");
                return Vec::new();
            }
        };
        records
            .into_iter()
            .filter_map(|r| Some((self.foreign(r.clone())?, r)))
            .collect()
    }

    /// A served task's last turn (the one whose status is the task's), as stored.
    pub(crate) async fn snapshot(&self, task: &ServedTask) -> Option<TaskRecord> {
        self.runtime.task_record(&task.last_turn()).await
    }

    /// True while a served task's last turn runs (this server runs what it serves).
    pub(crate) fn is_running(&self, task: &ServedTask) -> bool {
        self.runtime.runs_here(&task.last_turn())
    }

    /// The A2A view of a served task, its turns read from the store.
    pub(crate) async fn view(&self, task: &ServedTask) -> Option<TaskView> {
        let mut turns = Vec::new();
        for t in task.journal.copy().turns {
            turns.push(self.runtime.task_record(&t).await);
        }
        self.view_of(task, turns)
    }

    /// The A2A view of a served task whose turns (oldest first) are `snaps`: its state (its
    /// last turn's), the answer and error of its last turn, the usage of all its turns and
    /// its history; `None` when the store does not know its last turn.
    pub(crate) fn view_of(
        &self,
        task: &ServedTask,
        snaps: Vec<Option<TaskRecord>>,
    ) -> Option<TaskView> {
        let log = task.journal.copy();
        let form = self.answer_style(&task.agent).form;
        let last = snaps.last()?.as_ref()?;
        let mut usage = cadre_types::Usage::default();
        for s in snaps.iter().flatten() {
            usage += s.usage;
        }
        // A turn's answer goes before the message that started the next turn, or last.
        let answer = |turn: usize| -> Option<Said> {
            let snap = snaps.get(turn)?.as_ref()?;
            let text = snap.result.clone().filter(|r| !r.is_empty())?;
            (snap.status == TaskStatus::Completed).then(|| Said {
                role: Role::Agent,
                text,
                form,
                data: None,
                message_id: format!("{}-answer", snap.id),
            })
        };
        let mut history = Vec::with_capacity(log.history.len() + snaps.len());
        for l in log.history {
            if let Logged::User {
                turn: Some(t @ 1..),
                ..
            } = l
            {
                history.extend(answer(t - 1));
            }
            history.push(rendered(l));
        }
        history.extend(answer(snaps.len() - 1));
        let question = if last.status.is_terminal() {
            None
        } else {
            task.gate.question()
        };
        let state = match &question {
            Some(_) => A2aState::InputRequired,
            None => A2aState::from_status(last.status),
        };
        Some(TaskView {
            id: task.id.clone(),
            context_id: task.context_id.clone(),
            agent: task.agent.clone(),
            state,
            history,
            note: question.map(|q| rendered(q.said())),
            output: last.result.clone(),
            form,
            error: last.error.clone(),
            usage,
            completeness: last
                .status
                .is_terminal()
                .then(|| last.incomplete_reason().map_or(Ok(()), Err)),
            updated_at: last.updated_at.max(task.journal.touched_at()),
        })
    }

    /// Wait until `task` has ended or waits for the caller (input-required), or `limit`
    /// passes.
    pub(crate) async fn settled(&self, task: &ServedTask, limit: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        let mut changes = task.journal.changes();
        loop {
            let now = self.view(task).await.map_or(A2aState::Unknown, |v| v.state);
            if now.is_terminal() || now.is_interrupted() || now == A2aState::Unknown {
                return;
            }
            let Some(mut turn) = self.runtime.watch_status(&task.last_turn()) else {
                return;
            };
            tokio::select! {
                _ = turn.wait_for(|s| s.is_terminal()) => {}
                r = changes.changed() => if r.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    /// Served tasks not yet terminal.
    pub(crate) fn unfinished(&self) -> Vec<Arc<ServedTask>> {
        self.book
            .list()
            .into_iter()
            .filter(|t| self.is_running(t))
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
                let _ = self.runtime.wait_for(&t.last_turn(), &never, None).await;
            }
        }
    }
}

/// A history message as A2A shows it.
fn rendered(l: Logged) -> Said {
    match l {
        Logged::User {
            text, message_id, ..
        } => Said {
            role: Role::User,
            text,
            form: AnswerForm::Text,
            data: None,
            message_id,
        },
        Logged::Agent {
            text,
            message_id,
            data,
        } => Said {
            role: Role::Agent,
            text,
            form: AnswerForm::Text,
            data,
            message_id,
        },
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
