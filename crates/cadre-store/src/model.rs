//! Plain records the store reads and writes: tasks, transitions, filters and live children.

use crate::redact::{redact_headers, redact_url};
use cadre_types::{EndState, IncompleteReason, Message, TaskStatus, Usage, parse_end_state};
use std::collections::BTreeMap;

/// How a task's child is executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// In a `cadre` process (the owner node); subject to heartbeats, sweeping and recovery.
    Local,
    /// On a remote agent server; the owner only relays. Never swept.
    Remote {
        /// The server's URL (stored without user info).
        url: String,
    },
}

impl Transport {
    /// The stored form: `local`, or the remote URL with any user info replaced.
    pub fn to_stored(&self) -> String {
        match self {
            Transport::Local => "local".to_string(),
            Transport::Remote { url } => redact_url(url),
        }
    }

    /// Parse the stored form.
    pub fn from_stored(s: &str) -> Self {
        if s == "local" {
            Transport::Local
        } else {
            Transport::Remote { url: s.to_string() }
        }
    }

    /// True for [`Transport::Local`].
    pub fn is_local(&self) -> bool {
        matches!(self, Transport::Local)
    }
}

/// What the sweeper does with a task whose owner stopped beating it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OrphanPolicy {
    /// Fail it (`executor lost: …`): the work is gone, and nothing runs twice.
    #[default]
    Fail,
    /// Leave it to be adopted by a live node ([`crate::TaskStore::adopt`]), which continues
    /// it from its checkpoint.
    Resume,
}

impl OrphanPolicy {
    /// The stored and configured name: `fail` or `resume`.
    pub fn as_str(self) -> &'static str {
        match self {
            OrphanPolicy::Fail => "fail",
            OrphanPolicy::Resume => "resume",
        }
    }

    /// Parse a stored or configured name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "fail" => Some(OrphanPolicy::Fail),
            "resume" => Some(OrphanPolicy::Resume),
            _ => None,
        }
    }
}

/// What a new task starts with. It is created `pending` (or `running`, when its child holds
/// a concurrency slot already), owned by the creating store's node.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// `task_<uuid>`.
    pub id: String,
    /// The sub-agent's name.
    pub agent_id: String,
    /// The parent agent's name, if the parent is a sub-agent itself.
    pub parent_agent_id: Option<String>,
    /// The parent's session id.
    pub parent_session_id: String,
    /// The child's session id (`sub-<uuid>`), once known.
    pub child_session_id: Option<String>,
    /// The user on whose behalf the task runs, if known.
    pub user_id: Option<String>,
    /// The prompt given to the child.
    pub prompt: String,
    /// Short title given by the parent.
    pub description: String,
    /// Background tasks are delivered to the parent when they finish.
    pub background: bool,
    /// Local or remote execution.
    pub transport: Transport,
    /// Headers sent to a remote transport; stored only through [`redact_headers`].
    pub remote_headers: BTreeMap<String, String>,
    /// What happens to the task if its owner is lost.
    pub on_orphan: OrphanPolicy,
    /// The spawn depth of the task's child (1 below the top-level agent).
    pub depth: u32,
    /// The id of the parent's tool call this task answers (a `task` call), if it was
    /// started by one: a parent resumed after a crash finds its child by it.
    pub parent_call_id: Option<String>,
    /// The W3C `traceparent` of the span it is started under: an adopter's spans continue
    /// that trace.
    pub trace_parent: Option<String>,
    /// Create it `running`: its child has its slot already, so it starts without waiting
    /// (one write fewer than `pending`, then `running`).
    pub running: bool,
}

impl NewTask {
    /// A local, foreground task with a fresh `task_<uuid>` id and empty optional fields.
    pub fn new(agent_id: &str, parent_session_id: &str, prompt: &str) -> Self {
        NewTask {
            id: cadre_types::new_task_id(),
            agent_id: agent_id.to_string(),
            parent_agent_id: None,
            parent_session_id: parent_session_id.to_string(),
            child_session_id: None,
            user_id: None,
            prompt: prompt.to_string(),
            description: String::new(),
            background: false,
            transport: Transport::Local,
            remote_headers: BTreeMap::new(),
            on_orphan: OrphanPolicy::Fail,
            depth: 1,
            parent_call_id: None,
            trace_parent: None,
            running: false,
        }
    }

    /// The headers as they will be stored (references kept, literals redacted).
    pub fn stored_headers(&self) -> BTreeMap<String, String> {
        redact_headers(&self.remote_headers)
    }

