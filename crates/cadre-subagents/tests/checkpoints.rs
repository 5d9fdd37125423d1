//! Checkpoints through the runtime: with `checkpoints` on, a child's conversation is in the
//! task store at every turn boundary (the reply that asks for a tool call is stored before
//! the call runs; its result before the next model call), appended rather than rewritten,
//! with large outputs as the offload's reference; and gone once the task ends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_store::{NodeId, TaskStatus, TaskStore};
use cadre_tools::{Tool, ToolContext, ToolError, ToolOutput};
use cadre_types::{Message, ToolDefinition};
use common::*;
use serde_json::json;
use std::sync::Arc;

/// `peek`: what the store's checkpoint of the calling task holds, one line per message
/// (`user`, `assistant+N calls`, `tool:<len>:<names an offload file>:<first line head>`).
struct Peek(Arc<dyn TaskStore>);

#[async_trait]
impl Tool for Peek {
    fn name(&self) -> &str {
        "peek"
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "peek".into(),
            description: "test".into(),
            parameters: json!({"type":"object","properties":{}}),
        }
    }
    fn is_read_only(&self) -> bool {
        true
    }
    async fn call(&self, _: serde_json::Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let id = ctx.run.task_id.clone().unwrap_or_default();
        let Some(cp) = self.0.read_checkpoint(&id).await.unwrap() else {
            return Ok(ToolOutput::ok("none"));
        };
        let lines: Vec<String> = cp
            .messages
            .iter()
            .map(|m| match m {
                Message::User { .. } => "user".to_string(),
                Message::Assistant { tool_calls, .. } => format!("assistant+{}", tool_calls.len()),
                Message::Tool { content, .. } => {
                    let head: String = content
                        .lines()
                        .next()
                        .unwrap_or("")
                        .chars()
                        .take(40)
                        .collect();
                    let offloaded = content.contains(".cadre/tool-outputs/");
                    format!("tool:{}:{offloaded}:{head}", content.len())
                }
                _ => "other".to_string(),
            })
            .collect();
        Ok(ToolOutput::ok(format!(
            "gen {} usage {}\n{}",
            cp.generation,
            cp.usage.total(),
            lines.join("\n")
        )))
    }
}

const SCRIPT: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "peek", args = {} }]
[[scripts.turns]]
tool_calls = [{ name = "echo", args = { text = "{{big}}" } }]
[[scripts.turns]]
tool_calls = [{ name = "peek", args = {} }]
[[scripts.turns]]
text = "finished"
"#;

/// Run one worker task through a SQLite store; the child's requests and the task record.
async fn run_worker(
    checkpoints: bool,
) -> (Vec<cadre_llm::ModelRequest>, Arc<dyn TaskStore>, String) {
    let db = tempfile::tempdir().unwrap();
    let store: Arc<dyn TaskStore> = Arc::new(
        cadre_store::open_sqlite(&db.path().join("cadre.db"), NodeId::new("n"))
            .await
            .unwrap(),
    );
    let script = SCRIPT.replace("{{big}}", &"x".repeat(6000));
    let peek_store = store.clone();
    let f = fixture(
        &script,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(move |c| {
                c.store = peek_store.clone();
                c.base_tools.register(Arc::new(Peek(peek_store)));
                c.offload_threshold = 1000;
                c.checkpoints = checkpoints;
            }),
            ..Default::default()
        },
    );
    let spawned = call(
        &f,
        "s-parent",
        "agent_spawn",
        json!({"agent_id": "worker", "task": "go", "timeout_seconds": 0}),
    )
    .await;
    let id = field(&spawned, "task_id");
    let out = call(
        &f,
        "s-parent",
        "task_output",
        json!({"task_id": id, "timeout": 10000}),
    )
    .await;
    assert_eq!(field(&out, "status"), "completed", "{}", out.content);
    let rec = store.get(&id).await.unwrap().unwrap();
    assert_eq!(rec.status, TaskStatus::Completed);
    (f.rec.of("worker"), store, id)
}

