//! Fencing stops the work, not only the write: a durable child whose task another node
//! adopted while its run was held up (its lease ran out) starts no tool call and no model
//! request after that, and records nothing; a child whose lease ran out but whose task is
//! still its own goes on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_store::TaskStore;
use cadre_subagents::TaskStatus;
use cadre_tools::{Tool, ToolContext, ToolError, ToolOutput};
use cadre_types::ToolDefinition;
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// The orphan timeout of these tests: the child's lease lasts half of it.
const ORPHAN_TIMEOUT: Duration = Duration::from_secs(60);

/// A tool that says it was reached, then returns once the test opens it: the child is held
/// up there as a paused node would be.
struct Gate {
    reached: Arc<Notify>,
    open: Arc<Notify>,
}

#[async_trait]
impl Tool for Gate {
    fn name(&self) -> &str {
        "gate"
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "gate".into(),
            description: "waits".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn is_read_only(&self) -> bool {
        true
    }
    async fn call(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.reached.notify_one();
        self.open.notified().await;
        Ok(ToolOutput::ok("open"))
    }
}

/// A mutating tool that counts its runs: the side effect that must not happen twice.
struct Side(Arc<AtomicUsize>);

#[async_trait]
impl Tool for Side {
    fn name(&self) -> &str {
        "side"
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "side".into(),
            description: "acts".into(),
            parameters: json!({"type": "object"}),
        }
    }
    async fn call(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::ok("acted"))
    }
}

/// One turn with `gate` then `side` (run one at a time), then an answer.
const GATE_THEN_SIDE: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "gate", args = {} }, { name = "side", args = {} }]
[[scripts.turns]]
text = "the answer"
"#;

/// One turn with `gate`, then an answer.
const GATE_ONLY: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "gate", args = {} }]
[[scripts.turns]]
text = "the answer"
"#;

struct Held {
    f: Fixture,
    id: String,
    open: Arc<Notify>,
    side: Arc<AtomicUsize>,
}

/// A durable background child of `script`, held up at its gate.
async fn held_at_the_gate(script: &str) -> Held {
    let (open, reached) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let side = Arc::new(AtomicUsize::new(0));
    let (o, r, s) = (open.clone(), reached.clone(), side.clone());
    let f = fixture(
        script,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(move |c| {
                c.base_tools = base_tools()
                    .with(Arc::new(Gate {
                        reached: r,
                        open: o,
                    }))
                    .with(Arc::new(Side(s)));
                c.checkpoints = true;
                c.on_orphan = cadre_store::OrphanPolicy::Resume;
                c.orphan_timeout = ORPHAN_TIMEOUT;
                c.max_parallel_tools = 1;
            }),
            ..Default::default()
        },
    );
    let session = f.session();
    let out = call(
        &f,
        session.id(),
        "task",
        json!({"subagent_type": "worker", "prompt": "go", "background": true}),
    )
    .await;
    let id = out.content.split('"').nth(1).unwrap().to_string();
    tokio::time::timeout(Duration::from_secs(10), reached.notified())
        .await
        .expect("the child reached the gate");
    Held { f, id, open, side }
}

/// Another node adopts the task (its epoch moves on), as it would once the heartbeat of a
/// paused node is older than the orphan timeout.
async fn adopted_elsewhere(store: &dyn TaskStore, id: &str) {
    // Wall time (the store's clock; the test's is paused): the heartbeat of the task must
    // be older than "now" by a millisecond.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.adopt(id, 0, Duration::ZERO).await.unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "never adopted");
        tokio::task::yield_now().await;
    }
}

/// The child's run ends here (the runtime has nothing left to run).
async fn idle(f: &Fixture) {
    tokio::time::timeout(Duration::from_secs(30), f.runtime.wait_idle())
        .await
        .expect("the child's run ended");
}

#[tokio::test(start_paused = true)]
async fn a_child_whose_task_was_adopted_does_not_run_its_next_tool_call() {
    let h = held_at_the_gate(GATE_THEN_SIDE).await;
    let store = h.f.runtime.store();
    adopted_elsewhere(store.as_ref(), &h.id).await;
    let checkpoint = store.read_checkpoint(&h.id).await.unwrap();
    // The node was held up past its lease.
    tokio::time::advance(ORPHAN_TIMEOUT).await;
    h.open.notify_one();
    idle(&h.f).await;
    assert_eq!(h.side.load(Ordering::SeqCst), 0, "the pending call ran");
    assert_eq!(h.f.rec.of("worker").len(), 1, "another model request");
    // Nothing was recorded for it: the task is the adopter's, running, as it was.
    let rec = store.get(&h.id).await.unwrap().unwrap();
    assert_eq!(rec.status, TaskStatus::Running, "{rec:?}");
    assert_eq!(rec.owner_epoch, 1);
    assert!(!rec.delivered);
    assert_eq!(store.read_checkpoint(&h.id).await.unwrap(), checkpoint);
}

