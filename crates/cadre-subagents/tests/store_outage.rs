//! A task store that fails for a while (the database restarting) is waited out: a task
//! whose `running` or end could not be written at first still ends as its child ended,
//! never `cancelled`. Only a cancel request makes a task cancelled.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_store::{
    BackgroundSummary, CancelWatch, LiveChildEntry, MemoryStore, NewTask, NodeId, StoreError,
    StoreResult, TaskFilter, TaskRecord, TaskStatus, TaskStore, Transition,
};
use cadre_tools::ToolOutput;
use common::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A [`MemoryStore`] whose next `failures` transitions to a status `failing` picks fail
/// as a lost connection would, then work again. It records the status each task was
/// created with and each transition asked for.
struct Flaky {
    inner: MemoryStore,
    created: std::sync::Mutex<Vec<TaskStatus>>,
    asked: std::sync::Mutex<Vec<TaskStatus>>,
    /// Deliveries written.
    marked: AtomicUsize,
    /// Tasks read by id.
    reads: AtomicUsize,
    /// One-task deliveries tried (`take_finished_task`, `deliver_finished`), made or not.
    takes: AtomicUsize,
    /// Creates still to hold at the gate (each until `release` gives a permit; `gated` is
    /// told when one waits there).
    held_creates: AtomicUsize,
    release: tokio::sync::Semaphore,
    gated: tokio::sync::Notify,
    /// Refuse every create, as a broken database would.
    broken_creates: std::sync::atomic::AtomicBool,
    failing: fn(TaskStatus) -> bool,
    failures: AtomicUsize,
    /// How many transitions were failed.
    failed: AtomicUsize,
    /// How many reads of open tasks for a parent waiting on other nodes are still to fail.
    summary_failures: AtomicUsize,
    /// How many reads of open tasks for a parent waiting on other nodes were asked.
    summary_reads: AtomicUsize,
}

