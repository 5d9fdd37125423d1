//! The server's task book: the tasks it started (the runtime's tracker holds their status),
//! the caller-chosen ids of the task protocol mapped to them, the A2A conversations
//! (`contextId` → the child that holds the conversation) and the concurrency slots.
//!
//! What it remembers is bounded twice: by count, and by the bytes callers sent (inputs and
//! the ids they chose). Beyond either bound the oldest finished tasks, and the oldest idle
//! conversations, are forgotten; running ones are kept (their number is bounded by the
//! concurrency slots). A forgotten task is still the store's: it is read from there. A
//! task-protocol task takes one input and asks nothing, so all a caller can read of it once
//! it finished is in the store: few of those are kept (a node answering a steady stream of
//! them keeps a flat memory); an A2A task may still take a follow-up, and its history holds
//! the questions its agents asked, so many more of those are.
//!
//! The task store keeps what other nodes, and this one after a restart or after forgetting
//! a task, need of each task
//! (the served task each turn belongs to, the caller's ids, the open question: see
//! `State::stored_task`); what only the running node needs (the approval exchanges' messages,
//! the conversations' children, the slots) is here.

use super::approval::ApprovalGate;
use cadre_subagents::Child;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A2A tasks remembered; beyond this the oldest finished ones are forgotten.
const MAX_TASKS: usize = 10_000;
/// Task-protocol tasks remembered; beyond this the oldest finished ones are forgotten.
const MAX_ONE_SHOT: usize = 256;
/// Conversations remembered; beyond this the oldest idle ones are forgotten.
const MAX_CONTEXTS: usize = 4_096;

/// Most turns (messages that started work) one A2A task takes.
pub(crate) const MAX_TURNS: usize = 64;
/// Most history messages one A2A task keeps; a message beyond it is refused.
pub(crate) const MAX_HISTORY: usize = 256;

/// One message of a task's history, in the order it was exchanged.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Said {
    /// The caller's message; `turn` when it started turn `n` (the answer of turn `n - 1` goes
    /// before it).
    User {
        text: String,
        message_id: String,
        turn: Option<usize>,
    },
    /// A message of the agent (a question it asked), with its data part.
    Agent {
        text: String,
        message_id: String,
        data: Option<serde_json::Value>,
    },
}

impl Said {
    fn bytes(&self) -> usize {
        match self {
            Said::User {
                text, message_id, ..
            }
            | Said::Agent {
                text, message_id, ..
            } => text.len() + message_id.len(),
        }
    }
}

/// The turns (runtime task ids, oldest first) and the history of a task.
#[derive(Debug, Default, Clone)]
pub(crate) struct TaskLog {
    pub turns: Vec<String>,
    pub history: Vec<Said>,
}

/// What changes while a task lives and the runtime does not see: its turns, its history,
/// and a signal for the streams that follow it. Made before the task's first turn starts
/// (its approval gate writes to it from then on).
#[derive(Debug)]
pub(crate) struct Journal {
    log: Mutex<TaskLog>,
    /// Bumped on every change, so that streams and waiters look again.
    changes: tokio::sync::watch::Sender<u64>,
    /// Unix ms of the last change.
    touched_at: std::sync::atomic::AtomicU64,
}

impl Journal {
    /// A journal whose history starts with the caller's first message (turn 0).
    pub(crate) fn new(input: String, message_id: String) -> Self {
        Self {
            log: Mutex::new(TaskLog {
                turns: Vec::new(),
                history: vec![Said::User {
                    text: input,
                    message_id,
                    turn: Some(0),
                }],
            }),
            changes: tokio::sync::watch::channel(0).0,
            touched_at: std::sync::atomic::AtomicU64::new(cadre_types::unix_millis()),
        }
    }

