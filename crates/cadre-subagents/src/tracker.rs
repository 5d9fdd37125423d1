//! The task tracker: every child run is a task record with an explicit state machine, a
//! small progress log and exactly-once delivery of its completion to the parent.
//!
//! Transitions live in one function, [`TaskStatus::can_become`] (shared with the persistent
//! store, which enforces the same rule in SQL): terminal states never change, and once
//! cancellation is requested only a terminal state can be written.

use crate::progress::{ProgressLine, ProgressLog};
use cadre_types::{UpdateKind, Usage, unix_millis};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

pub use cadre_store::TaskStatus;

/// A snapshot of one task.
#[derive(Debug, Clone)]
pub struct TaskSnapshot {
    /// `task_<uuid>`.
    pub id: String,
    /// The sub-agent's name.
    pub agent: String,
    /// The parent's session id.
    pub parent_session_id: String,
    /// The child's session id.
    pub child_session_id: String,
    /// The short title given by the parent.
    pub description: String,
    /// The status.
    pub status: TaskStatus,
    /// The final (or partial) output.
    pub result: Option<String>,
    /// Why it failed, for failed tasks.
    pub error: Option<String>,
    /// Whether cancellation was requested.
    pub cancel_requested: bool,
    /// Whether the parent sees it as a background task.
    pub background: bool,
    /// Creation time, Unix ms.
    pub created_at: u64,
    /// Last change, Unix ms.
    pub updated_at: u64,
    /// Tokens the child used.
    pub usage: Usage,
    /// How the child's run ended, once it has (distinguishes a limit from a failure).
    pub end_state: Option<cadre_types::EndState>,
}

impl TaskSnapshot {
    /// Why the task's result is not complete; `None` when it is (or the task has not ended).
    /// Read from the run's end state, or from the status when the end state is unknown.
    pub fn incomplete_reason(&self) -> Option<cadre_types::IncompleteReason> {
        use cadre_types::IncompleteReason;
        if let Some(end) = &self.end_state {
            return end.incomplete_reason();
        }
        match self.status {
            TaskStatus::Cancelled => Some(IncompleteReason::Cancelled),
            TaskStatus::Failed => Some(IncompleteReason::Error),
            _ => None,
        }
    }
}

struct TaskEntry {
    snap: TaskSnapshot,
    delivered: bool,
    log: ProgressLog,
    cancel: CancellationToken,
    status_tx: watch::Sender<TaskStatus>,
}

/// Why a tracker operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrackerError {
    /// No such task (in this session).
    #[error("unknown task_id: {0}")]
    Unknown(String),
    /// The transition breaks the state rules.
    #[error("task {id} cannot go from {from} to {to}")]
    Refused {
        /// Task id.
        id: String,
        /// Current status.
        from: TaskStatus,
        /// Requested status.
        to: TaskStatus,
    },
}

/// A session's background tasks as its status summary shows them.
#[derive(Debug, Clone, Default)]
pub struct BackgroundStatus {
    /// The newest open (pending or running) tasks, newest first, up to the limit asked for.
    pub open: Vec<TaskSnapshot>,
    /// All open background tasks of the session.
    pub open_total: usize,
    /// Background tasks of the session that have ended.
    pub finished_total: usize,
}

/// All tasks of a runtime, in memory.
#[derive(Default, Clone)]
pub struct TaskTracker {
    inner: Arc<Mutex<Tracked>>,
}

#[derive(Default)]
struct Tracked {
    tasks: HashMap<String, TaskEntry>,
    /// Task ids per parent session, in creation order.
    by_session: HashMap<String, Vec<String>>,
    /// Woken whenever a background task of the session ends.
    signals: HashMap<String, Arc<Notify>>,
    /// Background tasks not yet terminal, per session (kept so waiting is O(1) per wake-up).
    open_background: HashMap<String, usize>,
    /// Background tasks that ended and may not be delivered yet, per session, in the order
    /// they ended (so delivery costs what it delivers, not a scan of every task).
    finished: HashMap<String, Vec<String>>,
}

/// What a new task starts with.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// Task id.
    pub id: String,
    /// Sub-agent name.
    pub agent: String,
    /// Parent session.
    pub parent_session_id: String,
    /// Child session.
    pub child_session_id: String,
    /// Short title.
    pub description: String,
    /// Background (delivered to the parent on completion) or foreground.
    pub background: bool,
}