    /// The status it is created with.
    pub fn status(&self) -> TaskStatus {
        if self.running {
            TaskStatus::Running
        } else {
            TaskStatus::Pending
        }
    }

    /// Whether it is created delivered: a foreground task is, as its parent waits for it
    /// and nothing delivers it later.
    pub fn delivered(&self) -> bool {
        !self.background
    }

    /// The record a store creates from this: `pending` or `running`, owned by `owner_node`
    /// (process `owner_instance`), created at `now` (Unix ms), headers and URL redacted.
    pub fn into_record(self, owner_node: &str, owner_instance: &str, now: u64) -> TaskRecord {
        let (status, delivered) = (self.status(), self.delivered());
        TaskRecord {
            remote_headers: self.stored_headers(),
            transport: Transport::from_stored(&self.transport.to_stored()),
            id: self.id,
            agent_id: self.agent_id,
            parent_agent_id: self.parent_agent_id,
            parent_session_id: self.parent_session_id,
            child_session_id: self.child_session_id,
            user_id: self.user_id,
            status,
            delivered,
            prompt: self.prompt,
            description: self.description,
            result: None,
            error: None,
            end_state: None,
            cancel_requested: false,
            background: self.background,
            created_at: now,
            updated_at: now,
            heartbeat_at: None,
            owner_node: owner_node.to_string(),
            owner_instance: Some(owner_instance.to_string()),
            remote_task_id: None,
            usage: Usage::default(),
            owner_epoch: 0,
            on_orphan: self.on_orphan,
            resumes: 0,
            depth: Some(self.depth),
            parent_call_id: self.parent_call_id,
            turns: None,
            trace_parent: self.trace_parent,
            served: None,
            question: None,
            answer: None,
        }
    }
}

/// What `cadre serve` records about a task it serves, so that every node of the store, and
/// the same node after a restart, shows the task as its caller knows it
/// ([`crate::TaskStore::set_served`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedTurn {
    /// The served task this task is a turn of: the id of its first turn (its own id for
    /// the first). An A2A task takes a runtime task per message that starts work.
    pub task_id: String,
    /// The turn's position in the served task (0 for the first).
    pub turn: u64,
    /// The id of the caller's message that started this turn.
    pub message_id: Option<String>,
    /// The id the caller chose for the task (the task protocol's `task_id`), on its first
    /// turn.
    pub caller_id: Option<String>,
}

/// One owner in a task's history ([`crate::TaskStore::owners`]): who ran the task at an
/// owner epoch, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOwner {
    /// The owner epoch it held (0 for the creator, one more for each adoption).
    pub epoch: u64,
    /// Its node.
    pub node: String,
    /// Its process (`<pid>:<start ticks>`), if known.
    pub instance: Option<String>,
    /// When it became the owner, Unix ms.
    pub since: u64,
}

/// A task as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// `task_<uuid>`.
    pub id: String,
    /// The sub-agent's name.
    pub agent_id: String,
    /// The parent agent's name, if any.
    pub parent_agent_id: Option<String>,
    /// The parent's session id.
    pub parent_session_id: String,
    /// The child's session id.
    pub child_session_id: Option<String>,
    /// The user, if known.
    pub user_id: Option<String>,
    /// The status.
    pub status: TaskStatus,
    /// The prompt.
    pub prompt: String,
    /// Short title.
    pub description: String,
    /// Final (or partial) output.
    pub result: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// How the run ended: `completed`, `failed`, `cancelled`, `limit_reached:max_turns`, ...
    pub end_state: Option<String>,
    /// Whether cancellation was requested.
    pub cancel_requested: bool,
    /// Background task (delivered to the parent on completion).
    pub background: bool,
    /// Whether the completion was delivered to the parent.
    pub delivered: bool,
    /// Creation time, Unix ms.
    pub created_at: u64,
    /// Last change, Unix ms.
    pub updated_at: u64,
    /// Last heartbeat of the owner, Unix ms.
    pub heartbeat_at: Option<u64>,
    /// The node that created and runs the task.
    pub owner_node: String,
    /// The owning process (`<pid>:<start ticks>`), used to tell a restart from a sibling.
    pub owner_instance: Option<String>,
    /// Local or remote execution.
    pub transport: Transport,
    /// The task id on the remote server, for remote transports.
    pub remote_task_id: Option<String>,
    /// Redacted remote headers (references only).
    pub remote_headers: BTreeMap<String, String>,
    /// Tokens the child used.
    pub usage: Usage,
    /// The fencing epoch: 0 at creation, bumped by every adoption. Writes fenced with an
    /// older epoch are refused.
    pub owner_epoch: u64,
    /// What happens to the task if its owner is lost.
    pub on_orphan: OrphanPolicy,
    /// How many times the task was adopted by another owner.
    pub resumes: u64,
    /// The spawn depth of the task's child; `None` for a task stored before the store
    /// recorded it.
    pub depth: Option<u32>,
    /// The id of the parent's tool call this task answers, if a tool call started it.
    pub parent_call_id: Option<String>,
    /// The model turns of the run that ended it; `None` while it runs, when its executor
    /// did not say (a remote child), or for a task stored before the store recorded them.
    pub turns: Option<u64>,
    /// The W3C `traceparent` of the span the task was started under, if telemetry was on.
    pub trace_parent: Option<String>,
    /// What `cadre serve` records of a task it serves; `None` for other tasks.
    pub served: Option<ServedTurn>,
    /// The question (JSON, written by `cadre serve`) the task's agent waits on its caller
    /// for, while it waits.
    pub question: Option<String>,
    /// An answer to [`TaskRecord::question`] stored by another node, until the owner takes
    /// it (JSON).
    pub answer: Option<String>,
}