impl Flaky {
    fn new(failing: fn(TaskStatus) -> bool, failures: usize) -> Arc<Self> {
        Arc::new(Flaky {
            inner: MemoryStore::new(NodeId::new("test")),
            created: Default::default(),
            asked: Default::default(),
            broken_creates: Default::default(),
            marked: AtomicUsize::new(0),
            reads: AtomicUsize::new(0),
            takes: AtomicUsize::new(0),
            held_creates: AtomicUsize::new(0),
            release: tokio::sync::Semaphore::new(0),
            gated: tokio::sync::Notify::new(),
            failing,
            failures: AtomicUsize::new(failures),
            failed: AtomicUsize::new(0),
            summary_failures: AtomicUsize::new(0),
            summary_reads: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl TaskStore for Flaky {
    fn node_id(&self) -> &NodeId {
        self.inner.node_id()
    }
    async fn create(&self, task: &NewTask) -> StoreResult<TaskRecord> {
        if self.broken_creates.load(Ordering::SeqCst) {
            return Err(StoreError::Corrupt {
                id: task.id.clone(),
                reason: "disk image is malformed".into(),
            });
        }
        let held = self
            .held_creates
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if held {
            self.gated.notify_one();
            self.release.acquire().await.unwrap().forget();
        }
        let r = self.inner.create(task).await?;
        self.created.lock().unwrap().push(r.status);
        Ok(r)
    }
    async fn get(&self, id: &str) -> StoreResult<Option<TaskRecord>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.get(id).await
    }
    async fn list(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskRecord>> {
        self.inner.list(filter).await
    }
    async fn list_by_session(&self, session: &str) -> StoreResult<Vec<TaskRecord>> {
        self.inner.list_by_session(session).await
    }
    async fn background_summary(
        &self,
        session: &str,
        open_limit: usize,
    ) -> StoreResult<BackgroundSummary> {
        let elsewhere = open_limit == cadre_subagents::ELSEWHERE_LIMIT;
        if elsewhere {
            self.summary_reads.fetch_add(1, Ordering::SeqCst);
        }
        let fail = elsewhere
            && self
                .summary_failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if fail {
            return Err(refused());
        }
        self.inner.background_summary(session, open_limit).await
    }
    async fn transition(&self, id: &str, t: Transition) -> StoreResult<()> {
        self.transition_returning(id, t).await.map(|_| ())
    }
    async fn transition_returning(
        &self,
        id: &str,
        t: Transition,
    ) -> StoreResult<Option<TaskRecord>> {
        self.asked.lock().unwrap().push(t.to);
        let fail = (self.failing)(t.to)
            && self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if fail {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return Err(refused());
        }
        let deliver = t.deliver;
        let written = self.inner.transition_returning(id, t).await?;
        if deliver {
            // A delivery written with the end.
            self.marked.fetch_add(1, Ordering::SeqCst);
        }
        Ok(written)
    }
    async fn request_cancel(&self, id: &str) -> StoreResult<TaskStatus> {
        self.inner.request_cancel(id).await
    }
    async fn set_end_state(&self, id: &str, end_state: &str) -> StoreResult<bool> {
        self.inner.set_end_state(id, end_state).await
    }
    async fn set_remote_task_id(&self, id: &str, remote_task_id: &str) -> StoreResult<bool> {
        self.inner.set_remote_task_id(id, remote_task_id).await
    }
    async fn set_served(&self, id: &str, served: &cadre_store::ServedTurn) -> StoreResult<bool> {
        self.inner.set_served(id, served).await
    }
    async fn set_question(&self, id: &str, question: Option<&str>) -> StoreResult<bool> {
        self.inner.set_question(id, question).await
    }
    async fn answer_question(&self, id: &str, question: &str, answer: &str) -> StoreResult<bool> {
        self.inner.answer_question(id, question, answer).await
    }
    async fn promote(&self, id: &str) -> StoreResult<bool> {
        self.inner.promote(id).await
    }
    async fn mark_delivered(&self, id: &str) -> StoreResult<bool> {
        self.marked.fetch_add(1, Ordering::SeqCst);
        self.inner.mark_delivered(id).await
    }
    async fn undelivered_finished(&self, session: &str) -> StoreResult<Vec<TaskRecord>> {
        self.inner.undelivered_finished(session).await
    }
    async fn deliver_finished(&self, id: &str, session: &str) -> StoreResult<Option<TaskRecord>> {
        self.takes.fetch_add(1, Ordering::SeqCst);
        let was = self.inner.get(id).await?.is_some_and(|r| r.delivered);
        let shown = self.inner.deliver_finished(id, session).await?;
        if shown.is_some() && !was {
            self.marked.fetch_add(1, Ordering::SeqCst);
        }
        Ok(shown)
    }
    async fn take_finished_task(&self, id: &str, session: &str) -> StoreResult<Option<TaskRecord>> {
        self.takes.fetch_add(1, Ordering::SeqCst);
        let taken = self.inner.take_finished_task(id, session).await?;
        if taken.is_some() {
            self.marked.fetch_add(1, Ordering::SeqCst);
        }
        Ok(taken)
    }
    async fn heartbeat(&self, node: &NodeId, ids: &[String]) -> StoreResult<u64> {
        self.inner.heartbeat(node, ids).await
    }
    async fn heartbeat_owned(&self) -> StoreResult<u64> {
        self.inner.heartbeat_owned().await
    }
    async fn sweep(&self, orphan_timeout: Duration) -> StoreResult<Vec<String>> {
        self.inner.sweep(orphan_timeout).await
    }
    async fn recover_node(&self, node: &NodeId) -> StoreResult<Vec<String>> {
        self.inner.recover_node(node).await
    }
    async fn watch_cancellations(&self, node: &NodeId) -> StoreResult<CancelWatch> {
        self.inner.watch_cancellations(node).await
    }
    async fn wait_terminal(&self, id: &str, timeout: Duration) -> StoreResult<Option<TaskRecord>> {
        self.inner.wait_terminal(id, timeout).await
    }
    async fn insert_live_child(&self, child: &LiveChildEntry) -> StoreResult<()> {
        self.inner.insert_live_child(child).await
    }
    async fn live_children(&self, session: &str) -> StoreResult<Vec<LiveChildEntry>> {
        self.inner.live_children(session).await
    }
    async fn find_live_by_key(
        &self,
        session: &str,
        agent_key: &str,
    ) -> StoreResult<Option<LiveChildEntry>> {
        self.inner.find_live_by_key(session, agent_key).await
    }
    async fn find_live_by_label(
        &self,
        session: &str,
        label: &str,
    ) -> StoreResult<Option<LiveChildEntry>> {
        self.inner.find_live_by_label(session, label).await
    }
    async fn remove_live_child(&self, session: &str, agent_key: &str) -> StoreResult<bool> {
        self.inner.remove_live_child(session, agent_key).await
    }
    async fn append_checkpoint(
        &self,
        id: &str,
        epoch: u64,
        generation: u64,
        start: u64,
        messages: &[cadre_types::Message],
        usage: cadre_types::Usage,
    ) -> StoreResult<()> {
        self.inner
            .append_checkpoint(id, epoch, generation, start, messages, usage)
            .await
    }
    async fn resumable_orphans(&self, orphan_timeout: Duration) -> StoreResult<Vec<TaskRecord>> {
        self.inner.resumable_orphans(orphan_timeout).await
    }
    async fn adopt(
        &self,
        id: &str,
        seen_epoch: u64,
        orphan_timeout: Duration,
    ) -> StoreResult<Option<TaskRecord>> {
        self.inner.adopt(id, seen_epoch, orphan_timeout).await
    }
    async fn owners(&self, id: &str) -> StoreResult<Vec<cadre_store::TaskOwner>> {
        self.inner.owners(id).await
    }
    async fn read_checkpoint(&self, id: &str) -> StoreResult<Option<cadre_store::Checkpoint>> {
        self.inner.read_checkpoint(id).await
    }
}

/// A fixture whose runtime stores its tasks in `flaky`, with `slots` at once if given.
fn over(flaky: &Arc<Flaky>, script: &str, slots: Option<usize>) -> Fixture {
    let store: Arc<dyn TaskStore> = flaky.clone();
    fixture(
        script,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(move |c| {
                c.store = store;
                if let Some(n) = slots {
                    c.max_concurrent = n;
                }
            }),
            ..Default::default()
        },
    )
}

/// What a store whose database is down answers.
fn refused() -> StoreError {
    StoreError::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "connection refused",
    ))
}

const ANSWER: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
text = "the answer"
"#;

/// A worker whose model call never ends by itself.
const STUCK: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
delay_ms = 60000
text = "never"
"#;

/// Run one foreground task on a store failing as `flaky` says; the stored record after.
async fn run_through(flaky: &Arc<Flaky>) -> (ToolOutput, TaskRecord) {
    let mut ran = run_many(flaky, 1, 1).await;
    ran.pop().unwrap()
}

/// Run `n` foreground tasks at once, `slots` of them at a time; their outputs, each with
/// its stored record.
async fn run_many(flaky: &Arc<Flaky>, n: usize, slots: usize) -> Vec<(ToolOutput, TaskRecord)> {
    let f = over(flaky, ANSWER, Some(slots));
    let session = f.session();
    let calls = (0..n).map(|i| {
        let args =
            json!({"subagent_type": "worker", "prompt": "go", "description": format!("t{i}")});
        call(&f, session.id(), "task", args)
    });
    let outs = futures::future::join_all(calls).await;
    let tasks = f.runtime.tasks_of(session.id()).await;
    assert_eq!(tasks.len(), n);
    outs.into_iter()
        .enumerate()
        .map(|(i, out)| {
            let rec = tasks
                .iter()
                .find(|t| t.description == format!("t{i}"))
                .unwrap();
            (out, rec.clone())
        })
        .collect()
}

#[tokio::test]
async fn a_task_with_a_free_slot_is_created_running_and_a_queued_one_pending() {
    let flaky = Flaky::new(|_| false, 0);
    for (out, rec) in run_many(&flaky, 3, 2).await {
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(rec.status, TaskStatus::Completed, "{rec:?}");
    }
    let mut created = flaky.created.lock().unwrap().clone();
    created.sort_by_key(|s| s.as_str());
    assert_eq!(
        created,
        [
            TaskStatus::Pending,
            TaskStatus::Running,
            TaskStatus::Running
        ]
    );
    // Only the queued task is written `running`; every task is written its end.
    let asked = flaky.asked.lock().unwrap().clone();
    let running = asked.iter().filter(|s| **s == TaskStatus::Running).count();
    assert_eq!(running, 1, "{asked:?}");
    assert_eq!(asked.len(), 4, "{asked:?}");
}

#[tokio::test]
async fn a_message_to_a_busy_live_child_is_created_pending_and_waits_its_turn() {
    let flaky = Flaky::new(|_| false, 0);
    let f = over(&flaky, STUCK, None);
    let session = f.session();
    let background = |tool: &'static str, args: serde_json::Value| {
        let (f, sid) = (&f, session.id());
        async move { task_id_in(&call(f, sid, tool, args).await) }
    };
    let first = background(
        "agent_spawn",
        json!({"agent_id": "worker", "label": "w", "task": "one", "timeout_seconds": 0}),
    )
    .await;
    // The first message holds the child's conversation: the second waits for it.
    let second = background(
        "agent_send",
        json!({"label": "w", "message": "two", "timeout_seconds": 0}),
    )
    .await;
    assert_eq!(
        *flaky.created.lock().unwrap(),
        [TaskStatus::Running, TaskStatus::Pending]
    );
    let cancelled = call(&f, session.id(), "task_cancel", json!({"task_id": first})).await;
    assert!(!cancelled.is_error, "{}", cancelled.content);
    // Its turn comes when the first ends.
    let mut status = f.runtime.watch_status(&second).unwrap();
    let started = status.wait_for(|s| *s == TaskStatus::Running);
    tokio::time::timeout(Duration::from_secs(10), started)
        .await
        .expect("the waiting message starts when the first one ends")
        .unwrap();
    // Only the message that waited was written `running`.
    let asked = flaky.asked.lock().unwrap().clone();
    let running = asked.iter().filter(|s| **s == TaskStatus::Running).count();
    assert_eq!(running, 1, "{asked:?}");
}

