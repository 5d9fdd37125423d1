//! [`MemoryStore`]: the task store in this process's memory, with the same records, state
//! rules and semantics as the SQL store (the shared store test suite runs on it too).
//!
//! It is the default store of library users who do not ask for persistence: one owner of
//! task state whichever backend holds it. Handles made with [`MemoryStore::on_node`] share the
//! same memory under another node id, as two nodes share one database.
//!
//! What it keeps is bounded: beyond [`DEFAULT_RETENTION`] finished tasks whose result has
//! been delivered, the oldest of them are forgotten (a database would keep them; memory
//! should not grow with every task a long-running process ever ran).

use crate::error::{StoreError, StoreResult};
use crate::model::{
    BackgroundSummary, Checkpoint, LiveChildEntry, NewTask, OrphanPolicy, ServedTurn, TaskFilter,
    TaskOwner, TaskRecord, Transition,
};
use crate::node::{NodeId, current_instance, instance_alive};
use crate::sql::{executor_died_message, executor_lost_message};
use crate::store::{CancelWatch, TaskStore, report_cancellations};
use cadre_types::{Message, TaskStatus, Usage, unix_millis};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};

/// Finished, delivered tasks a [`MemoryStore`] keeps before it forgets the oldest.
pub const DEFAULT_RETENTION: usize = 100_000;

/// The task store in memory. Cheap to clone (clones share the memory and the node).
#[derive(Clone)]
pub struct MemoryStore {
    pub(crate) shared: Arc<Shared>,
    node: NodeId,
    instance: String,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Shared {
    tables: Mutex<Tables>,
    /// Woken whenever a cancellation is requested.
    cancelled: Notify,
    retention: usize,
    /// Teams, their messages and boards (see [`crate::memory_teams`]).
    pub(crate) teams: Mutex<crate::memory_teams::Teams>,
}

#[derive(Default)]
struct Tables {
    tasks: HashMap<String, TaskRecord>,
    /// Task ids per parent session, by creation sequence.
    by_session: HashMap<String, BTreeMap<u64, String>>,
    /// Every task id by creation sequence, and each task's sequence.
    order: BTreeMap<u64, String>,
    seq_of: HashMap<String, u64>,
    next_seq: u64,
    /// Ids of pending and running tasks.
    active: HashSet<String>,
    /// Active tasks with a cancel request, per owner node.
    cancels: HashMap<String, HashSet<String>>,
    /// Waiters of `wait_terminal`, per task id (removed when the task ends).
    waiters: HashMap<String, Arc<Notify>>,
    /// Tasks that were finished and delivered when they were queued here, oldest first:
    /// the candidates for forgetting.
    done: VecDeque<String>,
    /// Live children per parent session.
    live: HashMap<String, Vec<LiveChildEntry>>,
    live_keys: HashSet<String>,
    /// Checkpoints of active tasks (removed when the task ends).
    checkpoints: HashMap<String, Checkpoint>,
    /// Owner histories of adopted tasks (forgotten with their task).
    owners: HashMap<String, Vec<TaskOwner>>,
}

/// Unix milliseconds, as the SQL store stores them.
fn now() -> u64 {
    unix_millis()
}

/// The Unix ms before which a task's last sign of life makes it an orphan.
fn cutoff(orphan_timeout: Duration) -> u64 {
    now().saturating_sub(u64::try_from(orphan_timeout.as_millis()).unwrap_or(u64::MAX))
}

/// A local, active task left for adoption whose last sign of life is before `cutoff`.
fn is_resumable_orphan(r: &TaskRecord, cutoff: u64) -> bool {
    !r.status.is_terminal()
        && r.transport.is_local()
        && r.on_orphan == OrphanPolicy::Resume
        && r.heartbeat_at.unwrap_or(r.created_at) < cutoff
}

/// Oldest first, as the SQL store sorts.
fn sorted(mut v: Vec<TaskRecord>) -> Vec<TaskRecord> {
    v.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    v
}

impl Tables {
    fn session_ids(&self, session: &str) -> impl Iterator<Item = &String> {
        self.by_session
            .get(session)
            .into_iter()
            .flat_map(|m| m.values())
    }