    /// A journal holding `log` (a task read from the store).
    pub(crate) fn from_log(log: TaskLog) -> Self {
        Self {
            log: Mutex::new(log),
            changes: tokio::sync::watch::channel(0).0,
            touched_at: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Replace the log with `log` when its turns differ (a task read from the store that
    /// took another turn since); true when it changed, and then streams look again.
    pub(crate) fn refresh(&self, log: TaskLog) -> bool {
        let mut g = self.log();
        if g.turns == log.turns {
            return false;
        }
        *g = log;
        drop(g);
        self.touch();
        true
    }

    fn log(&self) -> MutexGuard<'_, TaskLog> {
        match self.log.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The turns and the history, copied.
    pub(crate) fn copy(&self) -> TaskLog {
        self.log().clone()
    }

    /// The runtime id of the last turn, once there is one.
    pub(crate) fn last_turn(&self) -> Option<String> {
        self.log().turns.last().cloned()
    }

    /// The position of the turn `runtime_id` (0 for the first).
    pub(crate) fn turn_index(&self, runtime_id: &str) -> Option<usize> {
        self.log().turns.iter().position(|t| t == runtime_id)
    }

    /// Whether `runtime_id` is one of the turns.
    pub(crate) fn has_turn(&self, runtime_id: &str) -> bool {
        self.log().turns.iter().any(|t| t == runtime_id)
    }

    /// The first turn started.
    pub(crate) fn started(&self, runtime_id: String) {
        self.log().turns.push(runtime_id);
        self.touch();
    }

    /// A caller message started another turn; the bytes it adds.
    pub(crate) fn add_turn(&self, runtime_id: String, input: String, message_id: String) -> usize {
        let mut g = self.log();
        let turn = g.turns.len();
        g.turns.push(runtime_id);
        let said = Said::User {
            text: input,
            message_id,
            turn: Some(turn),
        };
        let bytes = said.bytes();
        g.history.push(said);
        drop(g);
        self.touch();
        bytes
    }

    /// Whether the task can take `turns` more turns and `messages` more history messages.
    pub(crate) fn has_room(&self, turns: usize, messages: usize) -> bool {
        let g = self.log();
        g.turns.len() + turns <= MAX_TURNS && g.history.len() + messages <= MAX_HISTORY
    }

    /// Record a message that started no work (a question, an answer, a remark); the bytes
    /// it adds.
    pub(crate) fn record(&self, said: Said) -> usize {
        let bytes = said.bytes();
        self.log().history.push(said);
        self.touch();
        bytes
    }

    /// Tell the streams and waiters something changed.
    pub(crate) fn touch(&self) {
        self.touched_at.store(
            cadre_types::unix_millis(),
            std::sync::atomic::Ordering::SeqCst,
        );
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Unix ms of the last change.
    pub(crate) fn touched_at(&self) -> u64 {
        self.touched_at.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A receiver that wakes on every [`touch`](Self::touch).
    pub(crate) fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn bytes(&self) -> usize {
        self.log().history.iter().map(Said::bytes).sum()
    }
}

/// One task the server started. Over A2A a task can take several messages: each one that
/// starts work is a turn (a runtime task of the same child); the A2A task's id is its first
/// turn's, and its state is its last turn's (or input-required while its gate holds a
/// question).
#[derive(Debug)]
pub(crate) struct ServedTask {
    /// The A2A task id: the runtime id of its first turn.
    pub id: String,
    /// The id the caller chose (task protocol).
    pub external_id: Option<String>,
    /// The A2A conversation.
    pub context_id: String,
    /// The agent.
    pub agent: String,
    /// The child's session (its progress arrives under this id).
    pub session_id: String,
    /// Whether messages may continue it (A2A tasks; task-protocol tasks take one input).
    pub continuable: bool,
    /// The session its turns are children of: this server's parent run, or another node's
    /// for a task read from the store.
    pub parent_session: String,
    /// Unix ms.
    pub created_at: u64,
    /// Read from the store rather than kept in this node's book: another node's task, an
    /// earlier process's, or one this node has forgotten (beyond the book's bounds). Its
    /// turns are read from the store again for every view, and it takes no messages here.
    pub from_store: bool,
    /// Turns, history and change signal.
    pub journal: Arc<Journal>,
    /// The questions its agents ask the caller.
    pub gate: Arc<ApprovalGate>,
}

impl ServedTask {
    /// The runtime id of the last turn: the one whose status is the task's.
    pub(crate) fn last_turn(&self) -> String {
        self.journal.last_turn().unwrap_or_else(|| self.id.clone())
    }

    /// Whether `runtime_id` is one of this task's turns.
    pub(crate) fn has_turn(&self, runtime_id: &str) -> bool {
        self.journal.has_turn(runtime_id)
    }

    /// The bytes of caller-sent text this record keeps.
    fn remembered_bytes(&self) -> usize {
        self.journal.bytes()
            + self.context_id.len()
            + self.external_id.as_ref().map_or(0, String::len)
    }
}

/// A conversation: the child whose session holds it.
#[derive(Clone)]
pub(crate) struct Conversation {
    pub agent: String,
    pub child: Child,
    /// The caller-sent bytes its session holds (every input, and the context id).
    pub input_bytes: usize,
}

/// The book. Cheap lookups under one lock, never held across an await; an external id is
/// reserved while its task starts, so that two submissions of it cannot both start one.
pub(crate) struct TaskBook {
    inner: Mutex<Inner>,
    slots: Arc<Semaphore>,
    limit: usize,
}

/// What an external id stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum External {
    /// A submission with this id is being started.
    Reserved,
    /// The runtime's task id.
    Task(String),
}

pub(crate) struct Inner {
    tasks: HashMap<String, Arc<ServedTask>>,
    /// The A2A (continuable) tasks, oldest first.
    order: VecDeque<String>,
    /// The task-protocol tasks, oldest first.
    one_shot: VecDeque<String>,
    external: HashMap<String, External>,
    contexts: HashMap<String, Conversation>,
    context_order: VecDeque<String>,
    /// Caller-sent bytes kept by the task records, and by the conversations' sessions.
    task_bytes: usize,
    context_bytes: usize,
    /// The most of either before the oldest are forgotten.
    byte_budget: usize,
}

impl TaskBook {
    /// A book with `limit` slots for running tasks, remembering about `byte_budget` bytes of
    /// caller-sent text in task records and as much again in conversations.
    pub(crate) fn new(limit: usize, byte_budget: usize) -> Self {
        let limit = limit.max(1);
        Self {
            inner: Mutex::new(Inner {
                tasks: HashMap::new(),
                order: VecDeque::new(),
                one_shot: VecDeque::new(),
                external: HashMap::new(),
                contexts: HashMap::new(),
                context_order: VecDeque::new(),
                task_bytes: 0,
                context_bytes: 0,
                byte_budget,
            }),
            slots: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The most tasks running at once.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Task slots free now.
    pub(crate) fn free_slots(&self) -> usize {
        self.slots.available_permits()
    }

    /// A slot for one more running task, if there is one.
    pub(crate) fn try_admit(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().try_acquire_owned().ok()
    }

    /// A task by its runtime id.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<ServedTask>> {
        self.lock().tasks.get(id).cloned()
    }

    /// A task by its external id, else by its runtime id.
    pub(crate) fn find(&self, id: &str) -> Option<Arc<ServedTask>> {
        let g = self.lock();
        g.by_external(id).or_else(|| g.tasks.get(id).cloned())
    }

    /// Every remembered task, oldest first.
    pub(crate) fn list(&self) -> Vec<Arc<ServedTask>> {
        let g = self.lock();
        let mut all: Vec<Arc<ServedTask>> = g
            .order
            .iter()
            .chain(&g.one_shot)
            .filter_map(|id| g.tasks.get(id).cloned())
            .collect();
        all.sort_by_key(|t| t.created_at);
        all
    }
}

impl Inner {
    pub(crate) fn by_external(&self, id: &str) -> Option<Arc<ServedTask>> {
        match self.external.get(id) {
            Some(External::Task(tid)) => self.tasks.get(tid).cloned(),
            _ => None,
        }
    }

    /// Whether a submission with this external id is being started right now.
    pub(crate) fn is_reserved(&self, id: &str) -> bool {
        self.external.get(id) == Some(&External::Reserved)
    }

    /// Claim an external id while its task is being started.
    pub(crate) fn reserve(&mut self, id: &str) {
        self.external.insert(id.to_string(), External::Reserved);
    }

    /// Give up a claim whose task could not be started.
    pub(crate) fn release(&mut self, id: &str) {
        if self.is_reserved(id) {
            self.external.remove(id);
        }
    }

    pub(crate) fn conversation(&self, context_id: &str) -> Option<Conversation> {
        self.contexts.get(context_id).cloned()
    }

    /// Open a conversation; forget the oldest idle ones beyond the count or byte bound.
    pub(crate) fn add_conversation(&mut self, context_id: &str, conv: Conversation) {
        self.context_bytes += conv.input_bytes;
        match self.contexts.insert(context_id.to_string(), conv) {
            Some(old) => self.context_bytes -= old.input_bytes,
            None => self.context_order.push_back(context_id.to_string()),
        }
        self.forget_idle_conversations();
    }

    /// A conversation took another input of `bytes`.
    pub(crate) fn conversation_grew(&mut self, context_id: &str, bytes: usize) {
        if let Some(c) = self.contexts.get_mut(context_id) {
            c.input_bytes += bytes;
            self.context_bytes += bytes;
        }
        self.forget_idle_conversations();
    }

    fn forget_idle_conversations(&mut self) {
        let over = |i: &Inner| i.contexts.len() > MAX_CONTEXTS || i.context_bytes > i.byte_budget;
        // A busy child holds its session lock; those are kept, in order.
        let mut kept = Vec::new();
        while over(self) {
            let Some(old) = self.context_order.pop_front() else {
                break;
            };
            let idle = self
                .contexts
                .get(&old)
                .is_some_and(|c| c.child.session.try_lock().is_ok());
            if idle {
                if let Some(c) = self.contexts.remove(&old) {
                    self.context_bytes -= c.input_bytes;
                }
            } else {
                kept.push(old);
            }
        }
        for id in kept.into_iter().rev() {
            self.context_order.push_front(id);
        }
    }

    /// A task's record took `bytes` more of caller-sent text.
    pub(crate) fn task_grew(&mut self, bytes: usize) {
        self.task_bytes += bytes;
    }

    /// Record a started task; forget the oldest finished ones beyond the count or byte bound.
    pub(crate) fn insert(
        &mut self,
        task: ServedTask,
        is_finished: impl Fn(&ServedTask) -> bool,
    ) -> Arc<ServedTask> {
        let task = Arc::new(task);
        if let Some(ext) = &task.external_id {
            self.external
                .insert(ext.clone(), External::Task(task.id.clone()));
        }
        let queue = if task.continuable {
            &mut self.order
        } else {
            &mut self.one_shot
        };
        queue.push_back(task.id.clone());
        self.task_bytes += task.remembered_bytes();
        if let Some(old) = self.tasks.insert(task.id.clone(), task.clone()) {
            self.task_bytes = self.task_bytes.saturating_sub(old.remembered_bytes());
        }
        // Over the byte budget, task-protocol tasks go first: the store has all of them.
        let mut one_shot = std::mem::take(&mut self.one_shot);
        self.forget_finished(&mut one_shot, MAX_ONE_SHOT, &is_finished);
        self.one_shot = one_shot;
        let mut order = std::mem::take(&mut self.order);
        self.forget_finished(&mut order, MAX_TASKS, &is_finished);
        self.order = order;
        task
    }

    /// Forget the oldest finished tasks of `queue` while it holds more than `max` or the
    /// book is over its byte budget. Running tasks are kept, in order; there are at most as
    /// many as slots.
    fn forget_finished(
        &mut self,
        queue: &mut VecDeque<String>,
        max: usize,
        is_finished: &impl Fn(&ServedTask) -> bool,
    ) {
        let mut kept = Vec::new();
        while queue.len() > max || self.task_bytes > self.byte_budget {
            let Some(front) = queue.pop_front() else {
                break;
            };
            if self.tasks.get(&front).is_some_and(|t| !is_finished(t)) {
                kept.push(front);
                continue;
            }
            if let Some(old) = self.tasks.remove(&front) {
                self.task_bytes = self.task_bytes.saturating_sub(old.remembered_bytes());
                if let Some(ext) = &old.external_id {
                    self.external.remove(ext);
                }
            }
        }
        for id in kept.into_iter().rev() {
            queue.push_front(id);
        }
    }

    /// Caller-sent bytes the task records keep.
    #[cfg(test)]
    pub(crate) fn task_bytes(&self) -> usize {
        self.task_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(i: usize, input: &str) -> ServedTask {
        ServedTask {
            continuable: true,
            ..one_shot(i, input)
        }
    }

    /// A task-protocol task.
    fn one_shot(i: usize, input: &str) -> ServedTask {
        let journal = Arc::new(Journal::new(input.into(), "m".into()));
        journal.started(format!("task_{i}"));
        ServedTask {
            id: format!("task_{i}"),
            external_id: Some(format!("ext-{i}")),
            context_id: "c".into(),
            agent: "echo".into(),
            session_id: "s".into(),
            continuable: false,
            parent_session: "serve-1".into(),
            created_at: 0,
            from_store: false,
            gate: Arc::new(ApprovalGate::new(journal.clone())),
            journal,
        }
    }

    #[test]
    fn remembered_input_bytes_stay_under_the_budget() {
        let book = TaskBook::new(4, 10_000);
        let big = "x".repeat(1_000);
        let mut g = book.lock();
        for i in 0..300 {
            g.insert(task(i, &big), |_| true);
            assert!(
                g.task_bytes() <= 10_000,
                "{} bytes after {i}",
                g.task_bytes()
            );
        }
        // About 1 KB each: nine fit.
        assert_eq!(g.tasks.len(), 9);
        let kept: usize = g.tasks.values().map(|t| t.remembered_bytes()).sum();
        assert_eq!(g.task_bytes(), kept);
        // The newest are kept, the oldest (and their external ids) forgotten.
        assert!(g.tasks.contains_key("task_299"));
        assert!(!g.tasks.contains_key("task_0"));
        assert!(g.by_external("ext-0").is_none());
        assert!(g.by_external("ext-299").is_some());
        assert_eq!(g.external.len(), g.tasks.len());
    }

    #[test]
    fn running_tasks_are_kept_and_do_not_block_forgetting_the_rest() {
        let book = TaskBook::new(4, 5_000);
        let big = "y".repeat(1_000);
        let mut g = book.lock();
        for i in 0..50 {
            g.insert(task(i, &big), |t| t.id != "task_0" && t.id != "task_3");
        }
        assert!(g.tasks.contains_key("task_0") && g.tasks.contains_key("task_3"));
        assert!(g.tasks.contains_key("task_49"));
        assert!(!g.tasks.contains_key("task_1"));
        assert!(g.tasks.len() <= 6, "{}", g.tasks.len());
        // Still oldest first.
        assert_eq!(g.order.front().map(String::as_str), Some("task_0"));
    }

    // A node answering a steady stream of task-protocol tasks keeps a bounded few of the
    // finished ones (the store has them), so its memory stays flat; A2A tasks, which may
    // take a follow-up, are kept to the larger bound, and running ones always.
    #[test]
    fn few_finished_task_protocol_tasks_are_kept() {
        let book = TaskBook::new(4, usize::MAX);
        let mut g = book.lock();
        for i in 0..100 {
            g.insert(task(i, "a2a"), |_| true);
        }
        for i in 100..2_000 {
            g.insert(one_shot(i, "tp"), |t| t.id != "task_100");
        }
        // The running one is kept beside the bound's finished ones.
        assert_eq!(g.one_shot.len(), MAX_ONE_SHOT + 1);
        assert_eq!(g.tasks.len(), 100 + MAX_ONE_SHOT + 1);
        assert!(g.tasks.contains_key("task_100"), "a running one is kept");
        assert!(g.tasks.contains_key("task_1999") && !g.tasks.contains_key("task_101"));
        assert!(g.by_external("ext-101").is_none() && g.by_external("ext-1999").is_some());
        assert!((0..100).all(|i| g.tasks.contains_key(&format!("task_{i}"))));
        drop(g);
        let listed = book.list();
        assert_eq!(listed.len(), 100 + MAX_ONE_SHOT + 1);
        assert_eq!(listed[0].id, "task_0", "oldest first");
    }
}
