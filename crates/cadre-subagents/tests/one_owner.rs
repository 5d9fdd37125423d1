//! Task state has one owner, the task store: what the store says is what every reader says,
//! even when the store's end is not the one the child reached.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_engine::TurnExtension;
use cadre_subagents::{SubagentContext, TaskStatus, Waited};
use cadre_tools::{Tool, ToolContext, ToolError, ToolOutput};
use cadre_types::{Message, ToolDefinition};
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
    let delivered = injected
        .iter()
        .find_map(|m| match m {
            Message::User { content } if content.starts_with("<background-task-results>") => {
                Some(content.clone())
            }
            _ => None,
        })
        .unwrap_or_default();
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