    fn get_mut(&mut self, id: &str) -> StoreResult<&mut TaskRecord> {
        self.tasks
            .get_mut(id)
            .ok_or_else(|| StoreError::NotFound(id.to_string()))
    }

    /// What follows a task's end: it leaves the active set, waiters wake.
    fn ended(&mut self, id: &str, owner: &str) {
        self.active.remove(id);
        self.checkpoints.remove(id);
        if let Some(set) = self.cancels.get_mut(owner) {
            set.remove(id);
        }
        if let Some(n) = self.waiters.remove(id) {
            n.notify_waiters();
        }
        self.queue_if_done(id);
    }

    /// Queue a task for forgetting once it is finished and delivered.
    fn queue_if_done(&mut self, id: &str) {
        if self
            .tasks
            .get(id)
            .is_some_and(|r| r.status.is_terminal() && r.delivered)
        {
            self.done.push_back(id.to_string());
        }
    }

    /// Forget the oldest finished, delivered tasks beyond `retention`.
    fn forget_beyond(&mut self, retention: usize) {
        while self.done.len() > retention {
            let Some(id) = self.done.pop_front() else {
                break;
            };
            // Promoted since it was queued: not done any more (it is queued again on delivery).
            let still_done = self
                .tasks
                .get(&id)
                .is_some_and(|r| r.status.is_terminal() && r.delivered);
            if !still_done {
                continue;
            }
            self.owners.remove(&id);
            if let Some(r) = self.tasks.remove(&id)
                && let Some(seq) = self.seq_of.remove(&id)
            {
                self.order.remove(&seq);
                if let Some(m) = self.by_session.get_mut(&r.parent_session_id) {
                    m.remove(&seq);
                    if m.is_empty() {
                        self.by_session.remove(&r.parent_session_id);
                    }
                }
            }
        }
    }

    /// Fail an active task with `error` (sweeper and recovery).
    fn fail(&mut self, id: &str, error: &str) {
        let owner = match self.tasks.get_mut(id) {
            Some(r) if !r.status.is_terminal() => {
                r.status = TaskStatus::Failed;
                r.error = Some(error.to_string());
                r.end_state = Some("failed".to_string());
                r.updated_at = now();
                r.owner_node.clone()
            }
            _ => return,
        };
        self.ended(id, &owner);
    }
}

impl MemoryStore {
    /// An empty store whose tasks are owned by `node`.
    pub fn new(node: NodeId) -> Self {
        Self::with_retention(node, DEFAULT_RETENTION)
    }

    /// An empty store that keeps at most `retention` finished, delivered tasks.
    pub fn with_retention(node: NodeId, retention: usize) -> Self {
        MemoryStore {
            shared: Arc::new(Shared {
                tables: Mutex::new(Tables::default()),
                cancelled: Notify::new(),
                retention,
                teams: Mutex::default(),
            }),
            node,
            instance: current_instance(),
        }
    }

    /// A handle on the same memory for another node (as two nodes share one database).
    pub fn on_node(&self, node: NodeId) -> Self {
        MemoryStore {
            shared: self.shared.clone(),
            node,
            instance: self.instance.clone(),
        }
    }

    /// How many task records it holds.
    pub fn len(&self) -> usize {
        self.lock().tasks.len()
    }

    /// True when it holds no task record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        match self.shared.tables.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The ids of `node`'s active tasks with a cancel request, sorted.
    fn cancelled_of(&self, node: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .lock()
            .cancels
            .get(node)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        ids.sort();
        ids
    }

    /// The task if it is terminal; `NotFound` if it does not exist.
    fn terminal(&self, id: &str) -> StoreResult<Option<TaskRecord>> {
        match self.lock().tasks.get(id) {
            Some(r) if r.status.is_terminal() => Ok(Some(r.clone())),
            Some(_) => Ok(None),
            None => Err(StoreError::NotFound(id.to_string())),
        }
    }

