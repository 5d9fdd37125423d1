//! Task state has one owner, the task store: what the store says is what every reader says,
//! even when the store's end is not the one the child reached.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_engine::TurnExtension;
use cadre_subagents::{SubagentContext, TaskStatus, Waited};
use cadre_tools::{Tool, ToolContext, ToolError, ToolOutput};
use cadre_types::ToolDefinition;
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// A tool that says it was reached, then returns once the test opens it.
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

const GATED: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "gate", args = {} }]
[[scripts.turns]]
text = "the answer"
"#;

#[tokio::test]
async fn a_task_the_sweeper_failed_reads_failed_everywhere() {
    let gate = Arc::new(Notify::new());
    let reached = Arc::new(Notify::new());
    let (for_cfg, reached_cfg) = (gate.clone(), reached.clone());
    let f = fixture(
        GATED,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(move |c| {
                c.base_tools = base_tools().with(Arc::new(Gate {
                    reached: reached_cfg,
                    open: for_cfg,
                }));
            }),
            ..Default::default()
        },
    );
    let session = f.session();
    let sid = session.id().to_string();
    let out = call(
        &f,
        &sid,
        "task",
        json!({"subagent_type": "worker", "prompt": "go", "background": true}),
    )
    .await;
    let id = out.content.split('"').nth(1).unwrap().to_string();
    // The child waits at the gate (a task swept before it ran would never run at all); the
    // store loses track of it (no heartbeat) and fails it.
    tokio::time::timeout(Duration::from_secs(10), reached.notified())
        .await
        .expect("the child reached the gate");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let swept = f.runtime.store().sweep(Duration::ZERO).await.unwrap();
        if swept.contains(&id) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never swept");
        tokio::task::yield_now().await;
    }
    // The child then finishes its job; the store's end stands.
    gate.notify_one();
    let ended = f
        .runtime
        .wait_for(
            &id,
            &CancellationToken::new(),
            Some(Duration::from_secs(10)),
        )
        .await;
    let Waited::Done(rec) = ended else {
        panic!("{ended:?}")
    };
    assert_eq!(rec.status, TaskStatus::Failed);
    tokio::time::timeout(Duration::from_secs(10), f.runtime.wait_idle())
        .await
        .unwrap();
    assert_eq!(f.rec.of("worker").len(), 2, "the child did finish its job");

    // The parent is told the same.
    let ctx = SubagentContext::new(f.runtime.clone());
    let run = f.run_context(&session);
    let injected = ctx.take_injections(&run, &[]).await;
    let delivered = delivered(&injected).into_iter().next().unwrap_or_default();
    assert!(
        delivered.contains("state=\"failed\"") && delivered.contains("executor lost"),
        "{injected:?}"
    );
    // And so do the tools.
    let listed = call(&f, &sid, "task_list", json!({})).await;
    assert_eq!(field(&listed, "status"), "failed", "{}", listed.content);
    let output = call(
        &f,
        &sid,
        "task_output",
        json!({"task_id": id, "block": false}),
    )
    .await;
    assert_eq!(field(&output, "status"), "failed", "{}", output.content);
    assert!(
        field(&output, "error").starts_with("executor lost"),
        "{}",
        output.content
    );
}

const WAITING_PARENT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
text = "waiting"
[[scripts.turns]]
text = "got: {{user}}"

[[scripts]]
agent = "worker"
[[scripts.turns]]
text = "the adopted answer"
"#;

/// A background task of `session` as another node (or process) would hold it: in the store,
/// running, not in this runtime; its id is `id` when given.
async fn running_elsewhere(
    f: &Fixture,
    session: &str,
    policy: cadre_store::OrphanPolicy,
    id: Option<&str>,
) -> String {
    let mut t = cadre_store::NewTask::new("worker", session, "go");
    if let Some(id) = id {
        t.id = id.to_string();
    }
    t.background = true;
    t.on_orphan = policy;
    let id = stored_running(f.runtime.store().as_ref(), t).await;
    assert!(!f.runtime.runs_here(&id));
    id
}

// A parent whose session has a background task another live node runs (`cadre run
// --resume` of a session whose child a `cadre serve` node took over) holds its run open
// until that task ends, and is then given its result, once. Time is paused: the parent
// looks through the store every second, and 30 s of looking pass at once.
#[tokio::test(start_paused = true)]
async fn a_parent_waits_for_its_background_task_that_another_node_runs() {
    let f = fixture(
        WAITING_PARENT,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let session = f.session();
    let id = running_elsewhere(&f, session.id(), cadre_store::OrphanPolicy::Fail, None).await;
    let run = f.spawn_run(session, "go");
    // Paused time: the requirement is that the parent keeps waiting, so 30 s of its
    // once-a-second looks through the store pass at once.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(f.rec.of("main").len(), 1);
    assert!(
        !run.is_finished(),
        "the parent ended while its task ran elsewhere"
    );

    // The other node finishes it.
    f.runtime
        .store()
        .transition(&id, cadre_store::Transition::completed("the remote answer"))
        .await
        .unwrap();
    let (out, session) = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the parent ended once its task did")
        .unwrap();
    assert_eq!(out.state, cadre_types::EndState::Completed, "{out:?}");
    assert!(out.output.contains("the remote answer"), "{}", out.output);
    let results = delivered(session.messages());
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].contains(&id));
    assert_eq!(f.rec.of("main").len(), 2);
    assert!(f.rec.of("worker").is_empty(), "nothing ran here");
}