#[tokio::test(start_paused = true)]
async fn a_child_whose_task_was_adopted_does_not_say_the_task_ended_here() {
    let h = held_at_the_gate(GATE_THEN_SIDE).await;
    let store = h.f.runtime.store();
    adopted_elsewhere(store.as_ref(), &h.id).await;
    tokio::time::advance(ORPHAN_TIMEOUT).await;
    h.open.notify_one();
    idle(&h.f).await;
    let ends: Vec<_> =
        h.f.events
            .updates()
            .into_iter()
            .filter(|u| u.end.is_some() || u.kind == cadre_types::UpdateKind::Cancelled)
            .collect();
    assert!(ends.is_empty(), "an end of the task here: {ends:?}");
    let notices: Vec<String> =
        h.f.events
            .all()
            .into_iter()
            .filter_map(|e| match e.event {
                cadre_types::Event::Notice { message } => Some(message),
                _ => None,
            })
            .collect();
    assert!(
        notices
            .iter()
            .any(|m| m.contains(&h.id) && m.contains("taken over by another node")),
        "{notices:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_child_whose_task_was_adopted_makes_no_next_model_request() {
    let h = held_at_the_gate(GATE_ONLY).await;
    let store = h.f.runtime.store();
    adopted_elsewhere(store.as_ref(), &h.id).await;
    tokio::time::advance(ORPHAN_TIMEOUT).await;
    h.open.notify_one();
    idle(&h.f).await;
    assert_eq!(h.f.rec.of("worker").len(), 1, "another model request");
    let rec = store.get(&h.id).await.unwrap().unwrap();
    assert_eq!(
        (rec.status, rec.owner_epoch),
        (TaskStatus::Running, 1),
        "{rec:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_child_whose_lease_ran_out_but_still_owns_its_task_goes_on() {
    let h = held_at_the_gate(GATE_THEN_SIDE).await;
    let store = h.f.runtime.store();
    // Held up past its lease, but nobody adopted the task: the store renews it.
    tokio::time::advance(ORPHAN_TIMEOUT).await;
    h.open.notify_one();
    idle(&h.f).await;
    assert_eq!(h.side.load(Ordering::SeqCst), 1);
    assert_eq!(h.f.rec.of("worker").len(), 2);
    let rec = store.get(&h.id).await.unwrap().unwrap();
    assert_eq!(rec.status, TaskStatus::Completed, "{rec:?}");
}

/// A child whose model request failed retryably and whose task another node adopted during
/// the backoff does not send the retry: the provider asks the run before every retry, and
/// the run asks its lease. Real time: the provider's backoff is the server's one-second
/// `Retry-After`, and the lease (a quarter of a second old by then) asks the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_whose_task_was_adopted_during_a_backoff_does_not_send_the_retry() {
    use cadre_testkit::{MockReply, MockServer, OpenAiJson};
    let first = Arc::new(Notify::new());
    let seen = Arc::new(AtomicUsize::new(0));
    let notify = first.clone();
    let mock = MockServer::start_with(Arc::new(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            notify.notify_one();
            return MockReply::openai_error(503, "overloaded", None).retry_after(1);
        }
        OpenAiJson::new().text("the answer").into_reply()
    }))
    .await
    .unwrap();
    let provider = cadre_llm::openai::OpenAiProvider::from_config(
        "mockai",
        &cadre_llm::ProviderConfig {
            base_url: Some(mock.openai_base_url()),
            // A variable cargo always sets, standing in for an API key.
            api_key_env: Some("CARGO_PKG_NAME".into()),
            stream: Some(false),
            ..Default::default()
        },
    )
    .unwrap();
    let providers = Arc::new(cadre_llm::ProviderRegistry::new(
        std::collections::HashMap::new(),
        "rec",
    ));
    providers.insert("mockai", Arc::new(provider));
    let mut def = worker("worker");
    def.model = Some("mockai:gpt-mock".into());
    let f = fixture(
        GATE_ONLY,
        Options {
            defs: vec![def],
            providers: Some(providers),
            tweak: Box::new(|c| {
                c.checkpoints = true;
                c.on_orphan = cadre_store::OrphanPolicy::Resume;
                // A lease of half a second: by the end of the backoff it asks the store.
                c.orphan_timeout = Duration::from_secs(1);
            }),
            ..Default::default()
        },
    );
    let session = f.session();
    let out = call(
        &f,
        session.id(),
        "task",
        json!({"subagent_type": "worker", "prompt": "go", "background": true}),
    )
    .await;
    let id = out.content.split('"').nth(1).unwrap().to_string();
    tokio::time::timeout(Duration::from_secs(10), first.notified())
        .await
        .expect("the child's first request");
    let store = f.runtime.store();
    adopted_elsewhere(store.as_ref(), &id).await;
    idle(&f).await;
    assert_eq!(mock.request_count(), 1, "the retry was sent");
    let rec = store.get(&id).await.unwrap().unwrap();
    assert_eq!(
        (rec.status, rec.owner_epoch, rec.delivered),
        (TaskStatus::Running, 1, false),
        "{rec:?}"
    );
}
