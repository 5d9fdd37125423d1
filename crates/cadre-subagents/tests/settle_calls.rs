//! The sub-agent layer's answer for a parent's call that a lost run left without a result:
//! a `task` call is found by its call id in the store and answered with its child's end
//! (foreground, waited for) or as it answered (background); `agent_spawn` and `agent_send`,
//! read-only for the policy, are never run again; calls it knows nothing of are the engine's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::{Settled, TurnExtension};
use cadre_subagents::{Parent, SpawnRequest, SubagentContext};
use cadre_types::ToolCall;
use common::*;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: "{}".into(),
    }
}

#[tokio::test]
async fn an_interrupted_task_call_gets_its_recorded_childs_end_and_never_a_second_child() {
    let f = fixture(
        "[[scripts]]\nagent = \"worker\"\n[[scripts.turns]]\ntext = \"the worker's answer\"\n",
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let session = f.session();
    let run = f.run_context(&session);
    let parent = Parent {
        run: run.clone(),
        cancel: CancellationToken::new(),
        tools: Arc::new(f.parent.config().tools.clone()),
        inherited: f.runtime.top_inherited().clone(),
        root: f.ws.clone(),
    };
    let spawn = |id: &str, background: bool| SpawnRequest {
        agent: "worker".into(),
        prompt: "job".into(),
        description: "job".into(),
        background,
        isolation: None,
        call_id: Some(id.into()),
    };
    let fg = f
        .runtime
        .spawn(spawn("c-fg", false), &parent)
        .await
        .unwrap();
    let bg = f.runtime.spawn(spawn("c-bg", true), &parent).await.unwrap();
    let ext = SubagentContext::new(f.runtime.clone());
    let cancel = CancellationToken::new();

    let Some(Settled::Known(out)) = ext.settle_call(&run, &call("c-fg", "task"), &cancel).await
    else {
        panic!("the foreground call is settled by its child");
    };
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.starts_with("<task state=\"completed\"")
            && out.content.contains("the worker's answer"),
        "{}",
        out.content
    );
    let Some(Settled::Known(out)) = ext.settle_call(&run, &call("c-bg", "task"), &cancel).await
    else {
        panic!("the background call is settled by its child");
    };
    assert_eq!(
        out.content,
        format!("<task id=\"{}\" state=\"running\"/>", bg.task_id)
    );
    // Each call's task holds its id; nothing new was started.
    let tasks = f
        .runtime
        .store()
        .list_by_session(&run.session_id)
        .await
        .unwrap();
    assert_eq!(tasks.len(), 2);
    let of = |id: &str| {
        tasks
            .iter()
            .find(|t| t.id == id)
            .unwrap()
            .parent_call_id
            .clone()
    };
    assert_eq!(of(&fg.task_id).as_deref(), Some("c-fg"));
    assert_eq!(of(&bg.task_id).as_deref(), Some("c-bg"));

    // A task call that never reached the store, and a plain tool: the engine decides.
    assert!(
        ext.settle_call(&run, &call("c-none", "task"), &cancel)
            .await
            .is_none()
    );
    assert!(
        ext.settle_call(&run, &call("c-x", "bash"), &cancel)
            .await
            .is_none()
    );
    // Live-child calls may have acted: never run again.
    for name in ["agent_spawn", "agent_send"] {
        assert!(matches!(
            ext.settle_call(&run, &call("c-live", name), &cancel).await,
            Some(Settled::OutcomeUnknown)
        ));
    }
}
