//! What of a running task cannot be stored, kept for the tasks this process runs: the
//! child's cancellation token, a watch of its status (so waiters here wake at once), its
//! progress (the bounded log `task_output` shows while it runs, and its token count so
//! far; the store gets the total when it ends), and per parent session the
//! concurrency slots and the wake-up of a parent held open for its background tasks.
//!
//! Task state itself (status, result, delivery) has one owner, the task store. An entry here
//! lives while its task runs and goes when it ends; a session's entry goes with its last
//! running task. So this map holds nothing for a finished session, however many tasks it ran.

use crate::runtime::progress::{ProgressLine, ProgressLog};
use cadre_store::TaskRecord;
use cadre_types::{TaskStatus, UpdateKind, Usage};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;

/// The local side of the running tasks. Cheap to clone (clones share the map).
#[derive(Clone, Default)]
pub(crate) struct LocalTasks {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Running>,
    sessions: HashMap<String, SessionLocal>,
}

/// A task running here.
struct Running {
    session: String,
    /// Whether its end wakes the parent (a background task, or a promoted one).
    background: bool,
    cancel: CancellationToken,
    status: watch::Sender<TaskStatus>,
    /// The task as stored by its end, for waiters here: made when the first one asks (a
    /// task nobody waits for has none, and its end need not return it).
    end: Option<EndSlot>,
    log: ProgressLog,
    /// Tokens used so far (live progress; the store gets the total at the end).
    usage: Usage,
}

/// Where a task's end, as the store returned it, is left for the waiters of its status
/// watch: set before the watch shows the end, so they need not read it back.
pub(crate) type EndSlot = Arc<End>;

/// A task's end for its waiters here, and whether one of them takes it: then its delivery
/// is written with the end, in one write instead of two.
#[derive(Default)]
pub(crate) struct End(Mutex<Takers>);

/// Small until the end comes: every task a fan-out's calls wait for has one.
#[derive(Default)]
struct Takers {
    /// Waiters that will take the task's result when it ends.
    waiting: u32,
    /// The end was claimed for them: it is written delivered.
    claimed: bool,
    /// The task as the store returned it at its end, once it ended (when it did).
    record: Option<Box<TaskRecord>>,
}

impl End {
    /// The task as the store returned it at its end, once it ended (when it did).
    pub(crate) fn record(&self) -> Option<TaskRecord> {
        self.takers().record.as_deref().cloned()
    }

    fn takers(&self) -> MutexGuard<'_, Takers> {
        match self.0.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// A waiter stops waiting before the end: true when it no longer takes it; false when
    /// the end was already claimed for it (it is being written delivered, so the waiter must
    /// wait for it, or the result would be lost).
    pub(crate) fn withdraw(&self) -> bool {
        let mut t = self.takers();
        if t.claimed {
            return false;
        }
        t.waiting = t.waiting.saturating_sub(1);
        true
    }

    /// True when the end was claimed for its takers (written delivered, unless refused).
    pub(crate) fn claimed(&self) -> bool {
        self.takers().claimed
    }

    /// The end is about to be written: true (and claimed) when a waiter takes it.
    fn claim(&self) -> bool {
        let mut t = self.takers();
        t.claimed = t.waiting > 0;
        t.claimed
    }
}

/// What the waiters here want of a task's end (see [`LocalTasks::end_wanted`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EndWanted {
    /// The task as stored by its end, handed to them.
    pub returned: bool,
    /// Its result taken by one of them: delivered with the end.
    pub delivered: bool,
}

/// A task registered here whose job has not started yet (see [`LocalTasks::register`]).
pub(crate) struct Registered {
    /// The task's cancellation token.
    pub cancel: CancellationToken,
    /// Its session's concurrency slots.
    pub slot: Arc<Semaphore>,
    /// A slot it holds already.
    pub permit: Option<OwnedSemaphorePermit>,
    /// Removes the entry when the task is not launched (its record could not be created, or
    /// the call creating it was dropped).
    undo: Option<(LocalTasks, String)>,
}

impl Registered {
    /// The job took the entry over: it ends it when the task ends.
    pub(crate) fn launched(
        mut self,
    ) -> (
        CancellationToken,
        Arc<Semaphore>,
        Option<OwnedSemaphorePermit>,
    ) {
        self.undo = None;
        (self.cancel.clone(), self.slot.clone(), self.permit.take())
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some((local, id)) = self.undo.take() {
            // Never stored, or stored and never run: nobody here waits for it.
            local.finish(&id, TaskStatus::Failed);
        }
    }
}