impl TaskTracker {
    fn lock(&self) -> MutexGuard<'_, Tracked> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Register a task in `pending` state; returns its cancellation token and status watch.
    pub fn insert(&self, t: NewTask, cancel: CancellationToken) -> watch::Receiver<TaskStatus> {
        let now = unix_millis();
        let (tx, rx) = watch::channel(TaskStatus::Pending);
        let mut g = self.lock();
        g.by_session
            .entry(t.parent_session_id.clone())
            .or_default()
            .push(t.id.clone());
        if t.background {
            *g.open_background
                .entry(t.parent_session_id.clone())
                .or_default() += 1;
        }
        g.tasks.insert(
            t.id.clone(),
            TaskEntry {
                snap: TaskSnapshot {
                    id: t.id,
                    agent: t.agent,
                    parent_session_id: t.parent_session_id,
                    child_session_id: t.child_session_id,
                    description: t.description,
                    status: TaskStatus::Pending,
                    result: None,
                    error: None,
                    cancel_requested: false,
                    background: t.background,
                    created_at: now,
                    updated_at: now,
                    usage: Usage::default(),
                    end_state: None,
                },
                delivered: !t.background,
                log: ProgressLog::default(),
                cancel,
                status_tx: tx,
            },
        );
        rx
    }

    /// Move a task to `to`, with its result and error, under the state rules.
    pub fn transition(
        &self,
        id: &str,
        to: TaskStatus,
        result: Option<String>,
        error: Option<String>,
        usage: Option<Usage>,
    ) -> Result<(), TrackerError> {
        let mut g = self.lock();
        let e = g
            .tasks
            .get_mut(id)
            .ok_or_else(|| TrackerError::Unknown(id.to_string()))?;
        let from = e.snap.status;
        if !from.can_become(to, e.snap.cancel_requested) {
            return Err(TrackerError::Refused {
                id: id.to_string(),
                from,
                to,
            });
        }
        e.snap.status = to;
        e.snap.updated_at = unix_millis();
        if result.is_some() {
            e.snap.result = result;
        }
        if error.is_some() {
            e.snap.error = error;
        }
        if let Some(u) = usage {
            e.snap.usage = u;
        }
        e.status_tx.send_replace(to);
        if to.is_terminal() {
            e.log.shrink();
        }
        if to.is_terminal() && e.snap.background {
            let session = e.snap.parent_session_id.clone();
            if let Some(n) = g.open_background.get_mut(&session) {
                *n = n.saturating_sub(1);
            }
            g.finished
                .entry(session.clone())
                .or_default()
                .push(id.to_string());
            if let Some(n) = g.signals.get(&session) {
                n.notify_waiters();
            }
        }
        Ok(())
    }

    /// Request cancellation: sets the flag and cancels the child's token. Returns the
    /// status at the time of the request.
    pub fn request_cancel(&self, id: &str) -> Result<TaskStatus, TrackerError> {
        let mut g = self.lock();
        let e = g
            .tasks
            .get_mut(id)
            .ok_or_else(|| TrackerError::Unknown(id.to_string()))?;
        if !e.snap.status.is_terminal() {
            e.snap.cancel_requested = true;
            e.snap.updated_at = unix_millis();
            e.cancel.cancel();
        }
        Ok(e.snap.status)
    }

    /// Record how the child's run ended (kept even if the status write then loses a race).
    pub fn set_end_state(&self, id: &str, state: cadre_types::EndState) {
        if let Some(e) = self.lock().tasks.get_mut(id) {
            e.snap.end_state = Some(state);
        }
    }

    /// Mark a foreground task as background (timeout promotion): its completion will be delivered.
    pub fn promote(&self, id: &str) {
        let mut g = self.lock();
        let mut opened = None;
        let mut ended = None;
        if let Some(e) = g.tasks.get_mut(id) {
            if !e.snap.background {
                let session = e.snap.parent_session_id.clone();
                if e.snap.status.is_terminal() {
                    // It ended between the caller's timeout and this promotion.
                    ended = Some(session);
                } else {
                    opened = Some(session);
                }
            }
            if !e.snap.background {
                e.snap.background = true;
                e.delivered = false;
            }
        }
        if let Some(session) = opened {
            *g.open_background.entry(session).or_default() += 1;
        }
        if let Some(session) = ended {
            g.finished.entry(session).or_default().push(id.to_string());
        }
    }

    /// Background tasks of `session` still pending or running (O(1)).
    pub fn open_background(&self, session: &str) -> usize {
        self.lock()
            .open_background
            .get(session)
            .copied()
            .unwrap_or(0)
    }

    /// The signal woken when a background task of `session` ends.
    pub fn session_signal(&self, session: &str) -> Arc<Notify> {
        self.lock()
            .signals
            .entry(session.to_string())
            .or_default()
            .clone()
    }

