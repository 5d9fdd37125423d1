//! The server's shared state: the runtime, the server-side parent run every served task is
//! a child of, the event sink, the task book and the settings.

use super::approval::{ApprovalGate, TaskApprovals};
use super::book::{Said as Logged, ServedTask, TaskBook};
use super::origin::SiteRules;
use super::sink::ServeSink;
use super::{AnswerStyle, ApprovalPolicy, ServeError, ServeOptions};
use crate::a2a::A2aState;
use crate::a2a::card::SkillInfo;
use crate::a2a::parts::AnswerForm;
use crate::a2a::render::{Role, Said, TaskView};
use cadre_subagents::{GENERAL_PURPOSE, Parent, SubagentRuntime, TaskRecord, TaskStatus};
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