#[tokio::test]
async fn a_result_is_written_delivered_once_and_only_when_it_was_not() {
    let flaky = Flaky::new(|_| false, 0);
    let f = over(&flaky, ANSWER, None);
    let session = f.session();
    // A synchronous message's task is created delivered: reading its reply writes nothing.
    let spawned = call(
        &f,
        session.id(),
        "agent_spawn",
        json!({"agent_id": "worker", "label": "w", "task": "one"}),
    )
    .await;
    assert!(
        spawned.content.contains("reply: the answer"),
        "{}",
        spawned.content
    );
    assert_eq!(flaky.marked.load(Ordering::SeqCst), 0);
    // A background one is delivered by the first task_output that reads its end.
    let id = start_background(&f, session.id()).await;
    for _ in 0..2 {
        let out = call(&f, session.id(), "task_output", json!({"task_id": id})).await;
        assert!(out.content.contains("the answer"), "{}", out.content);
    }
    assert_eq!(flaky.marked.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_message_does_not_start_ahead_of_one_still_being_created() {
    let flaky = Flaky::new(|_| false, 0);
    let f = over(&flaky, STUCK, None);
    let session = f.session();
    let sid = session.id();
    let spawned = call(
        &f,
        sid,
        "agent_spawn",
        json!({"agent_id": "worker", "label": "w", "task": "t0", "timeout_seconds": 0}),
    )
    .await;
    let first = task_id_in(&spawned);
    // A comes while t0 runs, and its record takes long to be created (a store retrying).
    flaky.held_creates.store(1, Ordering::SeqCst);
    let a = call(
        &f,
        sid,
        "agent_send",
        json!({"label": "w", "message": "a", "timeout_seconds": 0}),
    );
    let then_b = async {
        flaky.gated.notified().await;
        // t0 ends while A is still being created; then B comes.
        let mut t0 = f.runtime.watch_status(&first).unwrap();
        call(&f, sid, "task_cancel", json!({"task_id": first})).await;
        let _ = t0.wait_for(|s| s.is_terminal()).await;
        let b = call(
            &f,
            sid,
            "agent_send",
            json!({"label": "w", "message": "b", "timeout_seconds": 0}),
        )
        .await;
        let created = flaky.created.lock().unwrap().clone();
        flaky.release.add_permits(1);
        (b, created)
    };
    let deadline = Duration::from_secs(10);
    let (a, (b, created)) = tokio::time::timeout(deadline, async { tokio::join!(a, then_b) })
        .await
        .expect("both messages are taken");
    assert!(!a.is_error && !b.is_error, "{}\n{}", a.content, b.content);
    // t0 was created running; B, which came while A was being created, waits its turn.
    assert_eq!(created, [TaskStatus::Running, TaskStatus::Pending]);
}

/// Start a background `task` of the worker in `session`; its id.
async fn start_background(f: &Fixture, session: &str) -> String {
    let args = json!({"subagent_type": "worker", "prompt": "go", "background": true});
    let out = call(f, session, "task", args).await;
    assert!(!out.is_error, "{}", out.content);
    out.content.split('"').nth(1).unwrap().to_string()
}

/// The task id in a delegation tool's reply.
fn task_id_in(out: &ToolOutput) -> String {
    assert!(!out.is_error, "{}", out.content);
    let id = out
        .content
        .lines()
        .find_map(|l| l.strip_prefix("task_id: "));
    id.unwrap().to_string()
}

#[tokio::test]
async fn a_live_childs_message_whose_record_cannot_be_created_leaves_the_child_free() {
    let flaky = Flaky::new(|_| false, 0);
    let f = over(&flaky, ANSWER, None);
    let session = f.session();
    let sid = session.id();
    let spawned = call(
        &f,
        sid,
        "agent_spawn",
        json!({"agent_id": "worker", "label": "w", "task": "one"}),
    )
    .await;
    assert!(
        spawned.content.contains("reply: the answer"),
        "{}",
        spawned.content
    );
    flaky.broken_creates.store(true, Ordering::SeqCst);
    let send = json!({"label": "w", "message": "two", "timeout_seconds": 0});
    let failed = call(&f, sid, "agent_send", send.clone()).await;
    assert!(failed.is_error, "{}", failed.content);
    // Its conversation, slot and place in line were given back: the next message starts.
    flaky.broken_creates.store(false, Ordering::SeqCst);
    let sent = call(&f, sid, "agent_send", send).await;
    task_id_in(&sent);
    assert_eq!(
        *flaky.created.lock().unwrap(),
        [TaskStatus::Running, TaskStatus::Running]
    );
}

#[tokio::test]
async fn waiting_for_a_task_running_here_reads_it_once_and_only_for_its_session() {
    let flaky = Flaky::new(|_| false, 0);
    let f = over(&flaky, STUCK, None);
    let session = f.session();
    let id = start_background(&f, session.id()).await;
    let before = flaky.reads.load(Ordering::SeqCst);
    let wait = json!({"task_id": id, "timeout": 50});
    let out = call(&f, session.id(), "task_output", wait.clone()).await;
    assert!(out.content.contains("timed out waiting"), "{}", out.content);
    // Waited for at once; read when the wait ended, to say how it stands.
    assert_eq!(flaky.reads.load(Ordering::SeqCst) - before, 1);
    // Asked without waiting, it is read once; running here, it has no result to take.
    let poll = call(
        &f,
        session.id(),
        "task_output",
        json!({"task_id": id, "block": false}),
    )
    .await;
    assert!(poll.content.contains("still running"), "{}", poll.content);
    assert_eq!(flaky.reads.load(Ordering::SeqCst) - before, 2);
    assert_eq!(flaky.takes.load(Ordering::SeqCst), 0);
    // Another session's caller does not get to wait for it.
    let other = call(&f, f.session().id(), "task_output", wait).await;
    assert!(other.is_error, "{}", other.content);
    assert!(
        other.content.contains("Unknown task_id"),
        "{}",
        other.content
    );
}

#[tokio::test]
async fn task_output_takes_the_result_it_waited_for_in_one_write_without_reading_it() {
    let flaky = Flaky::new(|_| false, 0);
    let (f, open) = gated_over(flaky.clone(), |_| {});
    let session = f.session();
    let sid = session.id();
    let id = start_background(&f, sid).await;
    let before = flaky.reads.load(Ordering::SeqCst);
    let mut output = Box::pin(call(&f, sid, "task_output", json!({"task_id": id})));
    // Its first poll reaches the wait (the child is held at its gate); then the child ends.
    assert!(futures::poll!(&mut output).is_pending());
    open.send_replace(true);
    let out = output.await;
    assert!(out.content.contains("done:"), "{}", out.content);
    assert!(flaky.inner.get(&id).await.unwrap().unwrap().delivered);
    assert_eq!(
        flaky.reads.load(Ordering::SeqCst) - before,
        0,
        "read before the write"
    );
    // Taken by the end's own write: no take of its own.
    assert_eq!(flaky.takes.load(Ordering::SeqCst), 0);
    assert_eq!(flaky.marked.load(Ordering::SeqCst), 1);
    // Asked again, it is shown by one delivery that finds it delivered already: no read,
    // and no second delivery.
    let again = call(&f, sid, "task_output", json!({"task_id": id})).await;
    assert!(again.content.contains("done:"), "{}", again.content);
    assert_eq!(flaky.reads.load(Ordering::SeqCst) - before, 0);
    assert_eq!(flaky.takes.load(Ordering::SeqCst), 1);
    assert_eq!(flaky.marked.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_task_whose_record_cannot_be_created_leaves_nothing_running_here() {
    let flaky = Flaky::new(|_| false, 0);
    flaky.broken_creates.store(true, Ordering::SeqCst);
    let f = over(&flaky, ANSWER, Some(1));
    let session = f.session();
    let args = json!({"subagent_type": "worker", "prompt": "go"});
    let out = call(&f, session.id(), "task", args.clone()).await;
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("malformed"), "{}", out.content);
    assert_eq!(f.runtime.running_here(), 0);
    assert_eq!(f.runtime.sessions_here(), 0);
    // Its slot was given back: the next task gets it and runs.
    flaky.broken_creates.store(false, Ordering::SeqCst);
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        call(&f, session.id(), "task", args),
    )
    .await
    .expect("the slot of the task that was never created is free");
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(*flaky.created.lock().unwrap(), [TaskStatus::Running]);
}

#[tokio::test]
async fn a_store_failing_when_the_task_starts_does_not_cancel_it() {
    // Two tasks, one slot: the second waits for it, and its `running` fails at first.
    let flaky = Flaky::new(|to| to == TaskStatus::Running, 3);
    for (out, rec) in run_many(&flaky, 2, 1).await {
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.contains("the answer"), "{}", out.content);
        assert_eq!(rec.status, TaskStatus::Completed, "{rec:?}");
        assert_eq!(rec.end_state.as_deref(), Some("completed"));
        assert!(!rec.cancel_requested);
    }
    assert_eq!(flaky.failed.load(Ordering::SeqCst), 3, "the store did fail");
}

#[tokio::test]
async fn a_store_failing_when_the_task_ends_records_its_real_end() {
    let flaky = Flaky::new(TaskStatus::is_terminal, 3);
    let (out, rec) = run_through(&flaky).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("the answer"), "{}", out.content);
    assert_eq!(rec.status, TaskStatus::Completed, "{rec:?}");
    assert_eq!(rec.end_state.as_deref(), Some("completed"));
    assert_eq!(rec.result.as_deref(), Some("the answer"));
    assert_eq!(flaky.failed.load(Ordering::SeqCst), 3, "the store did fail");
}