    /// (background tasks still running or pending, finished ones not yet delivered) of a
    /// session, from the open-task counter and the queue of ended tasks (no scan of the
    /// session's tasks).
    pub fn pending_counts(&self, session: &str) -> (usize, usize) {
        let g = self.lock();
        let running = g.open_background.get(session).copied().unwrap_or(0);
        let ready = g
            .finished
            .get(session)
            .into_iter()
            .flatten()
            .filter(|id| g.tasks.get(*id).is_some_and(|e| !e.delivered))
            .count();
        (running, ready)
    }

    /// Mark a task's completion as delivered (e.g. read by `task_output`).
    pub fn mark_delivered(&self, id: &str) {
        if let Some(e) = self.lock().tasks.get_mut(id) {
            e.delivered = true;
        }
    }

    /// Record the running token total of a task still running (its end state sets the final one).
    pub fn record_usage(&self, id: &str, usage: Usage) {
        if let Some(e) = self.lock().tasks.get_mut(id)
            && !e.snap.status.is_terminal()
        {
            e.snap.usage = usage;
        }
    }

    /// Record a progress update in the task's small log (a preview of it).
    pub fn log(&self, id: &str, kind: UpdateKind, tool: Option<&str>, text: &str) {
        if let Some(e) = self.lock().tasks.get_mut(id) {
            e.log.push(kind, tool, text);
        }
    }

    /// The task's recent progress, oldest first.
    pub fn log_of(&self, id: &str) -> Vec<ProgressLine> {
        self.lock()
            .tasks
            .get(id)
            .map(|e| e.log.lines())
            .unwrap_or_default()
    }

    /// A snapshot of one task.
    pub fn get(&self, id: &str) -> Option<TaskSnapshot> {
        self.lock().tasks.get(id).map(|e| e.snap.clone())
    }

    /// Watch a task's status.
    pub fn watch(&self, id: &str) -> Option<watch::Receiver<TaskStatus>> {
        self.lock().tasks.get(id).map(|e| e.status_tx.subscribe())
    }

    /// All tasks of a parent session, in creation order.
    pub fn of_session(&self, session: &str) -> Vec<TaskSnapshot> {
        let g = self.lock();
        g.by_session
            .get(session)
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| g.tasks.get(id))
                    .map(|e| e.snap.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The background tasks of a session for its status summary: the newest `limit` that
    /// are still open (pending or running), newest first, with the open and finished totals.
    pub fn background_status(&self, session: &str, limit: usize) -> BackgroundStatus {
        let g = self.lock();
        let open_total = g.open_background.get(session).copied().unwrap_or(0);
        let mut status = BackgroundStatus {
            open: Vec::new(),
            open_total,
            finished_total: 0,
        };
        let mut total = 0usize;
        for id in g.by_session.get(session).into_iter().flatten().rev() {
            if let Some(e) = g.tasks.get(id)
                && e.snap.background
            {
                total += 1;
                if status.open.len() < limit && !e.snap.status.is_terminal() {
                    status.open.push(e.snap.clone());
                }
            }
        }
        status.finished_total = total.saturating_sub(open_total);
        status
    }

    /// Finished, undelivered background tasks of a session, in the order they ended; marks
    /// them delivered. Tasks already read (e.g. by `task_output`) are skipped.
    pub fn take_finished(&self, session: &str) -> Vec<TaskSnapshot> {
        let mut g = self.lock();
        let Some(ids) = g.finished.remove(session) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for id in ids {
            if let Some(e) = g.tasks.get_mut(&id)
                && e.snap.background
                && !e.delivered
                && e.snap.status.is_terminal()
            {
                e.delivered = true;
                out.push(e.snap.clone());
            }
        }
        out
    }

    /// Status receivers of every task not yet terminal, in any session.
    pub fn unfinished(&self) -> Vec<watch::Receiver<TaskStatus>> {
        self.lock()
            .tasks
            .values()
            .filter(|e| !e.snap.status.is_terminal())
            .map(|e| e.status_tx.subscribe())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskStatus::*;

    #[test]
    fn transition_table_is_exhaustive() {
        // (from, to, cancel_requested) -> allowed
        for from in TaskStatus::ALL {
            for to in TaskStatus::ALL {
                for cancel in [false, true] {
                    let expected = match (from, to) {
                        _ if from.is_terminal() => false,
                        (_, t) if cancel && !t.is_terminal() => false,
                        (Pending, Running) => true,
                        (Pending | Running, t) => t.is_terminal(),
                        _ => false,
                    };
                    assert_eq!(
                        from.can_become(to, cancel),
                        expected,
                        "{from} -> {to} (cancel={cancel})"
                    );
                }
            }
        }
        assert!(!Completed.can_become(Failed, false));
        assert!(!Cancelled.can_become(Completed, false));
        assert!(!Running.can_become(Running, false));
        assert!(!Running.can_become(Pending, false));
        assert!(
            Running.can_become(Completed, true),
            "a racing terminal state may land"
        );
    }

    fn new(id: &str, background: bool) -> NewTask {
        NewTask {
            id: id.into(),
            agent: "a".into(),
            parent_session_id: "s".into(),
            child_session_id: format!("sub-{id}"),
            description: "d".into(),
            background,
        }
    }

    #[test]
    fn delivery_follows_completion_order_and_skips_what_was_read() {
        let t = TaskTracker::default();
        for id in ["a", "b", "c"] {
            t.insert(new(id, true), CancellationToken::new());
        }
        for id in ["c", "a", "b"] {
            t.transition(id, Completed, Some(id.into()), None, None)
                .unwrap();
        }
        t.mark_delivered("a");
        let ids: Vec<_> = t.take_finished("s").into_iter().map(|s| s.id).collect();
        assert_eq!(ids, ["c", "b"]);
        assert!(t.take_finished("s").is_empty());
        t.insert(new("d", true), CancellationToken::new());
        t.insert(new("e", true), CancellationToken::new());
        t.insert(new("f", true), CancellationToken::new());
        let status = t.background_status("s", 2);
        assert_eq!((status.open_total, status.finished_total), (3, 3));
        assert_eq!(
            status
                .open
                .iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>(),
            ["f", "e"]
        );
    }

    #[test]
    fn a_foreground_task_promoted_after_it_ended_is_still_delivered() {
        let t = TaskTracker::default();
        t.insert(new("f", false), CancellationToken::new());
        t.transition("f", Completed, Some("late".into()), None, None)
            .unwrap();
        assert!(t.take_finished("s").is_empty(), "foreground: not delivered");
        t.promote("f");
        assert_eq!(t.open_background("s"), 0);
        let got = t.take_finished("s");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].result.as_deref(), Some("late"));
    }

