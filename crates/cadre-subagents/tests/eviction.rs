//! Bounded memory: what the runtime keeps of a task lives while it runs. Once many background
//! tasks have ended and been delivered, nothing of them stays in this process; the store
//! keeps them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::TurnExtension;
use cadre_subagents::{Parent, SpawnRequest, SubagentContext, TaskStatus};
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
    assert!(ctx.take_injections(&run, &[]).await.iter().all(|m| {
        !matches!(m, cadre_types::Message::User { content } if content.contains("<task id="))
    }));
    let stored = f.runtime.tasks_of(session.id()).await;
    assert_eq!(stored.len(), TASKS);
    assert!(stored.iter().all(|t| t.status == TaskStatus::Completed));
    assert_eq!(f.runtime.running_here(), 0);
    assert_eq!(f.runtime.live().sessions(), 0);
}
