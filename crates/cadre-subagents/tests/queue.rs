//! Children queued for a slot: built only when the slot is granted, and a child that cannot
//! be built then ends as a failed task that says why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::Agent;
use cadre_subagents::{AgentDefinition, AgentFactory, TaskStatus};
use cadre_types::EndState;
use common::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const THREE_QUEUED: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [
  { name = "task", args = { subagent_type = "counted", prompt = "one" } },
  { name = "task", args = { subagent_type = "counted", prompt = "two" } },
  { name = "task", args = { subagent_type = "counted", prompt = "three" } },
]
[[scripts.turns]]
text = "{{tool_results}}"

[[scripts]]
agent = "counted"
[[scripts.turns]]
delay_ms = 300
text = "counted reply"
"#;

fn counting_factory(builds: Arc<Mutex<Vec<Instant>>>) -> AgentFactory {
    Arc::new(move |input| {
        builds.lock().unwrap().push(Instant::now());
        Ok(Agent::builder("counted", input.model.clone())
            .system_prompt(input.system_prompt.clone())
            .tools(input.tools.clone())
            .build())
    })
}

fn factory_def(name: &str, factory: AgentFactory) -> AgentDefinition {
    let mut d = worker(name);
    d.factory = Some(factory);
    d
}

#[tokio::test]
async fn a_queued_child_is_built_when_its_slot_is_granted() {
    let builds = Arc::new(Mutex::new(Vec::new()));
    let f = fixture(
        THREE_QUEUED,
        Options {
            defs: vec![factory_def("counted", counting_factory(builds.clone()))],
            tweak: Box::new(|cfg| cfg.max_concurrent = 1),
            ..Default::default()
        },
    );
    let (out, _) = f.run("go").await;
    assert_eq!(out.state, EndState::Completed);
    assert_eq!(
        out.output.matches("counted reply").count(),
        3,
        "{}",
        out.output
    );
    let builds = builds.lock().unwrap().clone();
    assert_eq!(builds.len(), 3);
    // One slot: each child was built only after the one before it had run its 300 ms.
    for pair in builds.windows(2) {
        assert!(
            pair[1].duration_since(pair[0]) >= Duration::from_millis(250),
            "children were built before they had a slot: {builds:?}"
        );
    }
}

const BROKEN: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "broken", description = "doomed", prompt = "try" } }]
[[scripts.turns]]
text = "{{tool_results}}"
"#;

#[tokio::test]
async fn a_child_that_cannot_be_built_ends_as_a_failed_task_that_says_why() {
    let failing: AgentFactory = Arc::new(|_| Err("no GPU on this node".into()));
    let f = fixture(
        BROKEN,
        Options {
            defs: vec![factory_def("broken", failing)],
            ..Default::default()
        },
    );
    let (out, s) = f.run("go").await;
    assert_eq!(out.state, EndState::Completed);
    let results = tool_results(s.messages());
    assert_eq!(results.len(), 1);
    let (text, is_error) = &results[0];
    assert!(is_error);
    assert!(
        text.starts_with("<task state=\"failed\" complete=\"false\" reason=\"error\"><error>agent broken: factory failed: no GPU on this node</error>"),
        "{text}"
    );
    let tasks = f.runtime.tasks_of(s.id()).await;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].status, TaskStatus::Failed);
    assert_eq!(tasks[0].description, "doomed");
    assert_eq!(tasks[0].end_state.as_deref(), Some("failed"));
    // The parent's event stream says so too.
    assert!(f.events.updates().iter().any(
        |u| u.kind == cadre_types::UpdateKind::Error && u.text.contains("no GPU on this node")
    ));
}

#[tokio::test]
async fn the_store_records_a_child_that_could_not_be_built_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let store: Arc<dyn cadre_store::TaskStore> = Arc::new(
        cadre_store::open(&url, cadre_store::NodeId::new("n1"))
            .await
            .unwrap(),
    );
    let failing: AgentFactory = Arc::new(|_| Err("no GPU on this node".into()));
    let for_cfg = store.clone();
    let f = fixture(
        BROKEN,
        Options {
            defs: vec![factory_def("broken", failing)],
            tweak: Box::new(move |cfg| cfg.store = for_cfg),
            ..Default::default()
        },
    );
    let (out, s) = f.run("go").await;
    assert_eq!(out.state, EndState::Completed);
    let records = store.list_by_session(s.id()).await.unwrap();
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!(r.status, cadre_store::TaskStatus::Failed);
    assert_eq!(r.end_state.as_deref(), Some("failed"));
    assert!(
        r.error
            .as_deref()
            .is_some_and(|e| e.contains("factory failed: no GPU on this node")),
        "{r:?}"
    );
}

const DELEGATES: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "lead", prompt = "lead it" } }]
[[scripts.turns]]
text = "{{tool_results}}"

[[scripts]]
agent = "lead"
[[scripts.turns]]
text = "led"
"#;

#[tokio::test]
async fn the_runtime_is_freed_after_a_delegating_child_ran() {
    let mut lead = worker("lead");
    lead.can_delegate = true;
    let f = fixture(
        DELEGATES,
        Options {
            defs: vec![lead],
            ..Default::default()
        },
    );
    let (out, _) = f.run("go").await;
    assert!(out.output.contains("led"), "{}", out.output);
    let weak = Arc::downgrade(&f.runtime);
    drop(f);
    // The child's task has ended; its tokio task is dropped soon after.
    cadre_testkit::eventually(
        "the runtime to be freed (else a reference cycle through a built agent)",
        Duration::from_millis(500),
        || {
            let freed = weak.upgrade().is_none();
            async move { freed }
        },
    )
    .await;
}

#[tokio::test]
async fn a_factory_that_panics_fails_its_task_instead_of_hanging() {
    let panicking: AgentFactory = Arc::new(|_| panic!("factory bug"));
    let f = fixture(
        BROKEN,
        Options {
            defs: vec![factory_def("broken", panicking)],
            ..Default::default()
        },
    );
    let (out, s) = tokio::time::timeout(Duration::from_secs(10), f.run("go"))
        .await
        .expect("the run ended");
    assert_eq!(out.state, EndState::Completed);
    let results = tool_results(s.messages());
    assert!(
        results[0]
            .0
            .contains("agent broken: building the sub-agent panicked"),
        "{results:?}"
    );
}