// A task of the session whose owner is lost while the parent waits (its heartbeat older
// than the orphan timeout, zero here) and whose policy is `resume` is adopted by the
// waiting parent, runs here, and its result is delivered; its update marks the resume.
#[tokio::test]
async fn a_waiting_parent_adopts_its_lost_background_task() {
    let f = fixture(
        WAITING_PARENT,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(|c| c.orphan_timeout = Duration::ZERO),
            ..Default::default()
        },
    );
    let mut session = f.session();
    let id = running_elsewhere(&f, session.id(), cadre_store::OrphanPolicy::Resume, None).await;
    let out = tokio::time::timeout(Duration::from_secs(30), f.run_in(&mut session, "go"))
        .await
        .expect("the parent ended");
    assert_eq!(out.state, cadre_types::EndState::Completed, "{out:?}");
    assert!(out.output.contains("the adopted answer"), "{}", out.output);
    assert_eq!(delivered(session.messages()).len(), 1);
    assert_eq!(f.rec.of("worker").len(), 1, "run here once");
    let rec = f.runtime.task_record(&id).await.unwrap();
    assert_eq!((rec.status, rec.resumes), (TaskStatus::Completed, 1));
    let resumed: Vec<_> = f
        .events
        .updates()
        .into_iter()
        .filter(|u| u.kind == cadre_types::UpdateKind::Resumed)
        .collect();
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert_eq!(resumed[0].task_id.as_deref(), Some(id.as_str()));
    assert!(
        resumed[0]
            .text
            .starts_with("resumed on node test after node test was lost"),
        "{}",
        resumed[0].text
    );
}

const ASKS_FOR_OUTPUT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task_output", args = { task_id = "task_elsewhere", timeout = 600000 } }]
[[scripts.turns]]
text = "got: {{tool_results}}"
"#;

// `task_output` of a task another node runs waits through the store and gets its result;
// that counts as its delivery, so the parent's next turn is not given it again and the run
// does not wait for it.
#[tokio::test(start_paused = true)]
async fn task_output_of_a_task_another_node_runs_is_its_one_delivery() {
    let f = fixture(
        ASKS_FOR_OUTPUT,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let session = f.session();
    let id = running_elsewhere(
        &f,
        session.id(),
        cadre_store::OrphanPolicy::Fail,
        Some("task_elsewhere"),
    )
    .await;
    let run = f.spawn_run(session, "go");
    // Paused time: the requirement is that the parent keeps waiting, so 30 s of its
    // once-a-second looks through the store pass at once.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(!run.is_finished(), "task_output did not wait");
    f.runtime
        .store()
        .transition(&id, cadre_store::Transition::completed("the remote answer"))
        .await
        .unwrap();
    let (out, session) = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the parent ended")
        .unwrap();
    assert!(
        out.output.starts_with("got: ") && out.output.contains("the remote answer"),
        "{}",
        out.output
    );
    assert!(delivered(session.messages()).is_empty(), "delivered twice");
    assert_eq!(f.rec.of("main").len(), 2);
    assert!(f.runtime.task_record(&id).await.unwrap().delivered);
}

// A task of the session that nothing will end: its owner is silent past the orphan timeout
// (zero here), it is a remote agent's (no sweeper fails those, and only its owner's node
// takes it up again) so it cannot be adopted here. The parent does not wait for it.
#[tokio::test(start_paused = true)]
async fn a_parent_does_not_wait_for_a_lost_task_nothing_here_can_take_up() {
    let f = fixture(
        WAITING_PARENT,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(|c| c.orphan_timeout = Duration::ZERO),
            ..Default::default()
        },
    );
    let session = f.session();
    let mut t = cadre_store::NewTask::new("worker", session.id(), "go");
    t.background = true;
    t.transport = cadre_store::Transport::Remote {
        url: "http://127.0.0.1:9/".into(),
    };
    let id = stored_running(f.runtime.store().as_ref(), t).await;
    let (out, _) = tokio::time::timeout(Duration::from_secs(30), f.spawn_run(session, "go"))
        .await
        .expect("the parent waited for a task nothing will end")
        .unwrap();
    assert_eq!(out.output, "waiting");
    assert_eq!(f.rec.of("main").len(), 1);
    let rec = f.runtime.task_record(&id).await.unwrap();
    assert_eq!(rec.status, TaskStatus::Running, "left to its owner's node");
}