#[tokio::test]
async fn a_cancel_request_still_cancels() {
    // The store fails the first tries of the end too: the cancel lands after them.
    let flaky = Flaky::new(TaskStatus::is_terminal, 2);
    let f = over(&flaky, STUCK, None);
    let session = f.session();
    let id = start_background(&f, session.id()).await;
    let mut status = f.runtime.watch_status(&id).unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        status.wait_for(|s| *s == TaskStatus::Running),
    )
    .await
    .unwrap()
    .unwrap();
    f.runtime.cancel_task(session.id(), &id).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), f.runtime.wait_idle())
        .await
        .unwrap();
    let rec = f.runtime.store().get(&id).await.unwrap().unwrap();
    assert_eq!(rec.status, TaskStatus::Cancelled, "{rec:?}");
    assert_eq!(flaky.failed.load(Ordering::SeqCst), 2);
}

use cadre_testkit::eventually;

/// The spool files of a workspace.
fn spooled(ws: &std::path::Path) -> usize {
    std::fs::read_dir(cadre_subagents::runtime::spool::Spool::dir_of(ws))
        .map(|d| {
            d.filter_map(std::result::Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn a_store_down_past_the_retry_window_spools_the_end_and_writes_it_when_it_answers() {
    // The store fails every end for now: far more tries than the short window allows.
    let flaky = Flaky::new(TaskStatus::is_terminal, usize::MAX);
    let store: Arc<dyn TaskStore> = flaky.clone();
    let f = fixture(
        ANSWER,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(move |c| {
                c.store = store;
                c.store_write_retry = Duration::from_millis(300);
            }),
            ..Default::default()
        },
    );
    let session = f.session();
    let out = call(
        &f,
        session.id(),
        "task",
        json!({"subagent_type": "worker", "prompt": "go"}),
    )
    .await;
    // The parent got the result from memory while the store is down.
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("the answer"), "{}", out.content);
    assert_eq!(spooled(&f.ws), 1, "the end is in the spool");
    let stored = &flaky.inner.list_by_session(session.id()).await.unwrap()[0];
    assert_eq!(
        stored.status,
        TaskStatus::Running,
        "the store has not got it yet"
    );
    let shown = &f.runtime.tasks_of(session.id()).await[0];
    assert_eq!(shown.status, TaskStatus::Completed, "read here as it ended");

    // The store answers again: the spool is written, as it was.
    flaky.failures.store(0, Ordering::SeqCst);
    let id = stored.id.clone();
    eventually(
        "the spooled end reaches the store",
        Duration::from_secs(30),
        || {
            let inner = &flaky.inner;
            let id = id.clone();
            async move { inner.get(&id).await.unwrap().unwrap().status == TaskStatus::Completed }
        },
    )
    .await;
    let rec = flaky.inner.get(&id).await.unwrap().unwrap();
    assert_eq!(rec.end_state.as_deref(), Some("completed"));
    assert_eq!(rec.result.as_deref(), Some("the answer"));
    eventually("the spool emptied", Duration::from_secs(10), || async {
        spooled(&f.ws) == 0
    })
    .await;
}

/// Children that wait at a gate (a tool) the test opens.
const GATED: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "gate", args = {} }]
[[scripts.turns]]
text = "done: {{user}}"
"#;

