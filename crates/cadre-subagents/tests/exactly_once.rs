//! Exactly once after a crash. A durable child lost right after a step completed is
//! continued by another node from its checkpoint without that step being asked of the model
//! again: each completed model turn (the final answer included) and each completed tool
//! result is in the store before the run takes its next step. And a parent lost while it
//! was being handed its finished background tasks gets each result once: again when its
//! session did not record them, never when it did.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_store::{NodeId, TaskStatus, TaskStore};
use cadre_types::{Event, EventEnvelope, EventSink, UpdateKind};
use common::*;
use serde_json::json;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// An echo call, then the answer.
const SCRIPT: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "echo", args = { text = "hi" } }]
[[scripts.turns]]
text = "the answer"
"#;

/// The parent's event sink that stops the child's run for good the moment it reports the
/// step `at` (the node was killed there): the run's thread blocks until the test ends.
struct Freeze {
    at: fn(&cadre_types::SubagentUpdate) -> bool,
    reached: Mutex<Option<mpsc::Sender<()>>>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl EventSink for Freeze {
    fn emit(&self, env: EventEnvelope) {
        let Event::SubagentUpdate { update } = &env.event else {
            return;
        };
        if !(self.at)(update) {
            return;
        }
        let Some(reached) = self.reached.lock().unwrap().take() else {
            return;
        };
        reached.send(()).unwrap();
        tokio::task::block_in_place(|| {
            let _ = self.release.lock().unwrap().recv();
        });
    }
}

/// Node "lost" runs a durable background worker until it reports the step `at`, where it
/// stops dead; node "adopter" adopts the task and finishes it. The worker's requests at
/// the lost node and at the adopter, and the adopted task's end.
async fn lost_at(
    at: fn(&cadre_types::SubagentUpdate) -> bool,
) -> (
    Vec<cadre_llm::ModelRequest>,
    Vec<cadre_llm::ModelRequest>,
    cadre_store::TaskRecord,
) {
    let db = tempfile::tempdir().unwrap();
    let path = db.path().join("cadre.db");
    let node = |name: &'static str| {
        let path = path.clone();
        async move {
            let s: Arc<dyn TaskStore> = Arc::new(
                cadre_store::open_sqlite(&path, NodeId::new(name))
                    .await
                    .unwrap(),
            );
            s
        }
    };
    let (lost_store, adopter_store) = (node("lost").await, node("adopter").await);
    let durable = |store: Arc<dyn TaskStore>| Options {
        defs: vec![worker("worker")],
        tweak: Box::new(move |c| {
            c.store = store;
            c.on_orphan = cadre_store::OrphanPolicy::Resume;
        }),
        ..Default::default()
    };
    let lost = fixture(SCRIPT, durable(lost_store));
    let (reached_tx, reached) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let freeze = Arc::new(Freeze {
        at,
        reached: Mutex::new(Some(reached_tx)),
        release: Mutex::new(release_rx),
    });
    let mut ctx = tool_context(&lost, "s-parent");
    let mut run = (*ctx.run).clone();
    run.events = freeze.clone();
    ctx.run = Arc::new(run);
    let out = lost
        .runtime
        .delegation_tools()
        .get("task")
        .unwrap()
        .call(
            json!({"subagent_type": "worker", "prompt": "go", "background": true}),
            &ctx,
        )
        .await
        .unwrap();
    let id = out.content.split('"').nth(1).unwrap().to_string();
    tokio::task::spawn_blocking(move || reached.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the child reached the step");

    let adopter = fixture(SCRIPT, durable(adopter_store.clone()));
    let parent = adopter.runtime.top_level_parent(
        adopter.run_context(&adopter.session()),
        tokio_util::sync::CancellationToken::new(),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while adopter
        .runtime
        .adopt_orphans(&parent, Duration::ZERO)
        .await
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "never adopted");
        tokio::task::yield_now().await;
    }
    let done = adopter_store
        .wait_terminal(&id, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the adopted task ended");
    // What the lost node asked before it stopped (woken, it is only fenced: within its
    // lease it may go on until its end is refused).
    let asked_by_lost = lost.rec.of("worker");
    release.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), lost.runtime.wait_idle())
        .await
        .expect("the lost node's run ended");
    let after = adopter_store.get(&id).await.unwrap().unwrap();
    assert_eq!(after.result, done.result, "the lost node overwrote the end");
    (asked_by_lost, adopter.rec.of("worker"), done)
}