    /// Apply a transition under the state rules; the record as it stands after it when
    /// `keep`.
    fn apply(&self, id: &str, t: Transition, keep: bool) -> StoreResult<Option<TaskRecord>> {
        let mut g = self.lock();
        let r = g.get_mut(id)?;
        if let Some(epoch) = t.epoch
            && epoch != r.owner_epoch
            && !r.status.is_terminal()
        {
            return Err(StoreError::Fenced {
                id: id.to_string(),
                epoch,
                current: r.owner_epoch,
            });
        }
        if !r.status.can_become(t.to, r.cancel_requested) {
            return Err(StoreError::Refused {
                id: id.to_string(),
                from: r.status,
                to: t.to,
                cancel_requested: r.cancel_requested,
            });
        }
        r.status = t.to;
        r.updated_at = now();
        if t.result.is_some() {
            r.result = t.result;
        }
        if t.error.is_some() {
            r.error = t.error;
        }
        if t.end_state.is_some() {
            r.end_state = t.end_state;
        }
        if let Some(u) = t.usage {
            r.usage = u;
        }
        if t.turns.is_some() {
            r.turns = t.turns;
        }
        r.delivered |= t.deliver;
        let kept = keep.then(|| r.clone());
        if t.to.is_terminal() {
            let owner = r.owner_node.clone();
            g.ended(id, &owner);
            g.forget_beyond(self.shared.retention);
        }
        Ok(kept)
    }

    /// Run a one-record update: `f` returns whether it changed the record.
    fn update(&self, id: &str, f: impl FnOnce(&mut TaskRecord) -> bool) -> StoreResult<bool> {
        let mut g = self.lock();
        let changed = f(g.get_mut(id)?);
        Ok(changed)
    }
}

#[async_trait::async_trait]
impl TaskStore for MemoryStore {
    fn node_id(&self) -> &NodeId {
        &self.node
    }

    fn teams(&self) -> Option<&dyn crate::team::TeamStore> {
        Some(self)
    }

    async fn create(&self, t: &NewTask) -> StoreResult<TaskRecord> {
        let rec = t
            .clone()
            .into_record(self.node.as_str(), &self.instance, now());
        let mut g = self.lock();
        if g.tasks.contains_key(&rec.id) {
            return Err(StoreError::DuplicateTask(rec.id));
        }
        let seq = g.next_seq;
        g.next_seq += 1;
        g.order.insert(seq, rec.id.clone());
        g.seq_of.insert(rec.id.clone(), seq);
        g.by_session
            .entry(rec.parent_session_id.clone())
            .or_default()
            .insert(seq, rec.id.clone());
        g.active.insert(rec.id.clone());
        g.tasks.insert(rec.id.clone(), rec.clone());
        Ok(rec)
    }

    async fn get(&self, id: &str) -> StoreResult<Option<TaskRecord>> {
        Ok(self.lock().tasks.get(id).cloned())
    }