/// What a parent session has while it has tasks running here.
struct SessionLocal {
    /// Its tasks running here.
    tasks: usize,
    /// Those of them that are background tasks.
    open_background: usize,
    /// Woken whenever one of its background tasks ends.
    ended: Arc<Notify>,
    /// Its concurrency slots.
    slots: Arc<Semaphore>,
}

/// Below this capacity a map keeps its room: shrinking it would only be growing it again.
const KEPT_CAPACITY: usize = 64;

/// Give back most of a map's room once it holds a quarter of what it could: a map keeps its
/// capacity as entries go, so a fan-out of 10 000 tasks would hold room for 14 336 for the
/// life of the process. Shrinking to twice the entries left makes the cost of a shrink
/// amortised over the removals before it.
fn shrink_after_removal<V>(map: &mut HashMap<String, V>) {
    let capacity = map.capacity();
    if capacity > KEPT_CAPACITY && map.len() < capacity / 4 {
        map.shrink_to((map.len() * 2).max(KEPT_CAPACITY));
    }
}

impl LocalTasks {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Register a task of `session`; returns the session's concurrency slots, of which a new session gets `max_concurrent`.
    pub(crate) fn insert(
        &self,
        id: &str,
        session: &str,
        background: bool,
        cancel: CancellationToken,
        max_concurrent: usize,
    ) -> Arc<Semaphore> {
        let (status, _) = watch::channel(TaskStatus::Pending);
        let mut g = self.lock();
        let s = g
            .sessions
            .entry(session.to_string())
            .or_insert_with(|| SessionLocal {
                tasks: 0,
                open_background: 0,
                ended: Arc::new(Notify::new()),
                slots: Arc::new(Semaphore::new(max_concurrent.max(1))),
            });
        s.tasks += 1;
        s.open_background += usize::from(background);
        let slots = s.slots.clone();
        g.tasks.insert(
            id.to_string(),
            Running {
                session: session.to_string(),
                background,
                cancel,
                status,
                end: None,
                log: ProgressLog::default(),
                usage: Usage::default(),
            },
        );
        slots
    }

    /// Register a task of `session` before its record is created: the entry goes again
    /// unless [`Registered::launched`] says its job took it over. The job may start at
    /// once when `permit` holds a slot, taken now if one is free (`try_slot`).
    pub(crate) fn register(
        &self,
        id: &str,
        session: &str,
        background: bool,
        cancel: CancellationToken,
        max_concurrent: usize,
        try_slot: bool,
    ) -> Registered {
        let slot = self.insert(id, session, background, cancel.clone(), max_concurrent);
        let permit = try_slot
            .then(|| slot.clone().try_acquire_owned().ok())
            .flatten();
        Registered {
            cancel,
            slot,
            permit,
            undo: Some((self.clone(), id.to_string())),
        }
    }

    /// The task started.
    pub(crate) fn started(&self, id: &str) {
        if let Some(t) = self.lock().tasks.get(id) {
            t.status.send_replace(TaskStatus::Running);
        }
    }

    /// The task ended (its end is stored already): waiters see `status`, a background task's
    /// parent is woken, and the entry goes, with its session's when it was the last.
    pub(crate) fn finish(&self, id: &str, status: TaskStatus) {
        self.finish_with(id, status, None);
    }

    /// [`Self::finish`], leaving the waiters the task as the store returned it at its end
    /// (`stored`), when it did.
    pub(crate) fn finish_with(
        &self,
        id: &str,
        status: TaskStatus,
        stored: Option<Box<TaskRecord>>,
    ) {
        let mut g = self.lock();
        let Some(t) = g.tasks.remove(id) else {
            return;
        };
        if let (Some(slot), Some(r)) = (&t.end, stored) {
            slot.takers().record = Some(r);
        }
        t.status.send_replace(status);
        shrink_after_removal(&mut g.tasks);
        let Some(s) = g.sessions.get_mut(&t.session) else {
            return;
        };
        s.tasks = s.tasks.saturating_sub(1);
        if t.background {
            s.open_background = s.open_background.saturating_sub(1);
            s.ended.notify_waiters();
        }
        if s.tasks == 0 {
            // Anyone still waiting on this entry's wake-up looks again and finds it gone.
            s.ended.notify_waiters();
            g.sessions.remove(&t.session);
            shrink_after_removal(&mut g.sessions);
        }
    }

    /// A foreground task became a background one: its end will wake the parent. False when
    /// it does not run here (any more).
    pub(crate) fn promote(&self, id: &str) -> bool {
        let mut g = self.lock();
        let Some(t) = g.tasks.get_mut(id) else {
            return false;
        };
        if !t.background {
            t.background = true;
            let session = t.session.clone();
            if let Some(s) = g.sessions.get_mut(&session) {
                s.open_background += 1;
            }
        }
        true
    }