/// How many replies each request's conversation holds: the turn it asks for.
fn turns(requests: &[cadre_llm::ModelRequest]) -> Vec<usize> {
    requests
        .iter()
        .map(|r| {
            r.messages
                .iter()
                .filter(|m| matches!(m, cadre_types::Message::Assistant { .. }))
                .count()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_lost_after_its_final_answer_is_not_asked_again() {
    let (lost, adopter, done) = lost_at(|u| u.end.is_some()).await;
    assert_eq!(turns(&lost), [0, 1]);
    assert_eq!(
        turns(&adopter),
        Vec::<usize>::new(),
        "the final turn ran twice"
    );
    assert_eq!(done.status, TaskStatus::Completed, "{done:?}");
    assert_eq!(done.result.as_deref(), Some("the answer"));
    assert!(
        done.usage.total() > 0,
        "the lost run's spending is kept: {done:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_lost_after_its_first_reply_continues_with_its_call() {
    let (lost, adopter, done) = lost_at(|u| u.kind == UpdateKind::ToolStart).await;
    assert_eq!(turns(&lost), [0]);
    assert_eq!(turns(&adopter), [1], "the first turn ran twice");
    assert_eq!(done.status, TaskStatus::Completed, "{done:?}");
    assert_eq!(done.result.as_deref(), Some("the answer"));
}

/// A worker that answers at once.
const QUICK: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
text = "the answer"
"#;

/// Three finished background workers of one session, and the parent's run.
async fn three_finished() -> (Fixture, Arc<cadre_tools::RunContext>) {
    let f = fixture(
        QUICK,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let session = f.session();
    for i in 0..3 {
        let args =
            json!({"subagent_type": "worker", "prompt": format!("job {i}"), "background": true});
        call(&f, session.id(), "task", args).await;
    }
    tokio::time::timeout(Duration::from_secs(10), f.runtime.wait_idle())
        .await
        .unwrap();
    let run = f.run_context(&session);
    (f, run)
}

fn results_in(messages: &[cadre_types::Message]) -> usize {
    delivered(messages)
        .iter()
        .map(|m| m.matches("<task id=").count())
        .sum()
}

#[tokio::test]
async fn results_handed_to_a_parent_lost_before_its_session_held_them_are_handed_out_again() {
    use cadre_engine::TurnExtension;
    let (f, run) = three_finished().await;
    let lost = cadre_subagents::SubagentContext::new(f.runtime.clone());
    assert_eq!(results_in(&lost.take_injections(&run, &[]).await), 3);
    // The process died here, before its session was written: nothing was recorded.
    drop(lost);
    let resumed = cadre_subagents::SubagentContext::new(f.runtime.clone());
    let again = resumed.take_injections(&run, &[]).await;
    assert_eq!(results_in(&again), 3, "{again:?}");
    resumed.recorded(&run).await;
    assert_eq!(results_in(&resumed.take_injections(&run, &again).await), 0);
    let tasks = f.runtime.tasks_of(&run.session_id).await;
    assert!(tasks.iter().all(|t| t.delivered), "{tasks:?}");
}

#[tokio::test]
async fn results_a_lost_parent_had_recorded_are_not_handed_out_again() {
    use cadre_engine::TurnExtension;
    let (f, run) = three_finished().await;
    let lost = cadre_subagents::SubagentContext::new(f.runtime.clone());
    let history = lost.take_injections(&run, &[]).await;
    // The session holds them; the process died before marking them delivered.
    drop(lost);
    let tasks = f.runtime.tasks_of(&run.session_id).await;
    assert!(tasks.iter().all(|t| !t.delivered), "{tasks:?}");
    let resumed = cadre_subagents::SubagentContext::new(f.runtime.clone());
    let mut history = history;
    history.push(cadre_types::Message::user("and a new prompt"));
    assert_eq!(
        results_in(&resumed.take_injections(&run, &history).await),
        0
    );
    let tasks = f.runtime.tasks_of(&run.session_id).await;
    assert!(tasks.iter().all(|t| t.delivered), "marked now: {tasks:?}");
}