    async fn list(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskRecord>> {
        let g = self.lock();
        let ids: Box<dyn Iterator<Item = &String>> = match &filter.session {
            Some(s) => Box::new(g.session_ids(s)),
            None => Box::new(g.order.values()),
        };
        let matching = ids
            .filter_map(|id| g.tasks.get(id))
            .filter(|r| filter.status.is_none_or(|s| r.status == s))
            .filter(|r| {
                filter
                    .parent_agent
                    .as_ref()
                    .is_none_or(|a| r.parent_agent_id.as_ref() == Some(a))
            })
            .filter(|r| {
                filter
                    .served_task
                    .as_ref()
                    .is_none_or(|t| r.served.as_ref().is_some_and(|s| &s.task_id == t))
            })
            .filter(|r| {
                filter.caller_id.as_ref().is_none_or(|c| {
                    r.served
                        .as_ref()
                        .is_some_and(|s| s.caller_id.as_ref() == Some(c))
                })
            })
            .cloned()
            .collect();
        let mut out = sorted(matching);
        filter.sort_turns(&mut out);
        if filter.newest_first {
            out.reverse();
        }
        if let Some(limit) = filter.limit {
            out.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        Ok(out)
    }

    async fn list_by_session(&self, session: &str) -> StoreResult<Vec<TaskRecord>> {
        let g = self.lock();
        Ok(sorted(
            g.session_ids(session)
                .filter_map(|id| g.tasks.get(id))
                .cloned()
                .collect(),
        ))
    }

    async fn background_summary(
        &self,
        session: &str,
        open_limit: usize,
    ) -> StoreResult<BackgroundSummary> {
        let g = self.lock();
        let mut summary = BackgroundSummary::default();
        let mut open = Vec::new();
        for r in g.session_ids(session).filter_map(|id| g.tasks.get(id)) {
            if !r.background {
                continue;
            }
            if r.status.is_terminal() {
                summary.finished_total += 1;
                if !r.delivered {
                    summary.undelivered += 1;
                }
            } else {
                summary.open_total += 1;
                open.push(r);
            }
        }
        open.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        summary.open = open.into_iter().take(open_limit).cloned().collect();
        Ok(summary)
    }

    async fn transition(&self, id: &str, t: Transition) -> StoreResult<()> {
        self.apply(id, t, false).map(|_| ())
    }

    async fn transition_returning(
        &self,
        id: &str,
        t: Transition,
    ) -> StoreResult<Option<TaskRecord>> {
        self.apply(id, t, true)
    }

    async fn request_cancel(&self, id: &str) -> StoreResult<TaskStatus> {
        let mut g = self.lock();
        let r = g.get_mut(id)?;
        let status = r.status;
        if status.is_terminal() {
            return Ok(status);
        }
        r.cancel_requested = true;
        r.updated_at = now();
        let owner = r.owner_node.clone();
        g.cancels.entry(owner).or_default().insert(id.to_string());
        drop(g);
        self.shared.cancelled.notify_waiters();
        Ok(status)
    }

    async fn set_end_state(&self, id: &str, end_state: &str) -> StoreResult<bool> {
        self.update(id, |r| {
            let unset = r.end_state.is_none();
            if unset {
                r.end_state = Some(end_state.to_string());
            }
            unset
        })
    }

    async fn set_remote_task_id(&self, id: &str, remote_task_id: &str) -> StoreResult<bool> {
        self.update(id, |r| {
            let unset = r.remote_task_id.is_none();
            if unset {
                r.remote_task_id = Some(remote_task_id.to_string());
            }
            unset
        })
    }

    async fn set_served(&self, id: &str, served: &ServedTurn) -> StoreResult<bool> {
        let now = now();
        self.update(id, |r| {
            r.served = Some(served.clone());
            r.updated_at = now;
            true
        })
    }

    async fn set_question(&self, id: &str, question: Option<&str>) -> StoreResult<bool> {
        let now = now();
        self.update(id, |r| {
            let write = match question {
                Some(_) => !r.status.is_terminal(),
                None => r.question.is_some(),
            };
            if write {
                r.question = question.map(str::to_string);
                r.answer = None;
                r.updated_at = now;
            }
            write
        })
    }

    async fn answer_question(&self, id: &str, question: &str, answer: &str) -> StoreResult<bool> {
        let now = now();
        self.update(id, |r| {
            let open = !r.status.is_terminal()
                && r.question.as_deref() == Some(question)
                && r.answer.is_none();
            if open {
                r.answer = Some(answer.to_string());
                r.updated_at = now;
            }
            open
        })
    }

    async fn promote(&self, id: &str) -> StoreResult<bool> {
        self.update(id, |r| {
            let foreground = !r.background;
            if foreground {
                r.background = true;
                r.delivered = false;
            }
            foreground
        })
    }

    async fn mark_delivered(&self, id: &str) -> StoreResult<bool> {
        let mut g = self.lock();
        let r = g.get_mut(id)?;
        let changed = !r.delivered;
        r.delivered = true;
        if changed {
            g.queue_if_done(id);
            g.forget_beyond(self.shared.retention);
        }
        Ok(changed)
    }

    async fn mark_delivered_many(&self, ids: &[String]) -> StoreResult<u64> {
        let mut g = self.lock();
        let mut n = 0;
        for id in ids {
            if let Some(r) = g.tasks.get_mut(id)
                && !r.delivered
            {
                r.delivered = true;
                n += 1;
                g.queue_if_done(id);
            }
        }
        g.forget_beyond(self.shared.retention);
        Ok(n)
    }

    async fn take_finished_task(&self, id: &str, session: &str) -> StoreResult<Option<TaskRecord>> {
        let mut g = self.lock();
        let Some(r) = g.tasks.get_mut(id).filter(|r| r.takeable_by(session)) else {
            return Ok(None);
        };
        r.delivered = true;
        let taken = r.clone();
        g.queue_if_done(id);
        g.forget_beyond(self.shared.retention);
        Ok(Some(taken))
    }

    async fn undelivered_finished(&self, session: &str) -> StoreResult<Vec<TaskRecord>> {
        let g = self.lock();
        let out = g
            .session_ids(session)
            .filter_map(|id| g.tasks.get(id))
            .filter(|r| r.background && !r.delivered && r.status.is_terminal())
            .cloned()
            .collect();
        Ok(sorted(out))
    }

    async fn heartbeat(&self, node: &NodeId, ids: &[String]) -> StoreResult<u64> {
        let mut g = self.lock();
        let now = now();
        let mut n = 0;
        for id in ids {
            if let Some(r) = g.tasks.get_mut(id)
                && r.owner_node == node.as_str()
                && !r.status.is_terminal()
            {
                r.heartbeat_at = Some(now);
                n += 1;
            }
        }
        Ok(n)
    }

    async fn heartbeat_owned(&self) -> StoreResult<u64> {
        let mut g = self.lock();
        let now = now();
        let active: Vec<String> = g.active.iter().cloned().collect();
        let mut n = 0;
        for id in active {
            if let Some(r) = g.tasks.get_mut(&id)
                && r.owner_node == self.node.as_str()
                && r.owner_instance.as_deref() == Some(self.instance.as_str())
            {
                r.heartbeat_at = Some(now);
                n += 1;
            }
        }
        Ok(n)
    }

    async fn renew_owned(&self, id: &str, epoch: u64) -> StoreResult<bool> {
        let mut g = self.lock();
        let Some(r) = g.tasks.get_mut(id) else {
            return Ok(false);
        };
        if r.owner_epoch != epoch || r.status.is_terminal() {
            return Ok(false);
        }
        r.heartbeat_at = Some(now());
        Ok(true)
    }

    async fn sweep(&self, orphan_timeout: Duration) -> StoreResult<Vec<String>> {
        let cutoff =
            now().saturating_sub(u64::try_from(orphan_timeout.as_millis()).unwrap_or(u64::MAX));
        let mut g = self.lock();
        let mut silent: Vec<(String, u64)> = g
            .active
            .iter()
            .filter_map(|id| g.tasks.get(id))
            .filter(|r| r.transport.is_local() && r.on_orphan == OrphanPolicy::Fail)
            .map(|r| (r.id.clone(), r.heartbeat_at.unwrap_or(r.created_at)))
            .filter(|(_, seen)| *seen < cutoff)
            .collect();
        silent.sort();
        let mut swept = Vec::with_capacity(silent.len());
        for (id, seen) in silent {
            let msg = executor_lost_message(seen);
            tracing::warn!(task = %id, "{msg}");
            g.fail(&id, &msg);
            swept.push(id);
        }
        g.forget_beyond(self.shared.retention);
        Ok(swept)
    }

    async fn recover_node(&self, node: &NodeId) -> StoreResult<Vec<String>> {
        let msg = executor_died_message(node);
        let mut g = self.lock();
        let mut left: Vec<String> = g
            .active
            .iter()
            .filter_map(|id| g.tasks.get(id))
            .filter(|r| {
                r.owner_node == node.as_str()
                    && r.transport.is_local()
                    && r.on_orphan == OrphanPolicy::Fail
            })
            // A sibling process of the same node that is still running keeps its tasks.
            .filter(|r| {
                !r.owner_instance
                    .as_deref()
                    .is_some_and(|i| i != self.instance && instance_alive(i))
            })
            .map(|r| r.id.clone())
            .collect();
        left.sort();
        for id in &left {
            g.fail(id, &msg);
        }
        g.forget_beyond(self.shared.retention);
        Ok(left)
    }

    async fn resumable_orphans(&self, orphan_timeout: Duration) -> StoreResult<Vec<TaskRecord>> {
        let cutoff = cutoff(orphan_timeout);
        let g = self.lock();
        let orphans = g
            .active
            .iter()
            .filter_map(|id| g.tasks.get(id))
            .filter(|r| is_resumable_orphan(r, cutoff))
            .cloned()
            .collect();
        Ok(sorted(orphans))
    }

    async fn adopt(
        &self,
        id: &str,
        seen_epoch: u64,
        orphan_timeout: Duration,
    ) -> StoreResult<Option<TaskRecord>> {
        let cutoff = cutoff(orphan_timeout);
        let mut g = self.lock();
        let Some(r) = g.tasks.get_mut(id) else {
            return Ok(None);
        };
        if r.owner_epoch != seen_epoch || !is_resumable_orphan(r, cutoff) {
            return Ok(None);
        }
        let now = now();
        let lost = r.only_owner();
        let old_owner = std::mem::replace(&mut r.owner_node, self.node.as_str().to_string());
        r.owner_instance = Some(self.instance.clone());
        r.owner_epoch += 1;
        r.resumes += 1;
        r.heartbeat_at = Some(now);
        r.updated_at = now;
        let adopted = r.clone();
        let history = g.owners.entry(id.to_string()).or_default();
        if history.is_empty() {
            history.push(lost);
        }
        history.push(TaskOwner {
            since: now,
            ..adopted.only_owner()
        });
        // A cancel requested of the old owner is now the new owner's to act on.
        if let Some(set) = g.cancels.get_mut(&old_owner)
            && set.remove(id)
        {
            g.cancels
                .entry(self.node.as_str().to_string())
                .or_default()
                .insert(id.to_string());
        }
        Ok(Some(adopted))
    }

    async fn release_owned(&self) -> StoreResult<Vec<String>> {
        let mut g = self.lock();
        let active: Vec<String> = g.active.iter().cloned().collect();
        let mut released = Vec::new();
        for id in active {
            if let Some(r) = g.tasks.get_mut(&id)
                && r.owner_node == self.node.as_str()
                && r.owner_instance.as_deref() == Some(self.instance.as_str())
                && !r.status.is_terminal()
                && r.transport.is_local()
                && r.on_orphan == OrphanPolicy::Resume
            {
                r.owner_epoch += 1;
                r.owner_instance = None;
                r.heartbeat_at = Some(0);
                r.updated_at = now();
                released.push(id);
            }
        }
        Ok(released)
    }

    async fn owners(&self, id: &str) -> StoreResult<Vec<TaskOwner>> {
        let g = self.lock();
        if let Some(h) = g.owners.get(id) {
            return Ok(h.clone());
        }
        Ok(g.tasks
            .get(id)
            .map(|r| vec![r.only_owner()])
            .unwrap_or_default())
    }

    async fn watch_cancellations(&self, node: &NodeId) -> StoreResult<CancelWatch> {
        let (tx, rx) = mpsc::channel(256);
        let me = self.clone();
        let node = node.to_string();
        let task = tokio::spawn(async move {
            let mut reported = HashSet::new();
            loop {
                // Register before looking, so no request slips between the look and the wait.
                let woken = me.shared.cancelled.notified();
                tokio::pin!(woken);
                woken.as_mut().enable();
                let ids = me.cancelled_of(&node);
                if !report_cancellations(&tx, &mut reported, ids, true).await {
                    return;
                }
                woken.await;
            }
        });
        Ok(CancelWatch::new(rx, task))
    }

    async fn wait_terminal(&self, id: &str, timeout: Duration) -> StoreResult<Option<TaskRecord>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notify = {
                let mut g = self.lock();
                match g.tasks.get(id) {
                    None => return Err(StoreError::NotFound(id.to_string())),
                    Some(r) if r.status.is_terminal() => return Ok(Some(r.clone())),
                    Some(_) => g.waiters.entry(id.to_string()).or_default().clone(),
                }
            };
            let woken = notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            // It may have ended between the look and the registration.
            if let Some(r) = self.terminal(id)? {
                return Ok(Some(r));
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return self.terminal(id);
            }
        }
    }