    /// Cancel the child's token, if the task runs here.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        match self.lock().tasks.get(id) {
            Some(t) => {
                t.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Record the running token total of a task (its stored end carries the final one).
    pub(crate) fn record_usage(&self, id: &str, usage: Usage) {
        if let Some(t) = self.lock().tasks.get_mut(id) {
            t.usage = usage;
        }
    }

    /// The running token total of a task, while it runs here.
    pub(crate) fn usage_of(&self, id: &str) -> Option<Usage> {
        self.lock().tasks.get(id).map(|t| t.usage)
    }

    /// Record a progress update in the task's small log (a preview of it).
    pub(crate) fn log(&self, id: &str, kind: UpdateKind, tool: Option<&str>, text: &str) {
        if let Some(t) = self.lock().tasks.get_mut(id) {
            t.log.push(kind, tool, text);
        }
    }

    /// The task's recent progress, oldest first (empty unless it runs here).
    pub(crate) fn log_of(&self, id: &str) -> Vec<ProgressLine> {
        self.lock()
            .tasks
            .get(id)
            .map(|t| t.log.lines())
            .unwrap_or_default()
    }

    /// A watch of the task's status, if it runs here.
    pub(crate) fn watch(&self, id: &str) -> Option<watch::Receiver<TaskStatus>> {
        self.lock().tasks.get(id).map(|t| t.status.subscribe())
    }

    /// A watch of the task's status and the slot its end is left in, if it runs here.
    pub(crate) fn watch_end(&self, id: &str) -> Option<(watch::Receiver<TaskStatus>, EndSlot)> {
        let mut g = self.lock();
        let t = g.tasks.get_mut(id)?;
        let slot = t.end.get_or_insert_with(EndSlot::default).clone();
        Some((t.status.subscribe(), slot))
    }

    /// [`Self::watch_end`] for a waiter of `session` that takes the task's result when it
    /// ends; `None` unless the task runs here for `session`.
    pub(crate) fn take_end(
        &self,
        id: &str,
        session: &str,
    ) -> Option<(watch::Receiver<TaskStatus>, EndSlot)> {
        let mut g = self.lock();
        let t = g.tasks.get_mut(id).filter(|t| t.session == session)?;
        let slot = t.end.get_or_insert_with(EndSlot::default).clone();
        slot.takers().waiting += 1;
        Some((t.status.subscribe(), slot))
    }

    /// Who waits here for the task's end, as it is about to be written: whether anyone
    /// waits for it as stored (see [`Self::watch_end`]), and whether one of them takes it
    /// (claimed now: the end is written delivered).
    pub(crate) fn end_wanted(&self, id: &str) -> EndWanted {
        match self.lock().tasks.get(id).and_then(|t| t.end.as_ref()) {
            Some(end) => EndWanted {
                returned: true,
                delivered: end.claim(),
            },
            None => EndWanted::default(),
        }
    }

    /// Status watches of every task running here.
    pub(crate) fn unfinished(&self) -> Vec<watch::Receiver<TaskStatus>> {
        self.lock()
            .tasks
            .values()
            .map(|t| t.status.subscribe())
            .collect()
    }

    /// True while the task runs here.
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.lock().tasks.contains_key(id)
    }

    /// True while the task runs here for a parent of `session`.
    pub(crate) fn runs_for(&self, id: &str, session: &str) -> bool {
        self.lock()
            .tasks
            .get(id)
            .is_some_and(|t| t.session == session)
    }

    /// How many tasks run here.
    pub(crate) fn len(&self) -> usize {
        self.lock().tasks.len()
    }

    /// How many parent sessions have tasks running here.
    pub(crate) fn sessions(&self) -> usize {
        self.lock().sessions.len()
    }

    /// The wake-up of `session`'s background task ends, with how many of them run here; `None`
    /// when none of its tasks runs here.
    pub(crate) fn session_wake(&self, session: &str) -> Option<Arc<Notify>> {
        self.lock().sessions.get(session).map(|s| s.ended.clone())
    }

    /// Background tasks of `session` running here, if `wake` is still its wake-up (else the
    /// session's entry was replaced meanwhile, and the caller must look again).
    pub(crate) fn open_background(&self, session: &str, wake: &Arc<Notify>) -> Option<usize> {
        match self.lock().sessions.get(session) {
            Some(s) if Arc::ptr_eq(&s.ended, wake) => Some(s.open_background),
            Some(_) => None,
            None => Some(0),
        }
    }