impl TaskRecord {
    /// Whether [`crate::TaskStore::take_finished_task`] hands this task out to `session`:
    /// the session's, ended, and its result not delivered yet.
    pub(crate) fn takeable_by(&self, session: &str) -> bool {
        self.parent_session_id == session && !self.delivered && self.status.is_terminal()
    }

    /// The owner history of a task that has none stored (it was never adopted): its one
    /// owner, the one it names, since its creation.
    pub fn only_owner(&self) -> TaskOwner {
        TaskOwner {
            epoch: self.owner_epoch,
            node: self.owner_node.clone(),
            instance: self.owner_instance.clone(),
            since: self.created_at,
        }
    }

    /// How the run ended, read back from the stored name (a failure takes the record's
    /// error); `None` before the end or for a name this version does not know.
    pub fn end_state(&self) -> Option<EndState> {
        self.end_state
            .as_deref()
            .and_then(|n| parse_end_state(n, self.error.as_deref()))
    }

    /// Why the task's result is not complete; `None` when it is (or the task has not ended).
    /// Read from the run's end state, or from the status when the end state is unknown.
    pub fn incomplete_reason(&self) -> Option<IncompleteReason> {
        if let Some(end) = self.end_state() {
            return end.incomplete_reason();
        }
        match self.status {
            TaskStatus::Cancelled => Some(IncompleteReason::Cancelled),
            TaskStatus::Failed => Some(IncompleteReason::Error),
            _ => None,
        }
    }
}

/// A state change with what it carries. Fields left `None` keep their stored value.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The new status.
    pub to: TaskStatus,
    /// Output to store.
    pub result: Option<String>,
    /// Error to store.
    pub error: Option<String>,
    /// End state to store.
    pub end_state: Option<String>,
    /// Usage to store (replaces the stored totals).
    pub usage: Option<Usage>,
    /// The run's model turns, to store with its end.
    pub turns: Option<u64>,
    /// Written only while the task's owner epoch is this one (its owner's writes); `None`:
    /// by anyone (a cancel from another node, say).
    pub epoch: Option<u64>,
    /// Also mark the task's result delivered, in the same write: its parent is waiting for
    /// it and takes it with its end.
    pub deliver: bool,
}

impl Transition {
    /// A bare status change.
    pub fn to(status: TaskStatus) -> Self {
        Transition {
            to: status,
            result: None,
            error: None,
            end_state: None,
            usage: None,
            turns: None,
            epoch: None,
            deliver: false,
        }
    }

    /// `running`.
    pub fn running() -> Self {
        Self::to(TaskStatus::Running)
    }

    /// `completed` with a result; end state `completed`.
    pub fn completed(result: impl Into<String>) -> Self {
        Self::to(TaskStatus::Completed)
            .with_result(result)
            .with_end_state("completed")
    }

    /// `failed` with an error; end state `failed`.
    pub fn failed(error: impl Into<String>) -> Self {
        Self::to(TaskStatus::Failed)
            .with_error(error)
            .with_end_state("failed")
    }

    /// `cancelled`; end state `cancelled`.
    pub fn cancelled() -> Self {
        Self::to(TaskStatus::Cancelled).with_end_state("cancelled")
    }

    /// Set the result.
    pub fn with_result(mut self, result: impl Into<String>) -> Self {
        self.result = Some(result.into());
        self
    }