    async fn append_checkpoint(
        &self,
        id: &str,
        epoch: u64,
        generation: u64,
        start: u64,
        messages: &[Message],
        usage: Usage,
    ) -> StoreResult<()> {
        if messages.is_empty() {
            return Ok(());
        }
        let mut g = self.lock();
        let refused = || StoreError::CheckpointRefused {
            id: id.to_string(),
            generation,
            start,
        };
        let owned =
            g.active.contains(id) && g.tasks.get(id).is_some_and(|r| r.owner_epoch == epoch);
        if !owned {
            return Err(refused());
        }
        let cp = g.checkpoints.entry(id.to_string()).or_default();
        let stored = if cp.messages.is_empty() {
            None
        } else {
            Some(cp.generation)
        };
        let continues = match stored {
            None => start == 0,
            Some(gen_now) if gen_now == generation => cp.messages.len() as u64 == start,
            Some(gen_now) => gen_now < generation && start == 0,
        };
        if !continues {
            return Err(refused());
        }
        if cp.generation != generation {
            cp.messages.clear();
            cp.generation = generation;
        }
        cp.messages.extend_from_slice(messages);
        cp.usage = usage;
        Ok(())
    }

    async fn read_checkpoint(&self, id: &str) -> StoreResult<Option<Checkpoint>> {
        Ok(self
            .lock()
            .checkpoints
            .get(id)
            .filter(|c| !c.messages.is_empty())
            .cloned())
    }