/// A fixture of [`GATED`] children over `store`, with `more` set on its runtime; and the
/// sender that opens their gate.
fn gated_over(
    store: Arc<dyn TaskStore>,
    more: impl FnOnce(&mut cadre_subagents::RuntimeConfig) + 'static,
) -> (Fixture, tokio::sync::watch::Sender<bool>) {
    let (open, gate) = tokio::sync::watch::channel(false);
    let f = fixture(
        GATED,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(move |c| {
                c.store = store;
                c.base_tools = base_tools().with(Arc::new(Gate(gate)));
                more(c);
            }),
            ..Default::default()
        },
    );
    (f, open)
}

/// Waits until the test opens the gate.
struct Gate(tokio::sync::watch::Receiver<bool>);

#[async_trait]
impl cadre_tools::Tool for Gate {
    fn name(&self) -> &str {
        "gate"
    }
    fn definition(&self) -> cadre_types::ToolDefinition {
        cadre_types::ToolDefinition {
            name: "gate".into(),
            description: "waits".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn is_read_only(&self) -> bool {
        true
    }
    async fn call(
        &self,
        _args: serde_json::Value,
        _ctx: &cadre_tools::ToolContext,
    ) -> Result<ToolOutput, cadre_tools::ToolError> {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|open| *open).await;
        Ok(ToolOutput::ok("open"))
    }
}

/// The must-show case on a real PostgreSQL: the server is stopped while 20 children
/// finish, stays down past the (short) retry window, and comes back. Every parent call
/// gets its child's result meanwhile; every task ends `completed` in the store with its
/// result; none is `cancelled`, and the spool empties.
#[tokio::test(flavor = "multi_thread")]
async fn postgresql_down_while_20_children_finish_loses_and_mislabels_nothing() {
    const N: usize = 20;
    if cadre_store::testing::find_pg_bin().is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "PostgreSQL missing in CI"
        );
        eprintln!("SKIPPED: PostgreSQL not installed");
        return;
    }
    // A cluster of its own: this test stops it.
    let cluster = cadre_store::testing::PgCluster::start(&[]).unwrap();
    let url = cluster.create_database().await.unwrap();
    let store: Arc<dyn TaskStore> = Arc::new(
        cadre_store::open(&url, NodeId::new("outage"))
            .await
            .unwrap(),
    );
    let (f, open) = gated_over(store, |c| {
        c.max_concurrent = N;
        c.store_write_retry = Duration::from_secs(1);
    });
    let session = f.session();
    let sid = session.id();
    let calls = futures::future::join_all((0..N).map(|i| {
        call(
            &f,
            sid,
            "task",
            json!({"subagent_type": "worker", "prompt": format!("job {i}")}),
        )
    }));
    let outage = async {
        eventually("every child runs", Duration::from_secs(60), || async {
            let tasks = f.runtime.tasks_of(sid).await;
            tasks.len() == N && tasks.iter().all(|t| t.status == TaskStatus::Running)
        })
        .await;
        cluster.pause().unwrap();
        open.send_replace(true);
    };
    let (outs, ()) = tokio::join!(calls, outage);
    // Every result reached its parent while the database was down.
    for (i, out) in outs.iter().enumerate() {
        assert!(!out.is_error, "{}", out.content);
        assert!(
            out.content.contains(&format!("done: job {i}")),
            "{}",
            out.content
        );
    }
    assert_eq!(spooled(&f.ws), N, "every end is in the spool");

    cluster.resume().unwrap();
    let reader = cadre_store::open(&url, NodeId::new("reader"))
        .await
        .unwrap();
    eventually(
        "every spooled end reaches PostgreSQL",
        Duration::from_secs(60),
        || async {
            let tasks = reader.list_by_session(sid).await.unwrap_or_default();
            tasks.len() == N && tasks.iter().all(|t| t.status.is_terminal())
        },
    )
    .await;
    for t in reader.list_by_session(sid).await.unwrap() {
        assert_eq!(t.status, TaskStatus::Completed, "{t:?}");
        assert_eq!(t.end_state.as_deref(), Some("completed"), "{t:?}");
        let wanted = format!("done: {}", t.prompt);
        assert_eq!(t.result.as_deref(), Some(wanted.as_str()), "{t:?}");
        assert!(!t.cancel_requested);
    }
    eventually("the spool emptied", Duration::from_secs(10), || async {
        spooled(&f.ws) == 0
    })
    .await;
}

