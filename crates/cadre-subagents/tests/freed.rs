//! No reference cycle keeps a runtime alive: a child that may delegate holds delegation
//! tools, the runtime holds the child (built for `task`, live for `agent_spawn`), and the
//! tools reach the runtime without owning it. Dropping the runtime's owner frees it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;
use std::sync::Arc;

const LEAD: &str = r#"
[[scripts]]
agent = "lead"
[[scripts.turns]]
text = "done"
"#;

/// `lead` may delegate: its child agent gets the delegation tools.
fn lead_fixture(script: &str) -> Fixture {
    let mut lead = worker("lead");
    lead.can_delegate = true;
    fixture(
        script,
        Options {
            defs: vec![lead, worker("worker")],
            ..Default::default()
        },
    )
}

/// Drop everything the test owns of the runtime; true when nothing else kept it.
fn freed(f: Fixture) -> bool {
    let weak = Arc::downgrade(&f.runtime);
    drop(f);
    weak.upgrade().is_none()
}

#[tokio::test]
async fn a_runtime_with_a_delegating_child_of_task_is_freed() {
    let f = lead_fixture(LEAD);
    let sid = f.session().id().to_string();
    let out = call(
        &f,
        &sid,
        "task",
        json!({"subagent_type": "lead", "prompt": "go"}),
    )
    .await;
    assert!(out.content.contains("done"), "{}", out.content);
    let tools = f.runtime.delegation_tools();
    let ctx = tool_context(&f, &sid);
    assert!(freed(f), "the runtime outlived its owner");
    // A tool that outlives its runtime says so instead of acting.
    let err = tools
        .get("task")
        .unwrap()
        .call(json!({"subagent_type": "lead", "prompt": "go"}), &ctx)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("shut down"), "{err}");
}

#[tokio::test]
async fn a_runtime_with_a_delegating_live_child_of_agent_spawn_is_freed() {
    let f = lead_fixture(LEAD);
    let sid = f.session().id().to_string();
    let out = call(
        &f,
        &sid,
        "agent_spawn",
        json!({"agent_id": "lead", "label": "L", "task": "go"}),
    )
    .await;
    assert!(out.content.contains("done"), "{}", out.content);
    assert_eq!(f.runtime.live().list(&sid).len(), 1, "the child lives on");
    assert!(freed(f), "the runtime outlived its owner");
}

#[tokio::test]
async fn what_a_one_off_child_spawned_goes_when_its_task_ends() {
    let f = lead_fixture(
        r#"
[[scripts]]
agent = "lead"
[[scripts.turns]]
tool_calls = [{ name = "agent_spawn", args = { agent_id = "worker", label = "W", task = "hi" } }]
[[scripts.turns]]
text = "done"

[[scripts]]
agent = "worker"
[[scripts.turns]]
text = "hello"
"#,
    );
    let sid = f.session().id().to_string();
    let out = call(
        &f,
        &sid,
        "task",
        json!({"subagent_type": "lead", "prompt": "go"}),
    )
    .await;
    assert!(out.content.contains("done"), "{}", out.content);
    let spawned = &f.rec.of("worker");
    assert_eq!(spawned.len(), 1, "the lead spawned its worker");
    tokio::time::timeout(std::time::Duration::from_secs(10), f.runtime.wait_idle())
        .await
        .unwrap();
    assert_eq!(f.runtime.live().sessions(), 0, "the lead's session is over");
}