/// The content of the `n`th tool result the child's last request carried.
fn tool_result(requests: &[cadre_llm::ModelRequest], n: usize) -> String {
    let last = requests.last().unwrap();
    last.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .nth(n)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_turn_boundary_is_in_the_store() {
    let (requests, store, id) = run_worker(true).await;
    assert_eq!(requests.len(), 4);
    // The first call sees the prompt and the reply asking for it: stored before it ran.
    assert_eq!(
        tool_result(&requests, 0)
            .lines()
            .skip(1)
            .collect::<Vec<_>>(),
        ["user", "assistant+1"]
    );
    let first = tool_result(&requests, 0);
    assert!(first.starts_with("gen 0 usage "), "{first}");
    // The third sees every earlier result, the big one as the offload's reference.
    let third = tool_result(&requests, 2);
    let lines: Vec<&str> = third.lines().skip(1).collect();
    assert_eq!(lines.len(), 6, "{third}");
    assert_eq!(
        &lines[..4],
        ["user", "assistant+1", lines[2], "assistant+1"]
    );
    assert!(lines[2].starts_with("tool:"), "{third}");
    assert!(lines[4].starts_with("tool:"), "{third}");
    let big: usize = lines[4].split(':').nth(1).unwrap().parse().unwrap();
    assert!(
        big < 6000,
        "the 6000-byte output is referenced, not copied: {third}"
    );
    assert!(
        lines[4].contains(":true:[echo output was 6005 bytes"),
        "{third}"
    );
    assert!(lines[2].contains(":false:"), "{third}");
    assert_eq!(lines[5], "assistant+1");
    // Usage goes with the checkpoint.
    let usage: u64 = third
        .lines()
        .next()
        .unwrap()
        .split(' ')
        .nth(3)
        .unwrap()
        .parse()
        .unwrap();
    assert!(usage > 0, "{third}");
    // The task ended: its checkpoint went with it.
    assert_eq!(store.read_checkpoint(&id).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_checkpoints_nothing_is_stored() {
    let (requests, _, _) = run_worker(false).await;
    assert_eq!(tool_result(&requests, 0), "none");
}

const DEEP_SCRIPT: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "agent_spawn", args = { agent_id = "worker", task = "deeper" } }]
[[scripts.turns]]
text = "done at the cap"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_orphan_at_the_depth_cap_gets_no_delegation_tools() {
    let db = tempfile::tempdir().unwrap();
    let path = db.path().join("cadre.db");
    let store: Arc<dyn TaskStore> = Arc::new(
        cadre_store::open_sqlite(&path, NodeId::new("adopter"))
            .await
            .unwrap(),
    );
    // The lost node's record: a delegating worker that ran at the cap (2).
    let lost = cadre_store::open_sqlite(&path, NodeId::new("lost"))
        .await
        .unwrap();
    let mut t = cadre_store::NewTask::new("worker", "s-parent", "go");
    t.on_orphan = cadre_store::OrphanPolicy::Resume;
    t.background = true;
    t.depth = 2;
    let id = t.id.clone();
    lost.create(&t).await.unwrap();
    lost.transition(&id, cadre_store::Transition::running())
        .await
        .unwrap();
    assert_eq!(store.get(&id).await.unwrap().unwrap().depth, Some(2));

    let mut def = worker("worker");
    def.can_delegate = true;
    let s = store.clone();
    let f = fixture(
        DEEP_SCRIPT,
        Options {
            defs: vec![def],
            tweak: Box::new(move |c| {
                c.store = s;
                c.max_depth = 2;
            }),
            ..Default::default()
        },
    );
    let parent = f.runtime.top_level_parent(
        f.run_context(&f.session()),
        tokio_util::sync::CancellationToken::new(),
    );
    // An orphan is one whose last sign of life is older than the timeout (zero here): the
    // clock has to move past its creation first.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let adopted = f
            .runtime
            .adopt_orphans(&parent, std::time::Duration::ZERO)
            .await;
        if adopted == [id.clone()] {
            break;
        }
        assert!(adopted.is_empty(), "{adopted:?}");
        assert!(std::time::Instant::now() < deadline, "never adopted");
        tokio::task::yield_now().await;
    }
    let done = store
        .wait_terminal(&id, std::time::Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the adopted task ended");
    assert_eq!(done.status, TaskStatus::Completed, "{done:?}");
    assert_eq!(done.result.as_deref(), Some("done at the cap"));
    let requests = f.rec.of("worker");
    assert_eq!(requests.len(), 2, "one child, no grandchild");
    for name in cadre_subagents::DELEGATION_TOOLS {
        assert!(
            !requests[0].tools.iter().any(|t| t.name == *name),
            "{name} offered at the cap"
        );
    }
    let results = tool_results(&requests[1].messages);
    assert_eq!(
        results,
        [("maximum spawn depth exceeded (max=2)".to_string(), true)]
    );
}
