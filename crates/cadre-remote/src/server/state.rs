//! The server's shared state: the runtime, the server-side parent run every served task is
//! a child of, the event sink, the task book and the settings.

use super::approval::stored_question;
use super::approval::{ApprovalGate, TaskApprovals};
use super::book::{Journal, Said as Logged, ServedTask, TaskBook, TaskLog};
use super::origin::SiteRules;
use super::sink::ServeSink;
use super::{AnswerStyle, ApprovalPolicy, ServeError, ServeOptions};
use crate::a2a::A2aState;
use crate::a2a::card::SkillInfo;
use crate::a2a::parts::AnswerForm;
use crate::a2a::render::{Resumption, Role, Said, TaskView};
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
/// How often a wait for a task another node runs looks at the store again.
const FOREIGN_LOOK: std::time::Duration = std::time::Duration::from_millis(250);
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
    /// Whether the task store answered its last probe (readiness, fast refusals).
    pub health: super::health::Health,
}

/// The agents served (all, or those `expose` names, each of which must exist), and an
/// `answers` style may only name one of them.
fn served_skills(
    runtime: &SubagentRuntime,
    opts: &ServeOptions,
) -> Result<Vec<SkillInfo>, ServeError> {
    let registry = runtime.registry();
    if let Some(name) = (opts.expose.iter().flatten()).find(|n| !registry.contains(n)) {
        return Err(ServeError::UnknownAgent {
            name: name.clone(),
            available: registry.names().join(", "),
        });
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
    if let Some(name) = (opts.answers.keys()).find(|n| !skills.iter().any(|s| &s.name == *n)) {
        return Err(unknown_skill(name, &skills));
    }
    Ok(skills)
}

/// The agent a submission naming none gets: the configured one (which must be served),
/// else the general-purpose agent, else the first served.
fn default_agent(skills: &[SkillInfo], configured: Option<&str>) -> Result<String, ServeError> {
    match configured {
        Some(name) if skills.iter().any(|s| s.name == name) => Ok(name.to_string()),
        Some(name) => Err(unknown_skill(name, skills)),
        None => skills
            .iter()
            .find(|s| s.name == GENERAL_PURPOSE)
            .or_else(|| skills.first())
            .map(|s| s.name.clone())
            .ok_or(ServeError::NoAgents),
    }
}

fn unknown_skill(name: &str, skills: &[SkillInfo]) -> ServeError {
    ServeError::UnknownAgent {
        name: name.to_string(),
        available: skills
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

impl State {
    pub(crate) fn new(
        runtime: Arc<SubagentRuntime>,
        model: &str,
        opts: ServeOptions,
    ) -> Result<Arc<Self>, ServeError> {
        let skills = served_skills(&runtime, &opts)?;
        let default_agent = default_agent(&skills, opts.default_agent.as_deref())?;
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
            health: super::health::Health::new(),
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
    /// id): one this server's book remembers, else one read from the store (see
    /// [`State::stored_task`]): another `cadre serve` node's on the same store, an earlier
    /// process's of this one, or one of ours the book has forgotten.
    pub(crate) async fn find_task(&self, id: &str, external: bool) -> Option<Arc<ServedTask>> {
        let here = if external {
            self.book.find(id)
        } else {
            self.book.get(id)
        };
        if here.is_some() {
            return here;
        }
        let by_caller = if external {
            self.stored_by_caller_id(id).await
        } else {
            None
        };
        let first = match by_caller {
            Some(r) => r,
            None => self.runtime.task_record(id).await?,
        };
        let turns = self.stored_turns(&first).await;
        self.stored_task(first, turns)
    }

    /// The newest served task whose caller chose `id`, as stored.
    async fn stored_by_caller_id(&self, id: &str) -> Option<TaskRecord> {
        let filter = TaskFilter {
            parent_agent: Some(SERVE_AGENT.to_string()),
            caller_id: Some(id.to_string()),
            newest_first: true,
            limit: Some(1),
            ..TaskFilter::default()
        };
        match self.runtime.store().list(&filter).await {
            Ok(mut r) => r.pop(),
            Err(e) => {
                tracing::warn!(error = %e, "store: looking up a caller's task id failed");
                None
            }
        }
    }

    /// The turns of the served task whose first turn is `first`, oldest first, as stored
    /// (only `first` for a task stored before turns were, or when the store fails).
    async fn stored_turns(&self, first: &TaskRecord) -> Vec<TaskRecord> {
        if first.served.is_none() {
            return vec![first.clone()];
        }
        let filter = TaskFilter {
            served_task: Some(first.id.clone()),
            ..TaskFilter::default()
        };
        match self.runtime.store().list(&filter).await {
            Ok(turns) if turns.first().is_some_and(|t| t.id == first.id) => turns,
            Ok(_) => vec![first.clone()],
            Err(e) => {
                tracing::warn!(error = %e, "store: reading a task's turns failed");
                vec![first.clone()]
            }
        }
    }

    /// Whether `task` was read from the store (not in the book): it takes no messages here.
    pub(crate) fn is_from_store(&self, task: &ServedTask) -> bool {
        task.from_store
    }

    /// The view of a stored served task (its parent is a serve session: another node's,
    /// an earlier process's, or ours for one the book forgot), from its first turn and its
    /// `turns` (oldest first, the first included): its context is its child session, its
    /// history its turns' messages. `None` for any other record, and for a turn that is not
    /// a task's first.
    fn stored_task(&self, first: TaskRecord, turns: Vec<TaskRecord>) -> Option<Arc<ServedTask>> {
        let served = first.parent_agent_id.as_deref() == Some(SERVE_AGENT)
            && first.parent_session_id.starts_with(SERVE_SESSION_PREFIX)
            && first.served.as_ref().is_none_or(|s| s.task_id == first.id);
        if !served {
            return None;
        }
        let journal = Arc::new(Journal::from_log(stored_log(&turns)));
        let session_id = first
            .child_session_id
            .clone()
            .unwrap_or_else(|| first.id.clone());
        Some(Arc::new(ServedTask {
            external_id: first.served.as_ref().and_then(|s| s.caller_id.clone()),
            id: first.id,
            context_id: session_id.clone(),
            agent: first.agent_id,
            session_id,
            continuable: false,
            parent_session: first.parent_session_id,
            created_at: first.created_at,
            from_store: true,
            gate: Arc::new(ApprovalGate::new(journal.clone())),
            journal,
        }))
    }

    /// The served tasks the book does not hold, read from the store, newest first, each
    /// with its turns' records (oldest first): other `cadre serve` nodes' on the same store,
    /// earlier processes', and ours the book has forgotten, among the [`MAX_FOREIGN_LISTED`]
    /// newest served turns in the store; only those whose last turn is in `status` when
    /// given.
    pub(crate) async fn stored_tasks(
        &self,
        status: Option<TaskStatus>,
    ) -> Vec<(Arc<ServedTask>, Vec<TaskRecord>)> {
        let filter = TaskFilter {
            parent_agent: Some(SERVE_AGENT.to_string()),
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
        // Turns grouped under their task, oldest first; tasks in the order of their newest
        // turn. A task whose first turn is older than the window is read whole.
        let mut order: Vec<String> = Vec::new();
        let mut groups: std::collections::HashMap<String, Vec<TaskRecord>> = Default::default();
        for r in records.into_iter().rev() {
            let of = r
                .served
                .as_ref()
                .map_or(r.id.clone(), |s| s.task_id.clone());
            if r.parent_session_id == self.parent.run.session_id && self.book.get(&of).is_some() {
                continue;
            }
            let group = groups.entry(of.clone()).or_default();
            if group.is_empty() {
                order.push(of);
            }
            group.push(r);
        }
        let mut out = Vec::new();
        for of in order.into_iter().rev() {
            let Some(mut turns) = groups.remove(&of) else {
                continue;
            };
            if turns.first().is_none_or(|t| t.id != of) {
                let Some(first) = self.runtime.task_record(&of).await else {
                    continue;
                };
                turns = self.stored_turns(&first).await;
            }
            if status.is_some_and(|s| turns.last().is_none_or(|t| t.status != s)) {
                continue;
            }
            let Some(first) = turns.first().cloned() else {
                continue;
            };
            if let Some(task) = self.stored_task(first, turns.clone()) {
                out.push((task, turns));
            }
        }
        out
    }

    /// A served task's last turn (the one whose status is the task's), as stored.
    pub(crate) async fn snapshot(&self, task: &ServedTask) -> Option<TaskRecord> {
        self.runtime.task_record(&task.last_turn()).await
    }

    /// True while a served task's last turn runs (this server runs what it serves).
    pub(crate) fn is_running(&self, task: &ServedTask) -> bool {
        self.runtime.runs_here(&task.last_turn())
    }

    /// The A2A view of a served task, its turns read from the store (for a task of
    /// another node, the list of its turns too: it may have taken more since).
    pub(crate) async fn view(&self, task: &ServedTask) -> Option<TaskView> {
        if self.is_from_store(task) {
            let first = self.runtime.task_record(&task.id).await?;
            let turns = self.stored_turns(&first).await;
            task.journal.refresh(stored_log(&turns));
            return self.view_of(task, turns.into_iter().map(Some).collect());
        }
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
        } else if self.is_from_store(task) {
            // An answer stored for the owner to take: the task goes on.
            last.question
                .as_deref()
                .filter(|_| last.answer.is_none())
                .and_then(stored_question)
        } else {
            task.gate.question().map(|q| q.said())
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
            note: question.map(rendered),
            output: last.result.clone(),
            form,
            error: last.error.clone(),
            usage,
            completeness: last
                .status
                .is_terminal()
                .then(|| last.incomplete_reason().map_or(Ok(()), Err)),
            updated_at: last.updated_at.max(task.journal.touched_at()),
            resumed: (last.resumes > 0).then(|| Resumption {
                times: last.resumes,
                node: last.owner_node.clone(),
            }),
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
                // Run elsewhere: look again through the store, now and then.
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    return;
                }
                let never = CancellationToken::new();
                let step = left.min(FOREIGN_LOOK);
                let _ = self
                    .runtime
                    .wait_for(&task.last_turn(), &never, Some(step))
                    .await;
                continue;
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

/// The log of a task read from the store: its turns, each with the caller's message that
/// started it.
fn stored_log(turns: &[TaskRecord]) -> TaskLog {
    TaskLog {
        turns: turns.iter().map(|t| t.id.clone()).collect(),
        history: turns
            .iter()
            .enumerate()
            .map(|(i, t)| Logged::User {
                text: t.prompt.clone(),
                message_id: t
                    .served
                    .as_ref()
                    .and_then(|s| s.message_id.clone())
                    .unwrap_or_else(|| format!("{}-input", t.id)),
                turn: Some(i),
            })
            .collect(),
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
