//! The runtime written through the persistent store, against SQLite and PostgreSQL: records,
//! cross-node cancel and wait, and live children that survive a restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_store::testing::{find_pg_bin, shared_cluster};
use cadre_store::{NodeId, TaskStatus, TaskStore};
use cadre_subagents::Waited;
use cadre_types::Message;
use common::*;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Sqlite,
    Postgres,
}

/// A database URL for `kind`, or `None` (after a loud line) when PostgreSQL is missing
/// outside CI; under `CI=true` a missing PostgreSQL fails.
async fn database(kind: Kind, dir: &std::path::Path) -> Option<String> {
    match kind {
        Kind::Sqlite => Some(format!("sqlite://{}", dir.join("shared.db").display())),
        Kind::Postgres => {
            if find_pg_bin().is_none() {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "PostgreSQL missing in CI"
                );
                eprintln!("SKIPPED: PostgreSQL not installed");
                return None;
            }
            let cluster = shared_cluster().unwrap();
            Some(cluster.create_database().await.unwrap())
        }
    }
}

async fn store(url: &str, node: &str) -> Arc<dyn TaskStore> {
    Arc::new(cadre_store::open(url, NodeId::new(node)).await.unwrap())
}

fn node(script: &str, store: Arc<dyn TaskStore>, sessions: std::path::PathBuf) -> Fixture {
    fixture(
        script,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(move |c| {
                c.store = store;
                c.sessions_dir = Some(sessions);
            }),
            ..Default::default()
        },
    )
}

const SLOW: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
delay_ms = 700
text = "answer to {{user}}"
[[scripts.turns]]
text = "second answer to {{user}}"
"#;

const STUCK: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
delay_ms = 60000
text = "never"
"#;

async fn records_cancel_and_wait_across_nodes(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = database(kind, dir.path()).await else {
        return;
    };
    let sessions = dir.path().join("sessions");
    let a = node(SLOW, store(&url, "node-a").await, sessions.clone());
    let b = node(SLOW, store(&url, "node-b").await, sessions.clone());
    let parent = "s-shared-parent";

    // A runs a background task; B, which does not run it, waits for it through the store.
    let spawned = call(
        &a,
        parent,
        "agent_spawn",
        json!({"agent_id": "worker", "task": "q1", "timeout_seconds": 0}),
    )
    .await;
    let id = field(&spawned, "task_id");
    let started = Instant::now();
    let out = call(
        &b,
        parent,
        "task_output",
        json!({"task_id": id, "timeout": 5000}),
    )
    .await;
    assert_eq!(field(&out, "status"), "completed", "{}", out.content);
    assert_eq!(field(&out, "result"), "answer to q1");
    assert!(
        started.elapsed() < Duration::from_millis(700 + 1000),
        "{:?}",
        started.elapsed()
    );

    // The record carries the result, end state, usage and owner.
    let rec = a.runtime.store().get(&id).await.unwrap().unwrap();
    assert_eq!(rec.status, TaskStatus::Completed);
    assert_eq!(rec.owner_node, "node-a");
    assert_eq!(rec.end_state.as_deref(), Some("completed"));
    assert!(rec.usage.total() > 0);
    assert_eq!(
        b.runtime.tasks_of(parent).await.len(),
        1,
        "B lists A's task"
    );

    // Cross-node cancel: B cancels a task stuck in A's slow model call.
    let a2 = node(STUCK, store(&url, "node-a2").await, sessions.clone());
    let spawned = call(
        &a2,
        parent,
        "agent_spawn",
        json!({"agent_id": "worker", "task": "hang", "timeout_seconds": 0}),
    )
    .await;
    let stuck = field(&spawned, "task_id");
    cadre_testkit::eventually(
        "the stuck child's model call",
        Duration::from_secs(5),
        || async { !a2.rec.of("worker").is_empty() },
    )
    .await;
    let asked = Instant::now();
    let out = call(&b, parent, "task_cancel", json!({"task_id": stuck})).await;
    assert_eq!(field(&out, "status"), "cancelled", "{}", out.content);
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    // The owner hears of it through the store (within 1 s, the cross-node bound), not at once.
    let owner = a2
        .runtime
        .wait_for(
            &stuck,
            &CancellationToken::new(),
            Some(Duration::from_secs(2)),
        )
        .await;
    let Waited::Done(rec) = owner else {
        panic!("the owner stops the child within 2 s: {owner:?}");
    };
    assert_eq!(rec.status, TaskStatus::Cancelled);
    assert!(!a2.runtime.runs_here(&stuck), "the owner's child stopped");
    // Its 60 s model call was dropped, so it had nothing to make a further call from.
    cadre_testkit::eventually(
        "the stuck call to be dropped",
        Duration::from_secs(2),
        || async { a2.rec.in_flight() == 0 },
    )
    .await;
    assert_eq!(
        a2.rec.of("worker").len(),
        1,
        "no further model call from the cancelled child"
    );
}