    /// Set the error.
    pub fn with_error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }

    /// Set the end state.
    pub fn with_end_state(mut self, end_state: impl Into<String>) -> Self {
        self.end_state = Some(end_state.into());
        self
    }

    /// Fence the write: refused (`StoreError::Fenced`) once the task was adopted past
    /// `epoch`.
    pub fn fenced(mut self, epoch: u64) -> Self {
        self.epoch = Some(epoch);
        self
    }

    /// Mark the result delivered with the write (see [`Transition::deliver`]).
    pub fn delivering(mut self) -> Self {
        self.deliver = true;
        self
    }

    /// Set the usage.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Set the run's model turns.
    pub fn with_turns(mut self, turns: u64) -> Self {
        self.turns = Some(turns);
        self
    }

    /// The end of a run: its status, error and end state ([`cadre_types::TaskOutcome`]),
    /// its output (when there is any) and its usage.
    pub fn ended(end: &cadre_types::EndState, output: String, usage: Usage) -> Self {
        let outcome = cadre_types::TaskOutcome::from(end);
        Transition {
            to: outcome.status,
            result: Some(output).filter(|r| !r.is_empty()),
            error: outcome.error,
            end_state: Some(outcome.end_state),
            usage: Some(usage),
            turns: None,
            epoch: None,
            deliver: false,
        }
    }
}

/// Which tasks [`crate::TaskStore::list`] returns, oldest first (newest first with
/// `newest_first`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only tasks of this parent session.
    pub session: Option<String>,
    /// Only tasks whose parent agent has this name (`serve`: the tasks `cadre serve` runs).
    pub parent_agent: Option<String>,
    /// Only tasks in this status.
    pub status: Option<TaskStatus>,
    /// At most this many (all when `None`).
    pub limit: Option<u32>,
    /// The newest first, so that `limit` keeps the newest.
    pub newest_first: bool,
    /// Only the turns of this served task ([`ServedTurn::task_id`]); they come in turn
    /// order ([`ServedTurn::turn`]) rather than by creation time.
    pub served_task: Option<String>,
    /// Only served tasks whose caller chose this id ([`ServedTurn::caller_id`]).
    pub caller_id: Option<String>,
}

impl TaskFilter {
    /// Put the turns of a served task (records sorted by creation) in turn order, when
    /// the filter selects one: turns started within the same millisecond are ordered by
    /// their position, not by their random ids.
    pub(crate) fn sort_turns(&self, records: &mut [TaskRecord]) {
        if self.served_task.is_some() {
            records.sort_by_key(|r| r.served.as_ref().map_or(0, |s| s.turn));
        }
    }
}

/// A session's background tasks as its status summary shows them
/// ([`crate::TaskStore::background_summary`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackgroundSummary {
    /// The newest open (pending or running) background tasks, newest first, up to the limit
    /// asked for.
    pub open: Vec<TaskRecord>,
    /// All open background tasks of the session.
    pub open_total: usize,
    /// Background tasks of the session that have ended.
    pub finished_total: usize,
    /// Ended background tasks whose result has not been delivered yet.
    pub undelivered: usize,
}

/// A task's checkpoint: its child's conversation as last stored, to continue it elsewhere
/// ([`crate::TaskStore::read_checkpoint`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checkpoint {
    /// Which generation: each compaction of the conversation starts a new one.
    pub generation: u64,
    /// The conversation, in order.
    pub messages: Vec<Message>,
    /// What the run had spent when the last message was stored.
    pub usage: Usage,
}

/// A live child (created by `agent_spawn`), persisted so it can be found by key or label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveChildEntry {
    /// `agent:<id>:<uuid>`.
    pub agent_key: String,
    /// Optional label, unique per parent session (case-insensitively, ASCII).
    pub label: Option<String>,
    /// The definition's name.
    pub agent_id: String,
    /// The parent's session id.
    pub parent_session_id: String,
    /// The child's session id (`sub-<uuid>`).
    pub child_session_id: String,
    /// Spawn depth (1 for children of the main agent).
    pub depth: u32,
    /// Creation time, Unix ms.
    pub created_at: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_types::{EndState, LimitKind};

    #[test]
    fn a_run_end_becomes_one_transition() {
        let limit = EndState::LimitReached {
            limit: LimitKind::MaxTurns,
        };
        let t = Transition::ended(&limit, "half".into(), Usage::default());
        assert_eq!(t.to, TaskStatus::Failed);
        assert_eq!(t.end_state.as_deref(), Some("limit_reached:max_turns"));
        assert_eq!(t.result.as_deref(), Some("half"));
        let t = Transition::ended(&EndState::Completed, String::new(), Usage::default());
        assert_eq!((t.to, t.result), (TaskStatus::Completed, None));
    }
}
