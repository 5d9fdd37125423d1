//! A child adopted when its parent's session is resumed (`cadre run --resume`) is the
//! resumed run's own child: what it spent before the crash and what it spends now are in
//! the run's totals and charged to the run's budget, which stops the run at its limit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_store::{NewTask, NodeId, OrphanPolicy, TaskStatus, TaskStore, Transition};
use cadre_types::{EndState, LimitKind, Message, ToolCall, Usage};
use common::*;
use std::sync::Arc;
use std::time::Duration;

/// The parent answers at once and again when the child's result is delivered; the child,
/// resumed after its echo call, answers.
const SCRIPT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
text = "waiting for the worker"
[[scripts.turns]]
text = "the worker is done"
[[scripts]]
agent = "worker"
[[scripts.turns]]
text = "unused: the checkpoint holds this turn"
[[scripts.turns]]
text = "the worker's answer"
"#;

/// What the child had spent on the lost node, as its checkpoint records it.
const SPENT: Usage = Usage {
    input_tokens: 4000,
    output_tokens: 1000,
    cached_input_tokens: 0,
    cache_write_tokens: 0,
    cost_nano_usd: 0,
    unpriced_calls: 0,
};

/// A fixture whose parent runs under `limits`, and a background worker task of its session
/// that a lost node ran (its checkpoint: the prompt and a reply asking for an echo, having
/// spent [`SPENT`]), silent long enough to be adopted. The task's id.
async fn lost_child(limits: cadre_engine::Limits) -> (Fixture, cadre_engine::Session, String) {
    let db = tempfile::tempdir().unwrap();
    let path = db.path().join("cadre.db");
    let store: Arc<dyn TaskStore> = Arc::new(
        cadre_store::open_sqlite(&path, NodeId::new("here"))
            .await
            .unwrap(),
    );
    let s = store.clone();
    let f = fixture(
        SCRIPT,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(move |c| {
                c.store = s;
                c.orphan_timeout = Duration::ZERO;
            }),
            limits,
            ..Default::default()
        },
    );
    // The directory outlives the fixture's store handles.
    std::mem::forget(db);
    let session = f.session();
    let lost = cadre_store::open_sqlite(&path, NodeId::new("lost"))
        .await
        .unwrap();
    let mut t = NewTask::new("worker", session.id(), "go");
    t.on_orphan = OrphanPolicy::Resume;
    t.background = true;
    let id = t.id.clone();
    lost.create(&t).await.unwrap();
    lost.transition(&id, Transition::running()).await.unwrap();
    let reply = Message::Assistant {
        content: String::new(),
        thinking: None,
        thinking_signature: None,
        tool_calls: vec![ToolCall {
            id: "call-1".into(),
            name: "echo".into(),
            arguments: r#"{"text":"hi"}"#.into(),
        }],
    };
    lost.append_checkpoint(&id, 0, 0, 0, &[Message::user("go"), reply], SPENT)
        .await
        .unwrap();
    // An orphan is one whose last sign of life is older than the timeout (zero here): the
    // store's clock has to move past it first.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !store
        .resumable_orphans(Duration::ZERO)
        .await
        .unwrap()
        .iter()
        .any(|o| o.id == id)
    {
        assert!(std::time::Instant::now() < deadline, "never an orphan");
        tokio::task::yield_now().await;
    }
    (f, session, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_childs_usage_is_in_the_resumed_runs_totals() {
    let (f, mut session, id) = lost_child(cadre_engine::Limits::default()).await;
    f.runtime.reattach_when_run_starts(session.id());
    let outcome = f.run_in(&mut session, "carry on").await;
    assert_eq!(outcome.state, EndState::Completed, "{outcome:?}");
    let task = f.runtime.store().get(&id).await.unwrap().unwrap();
    assert_eq!(task.status, TaskStatus::Completed, "{task:?}");
    assert_eq!(task.result.as_deref(), Some("the worker's answer"));
    assert!(task.usage.total() > SPENT.total(), "{task:?}");
    assert!(
        outcome.usage.total() >= task.usage.total(),
        "the run's totals leave the adopted child out: run {:?}, child {:?}",
        outcome.usage,
        task.usage
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_child_is_charged_to_the_resumed_runs_budget() {
    let limits = cadre_engine::Limits {
        max_tokens: Some(1000),
        ..Default::default()
    };
    let (f, mut session, id) = lost_child(limits).await;
    f.runtime.reattach_when_run_starts(session.id());
    let outcome = f.run_in(&mut session, "carry on").await;
    assert_eq!(
        outcome.state,
        EndState::LimitReached {
            limit: LimitKind::Tokens
        },
        "{outcome:?}"
    );
    assert!(outcome.usage.total() >= SPENT.total(), "{outcome:?}");
    // The child stopped at the limit too: no model call of its own.
    assert!(f.rec.of("worker").is_empty());
    let task = f
        .runtime
        .store()
        .wait_terminal(&id, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the adopted task ended");
    assert_ne!(task.status, TaskStatus::Completed, "{task:?}");
}
