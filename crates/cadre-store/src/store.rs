//! The [`TaskStore`] trait and the cancellation watch it hands out.

use crate::error::StoreResult;
use crate::model::TaskOwner;
use crate::model::{
    BackgroundSummary, Checkpoint, LiveChildEntry, NewTask, ServedTurn, TaskFilter, TaskRecord,
    Transition,
};
use crate::node::NodeId;
use cadre_types::{Message, TaskStatus, Usage};
use std::collections::HashSet;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Persistent task records and live children, shared by every `cadre` process (and, with
/// PostgreSQL, every node) that opens the same database.
///
/// Every state change is a single conditional `UPDATE` checked by rows affected; the store
/// never reads a record, changes it in memory and writes it back.
#[async_trait::async_trait]
pub trait TaskStore: Send + Sync {
    /// The node this handle creates tasks for.
    fn node_id(&self) -> &NodeId;

    /// One cheap round trip to the database (`SELECT 1`): `Ok` when the store answers now.
    /// Readiness probes ask it; by default a read of a task that does not exist.
    async fn ping(&self) -> StoreResult<()> {
        self.get("").await.map(|_| ())
    }

    /// The teams of this store (their members, messages and boards), when it keeps them.
    fn teams(&self) -> Option<&dyn crate::team::TeamStore> {
        None
    }

    /// Insert a `pending` (or `running`) task owned by this node (headers redacted on the
    /// way in). Borrowed: a caller that tries again keeps its one copy.
    async fn create(&self, task: &NewTask) -> StoreResult<TaskRecord>;

    /// One task.
    async fn get(&self, id: &str) -> StoreResult<Option<TaskRecord>>;

    /// Tasks matching `filter`, oldest first.
    async fn list(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskRecord>>;

    /// All tasks of a parent session, oldest first.
    async fn list_by_session(&self, session: &str) -> StoreResult<Vec<TaskRecord>>;

    /// The background tasks of a session for its status summary: the newest `open_limit`
    /// open ones, newest first, with the open, finished and undelivered totals.
    async fn background_summary(
        &self,
        session: &str,
        open_limit: usize,
    ) -> StoreResult<BackgroundSummary> {
        let mut summary = BackgroundSummary::default();
        for r in self.list_by_session(session).await?.into_iter().rev() {
            if !r.background {
                continue;
            }
            if r.status.is_terminal() {
                summary.finished_total += 1;
                summary.undelivered += usize::from(!r.delivered);
            } else {
                summary.open_total += 1;
                if summary.open.len() < open_limit {
                    summary.open.push(r);
                }
            }
        }
        Ok(summary)
    }

    /// Apply a transition under the state rules; `Refused` (nothing written) or `NotFound`
    /// otherwise. Bumps `updated_at`.
    async fn transition(&self, id: &str, t: Transition) -> StoreResult<()>;

    /// [`transition`](Self::transition), and the task as stored just after it when the
    /// store has it at hand from the write (`None` when it has not: the caller reads it if
    /// it needs it). What a waiter for a task's end is handed, instead of reading the task
    /// back at once.
    async fn transition_returning(
        &self,
        id: &str,
        t: Transition,
    ) -> StoreResult<Option<TaskRecord>> {
        self.transition(id, t).await.map(|()| None)
    }

    /// Set the cancel flag if the task is not terminal; returns the status at that moment.
    /// With PostgreSQL this also notifies the owner (`cadre_task_cancel`).
    async fn request_cancel(&self, id: &str) -> StoreResult<TaskStatus>;

    /// Record how the run ended, if no end state is stored yet. True when written.
    async fn set_end_state(&self, id: &str, end_state: &str) -> StoreResult<bool>;

    /// Record the task id a remote transport gave. True when written.
    async fn set_remote_task_id(&self, id: &str, remote_task_id: &str) -> StoreResult<bool>;

    /// Record what `cadre serve` knows of a task it serves (the served task it is a turn of,
    /// the caller's ids), replacing what was recorded. Bumps `updated_at`. True when written.
    async fn set_served(&self, id: &str, served: &ServedTurn) -> StoreResult<bool>;

    /// Store the question a task's agent waits on its caller for (`Some`, JSON; only while
    /// the task is pending or running), or clear it (`None`); either drops a stored answer.
    /// Bumps `updated_at`. True when written.
    async fn set_question(&self, id: &str, question: Option<&str>) -> StoreResult<bool>;

    /// Store an answer to the task's open question, for its owner to take: only while
    /// `question` is still the stored question, unanswered, and the task pending or running
    /// (compare and set). Bumps `updated_at`. True when written.
    async fn answer_question(&self, id: &str, question: &str, answer: &str) -> StoreResult<bool>;

    /// Make a foreground task a background one (its completion will be delivered).
    /// True when it changed.
    async fn promote(&self, id: &str) -> StoreResult<bool>;

    /// Mark a task's completion delivered; true only for the call that did it.
    async fn mark_delivered(&self, id: &str) -> StoreResult<bool>;

    /// Mark many completions delivered at once (a delivery batch); returns how many this
    /// call marked. Unknown ids are skipped.
    async fn mark_delivered_many(&self, ids: &[String]) -> StoreResult<u64> {
        let mut n = 0;
        for id in ids {
            match self.mark_delivered(id).await {
                Ok(true) => n += 1,
                Ok(false) | Err(crate::StoreError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// Finished background tasks of a session whose results were not delivered yet, oldest
    /// first. Read only: the parent marks them delivered ([`mark_delivered_many`]) once its
    /// session has recorded them, so a process lost in between hands them out again and the
    /// session (what the model was told) decides whether they were seen.
    ///
    /// [`mark_delivered_many`]: Self::mark_delivered_many
    async fn undelivered_finished(&self, session: &str) -> StoreResult<Vec<TaskRecord>>;

    /// One task of `session` that has ended and whose result was not delivered yet, marked
    /// delivered and returned as stored: what a caller asking for that one result
    /// (`task_output`) needs. A store may do it in one write, without a read first (SQLite
    /// does); by default it is a read and a delivery only one caller makes. `None` when the
    /// task is not the session's, has not ended, was delivered already or is unknown.
    async fn take_finished_task(&self, id: &str, session: &str) -> StoreResult<Option<TaskRecord>> {
        take_by_reading(self, id, session).await
    }

    /// A task of `session` that has ended, marked delivered (whether or not it was before)
    /// and returned as stored: what a caller shown its result whenever it asks
    /// (`task_output`) needs, in one write where the store can (SQLite), instead of a read
    /// and a delivery. `None` when the task has not ended, is another session's or is
    /// unknown.
    async fn deliver_finished(&self, id: &str, session: &str) -> StoreResult<Option<TaskRecord>> {
        deliver_by_reading(self, id, session).await
    }

    /// Beat the given non-terminal tasks owned by `node` (one statement per 500 ids).
    /// Returns how many were beaten.
    async fn heartbeat(&self, node: &NodeId, ids: &[String]) -> StoreResult<u64>;

    /// Beat every non-terminal task this process created under this handle's node.
    async fn heartbeat_owned(&self) -> StoreResult<u64>;

    /// Beat task `id` only if it is still active and owned at `epoch`: the cheap proof a
    /// running child asks for that no other node has adopted its task. True when it was
    /// beaten (nobody can adopt it for the orphan timeout from now); false when it ended or
    /// another node adopted it (its epoch moved on). By default a read then a beat, which a
    /// store overrides with one conditional write.
    async fn renew_owned(&self, id: &str, epoch: u64) -> StoreResult<bool> {
        let Some(r) = self.get(id).await? else {
            return Ok(false);
        };
        if r.owner_epoch != epoch || r.status.is_terminal() {
            return Ok(false);
        }
        let node = NodeId::new(r.owner_node.as_str());
        Ok(self.heartbeat(&node, &[id.to_string()]).await? == 1)
    }

    /// Fail local pending/running tasks whose last heartbeat (or creation, if never beaten)
    /// is older than `orphan_timeout`, with `executor lost: no heartbeat since <time>`.
    /// Remote-transport tasks are never swept, nor tasks whose orphan policy is `resume`
    /// (they are left for [`adopt`](Self::adopt)). Also deletes what is left of ended tasks'
    /// checkpoints (never read once a task ends). Returns the failed ids.
    async fn sweep(&self, orphan_timeout: Duration) -> StoreResult<Vec<String>>;

    /// Orphans left for adoption: local pending/running tasks whose policy is `resume` and
    /// whose last heartbeat (or creation) is older than `orphan_timeout`, oldest first.
    async fn resumable_orphans(&self, orphan_timeout: Duration) -> StoreResult<Vec<TaskRecord>>;

    /// Adopt an orphan for this handle's node and process: a compare-and-swap on the owner
    /// and the fencing epoch. It succeeds only while the task is still the orphan that was
    /// seen (`resume` policy, pending or running, heartbeat older than `orphan_timeout`, at
    /// owner epoch `seen_epoch`); the task is then owned here at `seen_epoch + 1`, beaten
    /// now, with one more resume. Of nodes racing for one orphan exactly one gets the
    /// record; the others get `None`, and writes fenced at an older epoch are refused from
    /// then on.
    async fn adopt(
        &self,
        id: &str,
        seen_epoch: u64,
        orphan_timeout: Duration,
    ) -> StoreResult<Option<TaskRecord>>;

    /// Hand this process's running durable tasks (local, policy `resume`) to the other
    /// nodes, for a draining node: each becomes an orphan at once, at the next owner epoch
    /// (so this process's later writes to it, its end included, are refused), owned by no
    /// process (so no heartbeat of this one renews it) and never beaten (so the first node
    /// that looks adopts it, without waiting for the orphan timeout). Checkpoints stay.
    /// Returns the released ids. By default none: such a store's tasks are adopted after
    /// the orphan timeout.
    async fn release_owned(&self) -> StoreResult<Vec<String>> {
        Ok(Vec::new())
    }

    /// The task's owners over time, by epoch: each node and process that ran it, and since
    /// when. A task never adopted has one, the owner its record names; an unknown task none.
    async fn owners(&self, id: &str) -> StoreResult<Vec<TaskOwner>>;

    /// Fail the local pending/running tasks of `node` whose process is gone, with
    /// `executor died: cadre restarted on <node>`; call on start. Tasks of a sibling process
    /// that is still alive on this machine are left alone, and so are tasks whose orphan
    /// policy is `resume` (adopted once their heartbeat is old). Like
    /// [`sweep`](Self::sweep), deletes ended tasks' checkpoints. Returns the failed ids.
    async fn recover_node(&self, node: &NodeId) -> StoreResult<Vec<String>>;

    /// Ids of `node`'s non-terminal tasks whose cancellation is requested, as they appear
    /// (each at most once per watch). Requests made before the call are reported first.
    async fn watch_cancellations(&self, node: &NodeId) -> StoreResult<CancelWatch>;

    /// Wait until the task is terminal and return it; `None` when `timeout` passes first.
    async fn wait_terminal(&self, id: &str, timeout: Duration) -> StoreResult<Option<TaskRecord>>;

    /// Append `messages` to the checkpoint of an active (pending or running) task, at
    /// position `start` of `generation`, with the run's usage totals so far: one statement,
    /// all or nothing. The writer must hold the task's owner `epoch`, and `start` must be
    /// where the stored generation ends (0 begins a generation; a new generation, after a
    /// compaction, replaces the older ones once its first messages are stored). Anything
    /// else, or a task that ended, is `CheckpointRefused`. A task's checkpoint is deleted
    /// when the task ends. An empty append writes nothing.
    async fn append_checkpoint(
        &self,
        id: &str,
        epoch: u64,
        generation: u64,
        start: u64,
        messages: &[Message],
        usage: Usage,
    ) -> StoreResult<()>;

    /// The newest generation of a task's checkpoint; `None` when nothing is stored or the
    /// task has ended.
    async fn read_checkpoint(&self, id: &str) -> StoreResult<Option<Checkpoint>>;

    /// Add a live child; `LabelInUse` when its label is taken in the parent session
    /// (case-insensitively).
    async fn insert_live_child(&self, child: &LiveChildEntry) -> StoreResult<()>;

    /// Add a live child and create its first task: both or neither. One write where the
    /// store can (SQLite), instead of two in a row. Errors as of the two.
    async fn create_live(&self, child: &LiveChildEntry, task: &NewTask) -> StoreResult<TaskRecord> {
        create_live_by_steps(self, child, task).await
    }

    /// The live children of a session, oldest first.
    async fn live_children(&self, session: &str) -> StoreResult<Vec<LiveChildEntry>>;

    /// A live child by agent key.
    async fn find_live_by_key(
        &self,
        session: &str,
        agent_key: &str,
    ) -> StoreResult<Option<LiveChildEntry>>;

    /// A live child by label (case-insensitive).
    async fn find_live_by_label(
        &self,
        session: &str,
        label: &str,
    ) -> StoreResult<Option<LiveChildEntry>>;

    /// Forget a live child; true when it existed.
    async fn remove_live_child(&self, session: &str, agent_key: &str) -> StoreResult<bool>;
}

/// Aborts a background task when dropped.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(pub(crate) JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// [`TaskStore::take_finished_task`] as a read, then a delivery that only one caller makes.
pub(crate) async fn take_by_reading<S: TaskStore + ?Sized>(
    store: &S,
    id: &str,
    session: &str,
) -> StoreResult<Option<TaskRecord>> {
    let Some(mut r) = store.get(id).await? else {
        return Ok(None);
    };
    if !r.takeable_by(session) || !store.mark_delivered(id).await? {
        return Ok(None);
    }
    r.delivered = true;
    Ok(Some(r))
}

/// [`TaskStore::deliver_finished`] as a read, then a delivery when it was not delivered.
pub(crate) async fn deliver_by_reading<S: TaskStore + ?Sized>(
    store: &S,
    id: &str,
    session: &str,
) -> StoreResult<Option<TaskRecord>> {
    let Some(mut r) = store.get(id).await? else {
        return Ok(None);
    };
    if r.parent_session_id != session || !r.status.is_terminal() {
        return Ok(None);
    }
    if !r.delivered {
        store.mark_delivered(id).await?;
        r.delivered = true;
    }
    Ok(Some(r))
}

/// [`TaskStore::create_live`] as two writes: the child, then its task (the child taken
/// back when its task cannot be created).
pub(crate) async fn create_live_by_steps<S: TaskStore + ?Sized>(
    store: &S,
    child: &LiveChildEntry,
    task: &NewTask,
) -> StoreResult<TaskRecord> {
    store.insert_live_child(child).await?;
    match store.create(task).await {
        Ok(r) => Ok(r),
        Err(e) => {
            let (session, key) = (&child.parent_session_id, &child.agent_key);
            if let Err(undo) = store.remove_live_child(session, key).await {
                tracing::warn!(child = %key, error = %undo, "store: a live child whose task could not be created stays recorded");
            }
            Err(e)
        }
    }
}

/// Send the cancelled ids not reported yet on a watch's channel; on a full look (`full`),
/// forget reported ids that are no longer pending. False when the receiver is gone.
pub(crate) async fn report_cancellations(
    tx: &mpsc::Sender<String>,
    reported: &mut HashSet<String>,
    ids: Vec<String>,
    full: bool,
) -> bool {
    if full {
        reported.retain(|r| ids.contains(r));
    }
    for id in ids {
        if reported.insert(id.clone()) && tx.send(id).await.is_err() {
            return false;
        }
    }
    !tx.is_closed()
}

/// Task ids whose cancellation was requested, from [`TaskStore::watch_cancellations`].
/// Dropping it stops the watch. Also a `futures::Stream` of ids.
#[derive(Debug)]
pub struct CancelWatch {
    rx: mpsc::Receiver<String>,
    _task: AbortOnDrop,
}

impl CancelWatch {
    pub(crate) fn new(rx: mpsc::Receiver<String>, task: JoinHandle<()>) -> Self {
        CancelWatch {
            rx,
            _task: AbortOnDrop(task),
        }
    }

    /// The next id; `None` when the watch ended.
    pub async fn recv(&mut self) -> Option<String> {
        self.rx.recv().await
    }
}

impl futures::Stream for CancelWatch {
    type Item = String;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<String>> {
        self.rx.poll_recv(cx)
    }
}