    async fn insert_live_child(&self, child: &LiveChildEntry) -> StoreResult<()> {
        let mut g = self.lock();
        if g.live_keys.contains(&child.agent_key) {
            return Err(StoreError::DuplicateLiveChild(child.agent_key.clone()));
        }
        let list = g.live.entry(child.parent_session_id.clone()).or_default();
        if let Some(label) = &child.label
            && list.iter().any(|c| {
                c.label
                    .as_deref()
                    .is_some_and(|l| l.eq_ignore_ascii_case(label))
            })
        {
            return Err(StoreError::LabelInUse(label.clone()));
        }
        list.push(child.clone());
        list.sort_by(|a, b| (a.created_at, &a.agent_key).cmp(&(b.created_at, &b.agent_key)));
        g.live_keys.insert(child.agent_key.clone());
        Ok(())
    }

    async fn live_children(&self, session: &str) -> StoreResult<Vec<LiveChildEntry>> {
        Ok(self.lock().live.get(session).cloned().unwrap_or_default())
    }

    async fn find_live_by_key(
        &self,
        session: &str,
        agent_key: &str,
    ) -> StoreResult<Option<LiveChildEntry>> {
        Ok(self
            .lock()
            .live
            .get(session)
            .and_then(|l| l.iter().find(|c| c.agent_key == agent_key).cloned()))
    }