    /// Background tasks of `session` running here.
    pub(crate) fn open_background_of(&self, session: &str) -> usize {
        self.lock()
            .sessions
            .get(session)
            .map_or(0, |s| s.open_background)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_go_with_their_task_and_sessions_with_their_last() {
        let t = LocalTasks::default();
        let slots = t.insert("a", "s", true, CancellationToken::new(), 2);
        t.insert("b", "s", false, CancellationToken::new(), 2);
        assert_eq!(slots.available_permits(), 2);
        let wake = t.session_wake("s").unwrap();
        assert_eq!(t.open_background("s", &wake), Some(1));
        assert!(t.promote("b"));
        assert_eq!(t.open_background("s", &wake), Some(2));
        let mut rx = t.watch("a").unwrap();
        t.started("a");
        assert_eq!(*rx.borrow_and_update(), TaskStatus::Running);
        t.finish("a", TaskStatus::Completed);
        assert_eq!(*rx.borrow(), TaskStatus::Completed, "the last value stays");
        assert!(t.watch("a").is_none());
        assert_eq!((t.len(), t.sessions()), (1, 1));
        t.finish("b", TaskStatus::Failed);
        assert_eq!((t.len(), t.sessions()), (0, 0));
        assert_eq!(t.open_background("s", &wake), Some(0));
        t.insert("c", "s", true, CancellationToken::new(), 2);
        assert_eq!(t.open_background("s", &wake), None, "a new entry");
        assert!(!t.promote("a"));
    }

    #[test]
    fn an_end_is_delivered_with_its_write_only_to_a_waiter_that_still_takes_it() {
        let t = LocalTasks::default();
        t.insert("a", "s", true, CancellationToken::new(), 2);
        assert_eq!(t.end_wanted("a"), EndWanted::default(), "nobody waits");
        assert!(t.take_end("a", "other-session").is_none());
        let (_rx, end) = t.watch_end("a").unwrap();
        assert_eq!(
            t.end_wanted("a"),
            EndWanted {
                returned: true,
                delivered: false
            },
            "a waiter that only reads it"
        );
        // A taker that gave up before the end takes nothing.
        let (_rx, _) = t.take_end("a", "s").unwrap();
        assert!(end.withdraw());
        assert!(!t.end_wanted("a").delivered);
        // One that is still there when the end is written is delivered it, and cannot give
        // up any more: the end is its.
        let (_rx, _) = t.take_end("a", "s").unwrap();
        assert!(t.end_wanted("a").delivered);
        assert!(!end.withdraw());
        let record = cadre_store::NewTask::new("w", "s", "p").into_record("n", "i", 1);
        t.finish_with("a", TaskStatus::Completed, Some(Box::new(record.clone())));
        assert_eq!(end.record(), Some(record));
    }

    #[test]
    fn the_maps_give_back_their_room_when_a_fan_out_ends() {
        let t = LocalTasks::default();
        let ids: Vec<String> = (0..10_000).map(|i| format!("t{i}")).collect();
        for (i, id) in ids.iter().enumerate() {
            t.insert(
                id,
                &format!("s{}", i % 500),
                true,
                CancellationToken::new(),
                4,
            );
        }
        let grown = {
            let g = t.lock();
            (g.tasks.capacity(), g.sessions.capacity())
        };
        assert!(grown.0 >= 10_000 && grown.1 >= 500, "{grown:?}");
        for id in &ids {
            t.finish(id, TaskStatus::Completed);
        }
        let g = t.lock();
        assert!(g.tasks.is_empty() && g.sessions.is_empty());
        assert!(
            g.tasks.capacity() <= 2 * KEPT_CAPACITY,
            "{}",
            g.tasks.capacity()
        );
        assert!(
            g.sessions.capacity() <= 2 * KEPT_CAPACITY,
            "{}",
            g.sessions.capacity()
        );
    }

    #[test]
    fn cancel_reaches_the_token_of_a_task_running_here() {
        let t = LocalTasks::default();
        let token = CancellationToken::new();
        t.insert("a", "s", true, token.clone(), 1);
        assert!(t.cancel("a"));
        assert!(token.is_cancelled());
        assert!(!t.cancel("missing"));
    }

    #[test]
    fn the_log_keeps_previews_while_the_task_runs() {
        let t = LocalTasks::default();
        t.insert("a", "s", true, CancellationToken::new(), 1);
        for i in 0..(crate::runtime::progress::TASK_LOG_CAPACITY + 5) {
            t.log("a", UpdateKind::ToolStart, Some("bash"), &i.to_string());
        }
        let log = t.log_of("a");
        assert_eq!(log.len(), crate::runtime::progress::TASK_LOG_CAPACITY);
        assert_eq!(log[0].text, "5");
        t.finish("a", TaskStatus::Completed);
        assert!(t.log_of("a").is_empty());
    }
}