    #[test]
    fn completion_is_delivered_once_and_terminal_states_stick() {
        let t = TaskTracker::default();
        t.insert(new("t1", true), CancellationToken::new());
        t.insert(new("t2", false), CancellationToken::new());
        t.transition("t1", Running, None, None, None).unwrap();
        assert!(t.take_finished("s").is_empty());
        t.transition("t1", Completed, Some("r".into()), None, None)
            .unwrap();
        t.transition("t2", Running, None, None, None).unwrap();
        t.transition("t2", Completed, Some("r2".into()), None, None)
            .unwrap();
        let got = t.take_finished("s");
        assert_eq!(got.len(), 1, "foreground tasks are not injected");
        assert_eq!(got[0].result.as_deref(), Some("r"));
        assert!(t.take_finished("s").is_empty(), "exactly once");
        assert!(t.transition("t1", Failed, None, None, None).is_err());
    }

    #[test]
    fn cancel_blocks_non_terminal_writes_and_cancels_the_token() {
        let t = TaskTracker::default();
        let token = CancellationToken::new();
        t.insert(new("t1", true), token.clone());
        t.request_cancel("t1").unwrap();
        assert!(token.is_cancelled());
        assert!(t.transition("t1", Running, None, None, None).is_err());
        t.transition("t1", Cancelled, None, None, None).unwrap();
        assert_eq!(t.get("t1").unwrap().status, Cancelled);
    }

    #[test]
    fn open_background_counts_follow_inserts_promotions_and_ends() {
        let t = TaskTracker::default();
        t.insert(new("b1", true), CancellationToken::new());
        t.insert(new("f1", false), CancellationToken::new());
        assert_eq!(t.open_background("s"), 1);
        t.promote("f1");
        assert_eq!(t.open_background("s"), 2);
        t.transition("b1", Running, None, None, None).unwrap();
        t.transition("b1", Completed, None, None, None).unwrap();
        assert_eq!(t.open_background("s"), 1);
        t.request_cancel("f1").unwrap();
        t.transition("f1", Cancelled, None, None, None).unwrap();
        assert_eq!(t.open_background("s"), 0);
        assert_eq!(t.pending_counts("s"), (0, 2));
    }

    #[test]
    fn log_keeps_previews_and_shrinks_at_the_end() {
        let t = TaskTracker::default();
        t.insert(new("t1", true), CancellationToken::new());
        for i in 0..(crate::progress::TASK_LOG_CAPACITY + 5) {
            t.log("t1", UpdateKind::ToolStart, Some("bash"), &i.to_string());
        }
        let log = t.log_of("t1");
        assert_eq!(log.len(), crate::progress::TASK_LOG_CAPACITY);
        assert_eq!(log[0].text, "5");
        t.transition("t1", Running, None, None, None).unwrap();
        t.transition("t1", Completed, None, None, None).unwrap();
        assert_eq!(t.log_of("t1").len(), crate::progress::TASK_LOG_CAPACITY);
        assert!(t.log_of("missing").is_empty());
    }
}