async fn live_children_survive_a_restart(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = database(kind, dir.path()).await else {
        return;
    };
    let sessions = dir.path().join("sessions");
    let parent = "s-restart-parent";
    {
        let before = node(SLOW, store(&url, "node-r").await, sessions.clone());
        let out = call(
            &before,
            parent,
            "agent_spawn",
            json!({"agent_id": "worker", "label": "helper", "task": "first"}),
        )
        .await;
        assert_eq!(field(&out, "status"), "ok", "{}", out.content);
        before.runtime.shutdown();
    }
    // A new process: nothing in memory; the child comes back from the store and its transcript.
    let after = node(SLOW, store(&url, "node-r").await, sessions.clone());
    let out = call(
        &after,
        parent,
        "agent_send",
        json!({"label": "HELPER", "message": "second"}),
    )
    .await;
    assert_eq!(
        field(&out, "reply"),
        "second answer to second",
        "{}",
        out.content
    );
    let req = after.rec.of("worker");
    assert_eq!(
        req[0].messages,
        vec![
            Message::user("first"),
            Message::assistant("answer to first"),
            Message::user("second")
        ]
    );
    let list = call(&after, parent, "task_list", json!({})).await;
    assert!(
        list.content.starts_with("tasks: 2"),
        "both tasks of the session, old and new: {}",
        list.content
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_records_cancel_and_wait_across_nodes() {
    records_cancel_and_wait_across_nodes(Kind::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_records_cancel_and_wait_across_nodes() {
    records_cancel_and_wait_across_nodes(Kind::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_live_children_survive_a_restart() {
    live_children_survive_a_restart(Kind::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_live_children_survive_a_restart() {
    live_children_survive_a_restart(Kind::Postgres).await;
}

/// A foreground `task` call is handed its task's end by the write that stored it: waiting
/// for it reads nothing back from the store (it read each task again as its watch fired).
#[tokio::test(flavor = "multi_thread")]
async fn a_foreground_task_is_answered_without_reading_its_end_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fg.db");
    let sql = Arc::new(
        cadre_store::open_sqlite(&path, NodeId::new("node-a"))
            .await
            .unwrap(),
    );
    let f = node(SLOW, sql.clone(), dir.path().join("sessions"));
    let before = sql.read_stats();
    let out = call(
        &f,
        "s-fg",
        "task",
        json!({"subagent_type": "worker", "prompt": "q1", "description": "d"}),
    )
    .await;
    assert!(out.content.contains("answer to q1"), "{}", out.content);
    assert_eq!(sql.read_stats(), before, "the task's end was read back");
    let rec = &f.runtime.tasks_of("s-fg").await[0];
    assert_eq!(rec.status, TaskStatus::Completed);
    assert_eq!(rec.result.as_deref(), Some("answer to q1"));
}

/// A `task_output` that waits for a background task running here takes its result with the
/// task's end: one write stores the end and its delivery (it was the end, then the take),
/// the result is shown once, and no later delivery hands it out again.
/// PostgreSQL does not hand the task back from its end: the caller reads it.
async fn a_waiting_task_output_is_delivered_by_the_end_itself(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = database(kind, dir.path()).await else {
        return;
    };
    let sql = Arc::new(
        cadre_store::open(&url, NodeId::new("node-a"))
            .await
            .unwrap(),
    );
    let f = node(SLOW, sql.clone(), dir.path().join("sessions"));
    let spawned = call(
        &f,
        "s-bg",
        "agent_spawn",
        json!({"agent_id": "worker", "task": "q1", "timeout_seconds": 0}),
    )
    .await;
    let id = field(&spawned, "task_id");
    let before = sql.write_stats().writes;
    let out = call(
        &f,
        "s-bg",
        "task_output",
        json!({"task_id": id, "timeout": 5000}),
    )
    .await;
    assert_eq!(field(&out, "status"), "completed", "{}", out.content);
    assert_eq!(field(&out, "result"), "answer to q1");
    assert_eq!(
        sql.write_stats().writes - before,
        1,
        "the end and its delivery"
    );
    let rec = f.runtime.store().get(&id).await.unwrap().unwrap();
    assert!(rec.delivered);
    assert!(
        f.runtime
            .store()
            .undelivered_finished("s-bg")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_a_waiting_task_output_is_delivered_by_the_end_itself() {
    a_waiting_task_output_is_delivered_by_the_end_itself(Kind::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_waiting_task_output_is_delivered_by_the_end_itself() {
    a_waiting_task_output_is_delivered_by_the_end_itself(Kind::Postgres).await;
}

/// A `task_output` for a background task that ended before the call takes it in one write,
/// without reading it first (it read the task, then wrote its delivery); asked again, when
/// it is delivered already, the same.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_output_after_the_end_takes_it_in_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let sql = Arc::new(
        cadre_store::open_sqlite(&dir.path().join("t.db"), NodeId::new("node-a"))
            .await
            .unwrap(),
    );
    let f = node(SLOW, sql.clone(), dir.path().join("sessions"));
    let spawned = call(
        &f,
        "s-after",
        "agent_spawn",
        json!({"agent_id": "worker", "task": "q1", "timeout_seconds": 0}),
    )
    .await;
    let id = field(&spawned, "task_id");
    let mut status = f.runtime.watch_status(&id).unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        status.wait_for(|s| s.is_terminal()),
    )
    .await
    .expect("the task ends")
    .unwrap();
    let (writes, reads) = (sql.write_stats().writes, sql.read_stats().gets);
    let out = call(&f, "s-after", "task_output", json!({"task_id": id})).await;
    assert_eq!(field(&out, "result"), "answer to q1", "{}", out.content);
    assert_eq!(sql.write_stats().writes - writes, 1, "one write");
    assert_eq!(sql.read_stats().gets - reads, 0, "read before the write");
    // Asked again (delivered already, as a turn's start delivers it): the same one write.
    let (writes, reads) = (sql.write_stats().writes, sql.read_stats().gets);
    let again = call(&f, "s-after", "task_output", json!({"task_id": id})).await;
    assert_eq!(field(&again, "result"), "answer to q1", "{}", again.content);
    assert_eq!(sql.write_stats().writes - writes, 1, "one write");
    assert_eq!(
        sql.read_stats().gets - reads,
        0,
        "read after trying to take"
    );
    assert!(
        f.runtime
            .store()
            .undelivered_finished("s-after")
            .await
            .unwrap()
            .is_empty()
    );
}

/// `agent_spawn` with a first task stores the live child and the task in one write (it was
/// two in a row); a label already taken in the store creates neither, and leaves nothing
/// here.
#[tokio::test(flavor = "multi_thread")]
async fn a_live_child_and_its_first_task_are_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let sql = Arc::new(
        cadre_store::open_sqlite(&dir.path().join("t.db"), NodeId::new("node-a"))
            .await
            .unwrap(),
    );
    let f = node(SLOW, sql.clone(), dir.path().join("sessions"));
    let writes = sql.write_stats().writes;
    let spawned = call(
        &f,
        "s-one",
        "agent_spawn",
        json!({"agent_id": "worker", "task": "q1", "label": "w", "timeout_seconds": 0}),
    )
    .await;
    let id = field(&spawned, "task_id");
    assert_eq!(sql.write_stats().writes - writes, 1, "{}", spawned.content);
    let store = f.runtime.store();
    assert!(store.get(&id).await.unwrap().is_some());
    assert_eq!(store.live_children("s-one").await.unwrap().len(), 1);

    // Another process took label "x" for this session: the store refuses the child.
    let other = cadre_store::LiveChildEntry {
        agent_key: "agent:worker:other".into(),
        label: Some("x".into()),
        agent_id: "worker".into(),
        parent_session_id: "s-one".into(),
        child_session_id: "sub-other".into(),
        depth: 1,
        created_at: 1,
    };
    store.insert_live_child(&other).await.unwrap();
    let refused = call(
        &f,
        "s-one",
        "agent_spawn",
        json!({"agent_id": "worker", "task": "q2", "label": "X", "timeout_seconds": 0}),
    )
    .await;
    assert!(refused.is_error, "{}", refused.content);
    assert!(refused.content.contains("in use"), "{}", refused.content);
    assert_eq!(store.list_by_session("s-one").await.unwrap().len(), 1);
    assert_eq!(f.runtime.live().list("s-one").len(), 1, "kept here");
    // Without a first task too: the child is kept here only once the store has it.
    let refused = call(
        &f,
        "s-one",
        "agent_spawn",
        json!({"agent_id": "worker", "label": "x"}),
    )
    .await;
    assert!(refused.is_error, "{}", refused.content);
    assert!(refused.content.contains("in use"), "{}", refused.content);
    assert_eq!(store.live_children("s-one").await.unwrap().len(), 2);
    assert_eq!(f.runtime.live().list("s-one").len(), 1, "kept here");
}