const WAITS: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
text = "waiting"
[[scripts.turns]]
text = "got: {{user}}"
"#;

// A parent waiting for a task another node runs goes on waiting through a store that
// fails for a while (a database restart): it only ends once the task did. Time is paused.
#[tokio::test(start_paused = true)]
async fn a_parent_waiting_on_another_node_waits_out_a_store_restart() {
    let flaky = Flaky::new(|_| false, 0);
    let f = over(&flaky, WAITS, None);
    let session = f.session();
    let mut t = NewTask::new("worker", session.id(), "go");
    t.background = true;
    let id = stored_running(&flaky.inner, t).await;
    flaky.summary_failures.store(5, Ordering::SeqCst);
    let run = f.spawn_run(session, "go");
    // Two looks past the five that fail: the parent went on waiting through them.
    eventually(
        "the parent to look again after the failures",
        Duration::from_secs(60),
        || async { flaky.summary_reads.load(Ordering::SeqCst) >= 7 },
    )
    .await;
    assert_eq!(
        flaky.summary_failures.load(Ordering::SeqCst),
        0,
        "the reads failed"
    );
    assert!(
        !run.is_finished(),
        "the parent stopped waiting at the store's failure"
    );
    flaky
        .inner
        .transition(&id, Transition::completed("the remote answer"))
        .await
        .unwrap();
    let (out, _) = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the parent ended")
        .unwrap();
    assert!(out.output.contains("the remote answer"), "{}", out.output);
}