    async fn find_live_by_label(
        &self,
        session: &str,
        label: &str,
    ) -> StoreResult<Option<LiveChildEntry>> {
        Ok(self.lock().live.get(session).and_then(|l| {
            l.iter()
                .find(|c| {
                    c.label
                        .as_deref()
                        .is_some_and(|x| x.eq_ignore_ascii_case(label))
                })
                .cloned()
        }))
    }

    async fn remove_live_child(&self, session: &str, agent_key: &str) -> StoreResult<bool> {
        let mut g = self.lock();
        let Some(list) = g.live.get_mut(session) else {
            return Ok(false);
        };
        let before = list.len();
        list.retain(|c| c.agent_key != agent_key);
        let removed = list.len() < before;
        if list.is_empty() {
            g.live.remove(session);
        }
        if removed {
            g.live_keys.remove(agent_key);
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn finished_delivered_tasks_beyond_the_retention_are_forgotten() {
        let s = MemoryStore::with_retention(NodeId::new("n"), 3);
        let mut ids = Vec::new();
        for i in 0..6 {
            let mut t = NewTask::new("w", "s", &i.to_string());
            t.background = true;
            let id = s.create(&t).await.unwrap().id;
            s.transition(&id, Transition::completed("ok"))
                .await
                .unwrap();
            ids.push(id);
        }
        let running = s.create(&NewTask::new("w", "s", "r")).await.unwrap().id;
        assert_eq!(s.len(), 7, "undelivered results are kept");
        assert_eq!(s.undelivered_finished("s").await.unwrap().len(), 6);
        assert_eq!(s.len(), 7, "reading them forgets nothing");
        // Delivered in the order they were created: the oldest deliveries go first.
        assert_eq!(s.mark_delivered_many(&ids).await.unwrap(), 6);
        assert_eq!(s.len(), 4);
        assert!(s.get(&ids[0]).await.unwrap().is_none());
        assert!(s.get(&ids[5]).await.unwrap().is_some());
        assert!(
            s.get(&running).await.unwrap().is_some(),
            "active tasks stay"
        );
        assert_eq!(s.list_by_session("s").await.unwrap().len(), 4);
    }
}
