//! Bounded memory: what the runtime keeps of a task lives while it runs. Once many background
//! tasks have ended and been delivered, nothing of them stays in this process; the store
//! keeps them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::TurnExtension;
use cadre_subagents::{LiveRequest, Parent, SpawnRequest, SubagentContext, TaskStatus};
use common::*;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const TASKS: usize = 10_000;

#[tokio::test]
async fn ten_thousand_delivered_background_tasks_leave_the_local_map_empty() {
    let f = fixture(
        r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
text = "r"
"#,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(|c| {
                c.max_concurrent = 64;
                // No transcript files: memory is what this test is about.
                c.sessions_dir = None;
            }),
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
    for i in 0..TASKS {
        f.runtime
            .spawn(
                SpawnRequest {
                    agent: "worker".into(),
                    prompt: format!("job {i}"),
                    description: format!("job {i}"),
                    background: true,
                    isolation: None,
                    call_id: None,
                },
                &parent,
            )
            .await
            .unwrap();
    }
    tokio::time::timeout(Duration::from_secs(300), f.runtime.wait_idle())
        .await
        .expect("every task ended");
    assert_eq!(f.runtime.running_here(), 0, "no task entry is left");
    assert_eq!(f.runtime.sessions_here(), 0, "no session entry is left");
    // The parent is handed every result once; the store keeps them all.
    let ctx = SubagentContext::new(f.runtime.clone());
    let injected = ctx.take_injections(&run, &[]).await;
    let delivered: usize = injected
        .iter()
        .map(|m| match m {
            cadre_types::Message::User { content } => content.matches("<task id=").count(),
            _ => 0,
        })
        .sum();
    assert_eq!(delivered, TASKS);
    // Once the session holds them (the engine says so), they are marked delivered.
    ctx.recorded(&run).await;
    assert!(ctx.take_injections(&run, &[]).await.iter().all(|m| {
        !matches!(m, cadre_types::Message::User { content } if content.contains("<task id="))
    }));
    let stored = f.runtime.tasks_of(session.id()).await;
    assert_eq!(stored.len(), TASKS);
    assert!(stored.iter().all(|t| t.status == TaskStatus::Completed));
    assert_eq!(f.runtime.running_here(), 0);
    assert_eq!(f.runtime.live().sessions(), 0);
}

/// A reply may hold thousands of delegation calls at once (cadre-bench runs 10 000), all
/// waiting together: what each call's own future holds is paid that many times over, so it
/// stays small, whatever way through the tool the call takes.
/// What one waiting delegation call may hold in its own future: 1 024 bytes until a `task`
/// call could start its child in a team (the choice between the two boxed starts, and the
/// team's name, add 56 bytes: 1 080), 10 000 such calls hold 0.5 MiB more in all.
const CALL_BYTES: usize = 1088;
/// What the start of its child may hold besides (boxed by the call while the store's
/// writer creates the task, which is where a fan-out's calls all wait together).
const START_BYTES: usize = 1280;

#[tokio::test]
async fn a_waiting_delegation_call_holds_little() {
    let f = fixture(
        "",
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let ctx = tool_context(&f, f.session().id());
    let tools = f.runtime.delegation_tools();
    for (name, args) in [
        ("task_output", serde_json::json!({"task_id": "t"})),
        (
            "task",
            serde_json::json!({"description": "d", "prompt": "p", "subagent_type": "worker"}),
        ),
        (
            "agent_spawn",
            serde_json::json!({"agent": "worker", "message": "m"}),
        ),
    ] {
        let call = tools.get(name).expect(name).call(args, &ctx);
        let size = std::mem::size_of_val(&*call);
        // Each was 2.7-3.2 KB, every way's records and waits laid side by side; agent_spawn
        // still 1.2 KB with its wait for a reply beside its start.
        assert!(size <= CALL_BYTES, "a {name} call holds {size} bytes");
    }
    let parent = Parent::of_call(&ctx, f.runtime.top_inherited());
    let one_off = f.runtime.spawn(
        SpawnRequest {
            agent: "worker".into(),
            prompt: "p".into(),
            description: "d".into(),
            background: true,
            isolation: None,
            call_id: None,
        },
        &parent,
    );
    let live = f.runtime.spawn_live(
        LiveRequest {
            agent: "worker".into(),
            label: None,
            isolation: None,
            task: Some("m".into()),
            background: true,
        },
        &parent,
    );
    // 1.7 and 2.8 KB before: arguments kept twice, worktree steps and the child's build
    // laid out beside the create.
    for (what, size) in [
        ("a task's start", std::mem::size_of_val(&one_off)),
        ("a live child's start", std::mem::size_of_val(&live)),
    ] {
        assert!(size <= START_BYTES, "{what} holds {size} bytes");
    }
}
