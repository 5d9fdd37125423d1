//! The lifecycle tools (`agent_spawn`, `agent_send`, `agent_list`, `task_output`,
//! `task_cancel`, `task_list`) over the one runtime: reply formats, live children, waiting,
//! cancellation, timeout promotion and the concurrency cap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_subagents::TaskStatus;
use cadre_tools::{ToolContext, ToolOutput, Workspace};
use cadre_types::Message;
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

struct Caller<'a> {
    f: &'a Fixture,
    ctx: ToolContext,
}

impl<'a> Caller<'a> {
    fn new(f: &'a Fixture) -> Self {
        let s = f.session();
        Self {
            f,
            ctx: ToolContext {
                hidden: Default::default(),
                call_id: "call".into(),
                tools: Arc::new(f.parent.config().tools.clone()),
                workspace: Arc::new(Workspace::new(&f.ws).unwrap()),
                cancel: f.cancel.clone(),
                run: f.run_context(&s),
            },
        }
    }

    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        let tools = self.f.runtime.delegation_tools();
        let t = tools.get(tool).unwrap_or_else(|| panic!("no tool {tool}"));
        match t.call(args, &self.ctx).await {
            Ok(o) => o,
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

fn field<'a>(out: &'a ToolOutput, key: &str) -> &'a str {
    out.content
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in:\n{}", out.content))
}

const WORKER: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
text = "first reply to {{user}}"
[[scripts.turns]]
text = "second reply to {{user}}"

[[scripts]]
agent = "slow"
[[scripts.turns]]
delay_ms = 1500
text = "slow reply"
"#;

fn lifecycle_fixture() -> Fixture {
    fixture(
        WORKER,
        Options {
            defs: vec![worker("worker"), worker("slow")],
            ..Default::default()
        },
    )
}

#[tokio::test]
async fn spawn_reply_formats_and_errors() {
    let f = lifecycle_fixture();
    let c = Caller::new(&f);

    let idle = c
        .call("agent_spawn", json!({"agent_id": "worker", "label": "W1"}))
        .await;
    assert!(!idle.is_error);
    let lines: Vec<&str> = idle.content.lines().collect();
    assert!(
        lines[0].starts_with("agent_key: agent:worker:"),
        "{lines:?}"
    );
    assert_eq!(lines[1], "agent_id: worker");
    assert!(lines[2].starts_with("session_id: sub-"));
    assert_eq!(lines[3], "status: accepted");
    assert_eq!(lines.len(), 4);

    let ok = c
        .call(
            "agent_spawn",
            json!({"agent_id": "worker", "task": "hello"}),
        )
        .await;
    assert_eq!(field(&ok, "status"), "ok");
    assert_eq!(field(&ok, "reply"), "first reply to hello");

    let bg = c
        .call(
            "agent_spawn",
            json!({"agent_id": "worker", "task": "bg", "timeout_seconds": 0}),
        )
        .await;
    assert_eq!(field(&bg, "status"), "accepted");
    assert!(field(&bg, "task_id").starts_with("task_"));
    assert!(field(&bg, "hint").contains("background"));

    let cases = [
        (
            json!({"agent_id": "nobody"}),
            "Error: Unknown agent_id: nobody",
        ),
        (
            json!({"agent_id": "worker", "label": "w1"}),
            "Error: Label already in use: w1",
        ),
    ];
    for (args, want) in cases {
        let out = c.call("agent_spawn", args).await;
        assert!(out.is_error);
        assert_eq!(out.content, want);
    }
}

#[tokio::test]
async fn the_depth_error_is_a_flagged_tool_error() {
    let f = lifecycle_fixture();
    let mut c = Caller::new(&f);
    let mut run = (*c.ctx.run).clone();
    run.depth = 3;
    c.ctx.run = Arc::new(run);
    let out = c
        .call("agent_spawn", json!({"agent_id": "worker", "task": "x"}))
        .await;
    assert!(out.is_error);
    assert_eq!(out.content, "Error: maximum spawn depth exceeded (max=3)");
}

#[tokio::test]
async fn agent_send_continues_the_same_child_with_its_history() {
    let f = lifecycle_fixture();
    let c = Caller::new(&f);
    let spawned = c
        .call(
            "agent_spawn",
            json!({"agent_id": "worker", "label": "helper", "task": "one"}),
        )
        .await;
    let key = field(&spawned, "agent_key").to_string();
    let by_label = c
        .call("agent_send", json!({"label": "HELPER", "message": "two"}))
        .await;
    assert_eq!(field(&by_label, "reply"), "second reply to two");
    assert_eq!(field(&by_label, "agent_key"), key);
    let reqs = f.rec.of("worker");
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].metadata.session_id, reqs[1].metadata.session_id);
    assert_eq!(
        reqs[1].messages,
        vec![
            Message::user("one"),
            Message::assistant("first reply to one"),
            Message::user("two")
        ]
    );
    for (args, want) in [
        (json!({"message": "x"}), "Error: give agent_key or label"),
        (
            json!({"agent_key": key, "label": "helper", "message": "x"}),
            "Error: give either agent_key or label, not both",
        ),
        (
            json!({"agent_key": "agent:worker:nope", "message": "x"}),
            "Error: Unknown agent_key: agent:worker:nope (use the full agent_key returned by agent_spawn)",
        ),
        (
            json!({"label": "ghost", "message": "x"}),
            "Error: Unknown label: ghost",
        ),
    ] {
        let out = c.call("agent_send", args).await;
        assert!(out.is_error);
        assert_eq!(out.content, want);
    }
    let list = c.call("agent_list", json!({})).await;
    assert!(list.content.starts_with("agents: 1\n"), "{}", list.content);
    assert!(list.content.contains(&format!("agent_key: {key}")));
    assert!(list.content.contains("label: helper"));
    assert!(list.content.contains("depth: 1"));
    assert!(list.content.contains("state: idle (last task completed)"));
}

#[tokio::test]
async fn task_output_blocks_polls_and_times_out_without_failing_the_task() {
    let f = lifecycle_fixture();
    let c = Caller::new(&f);
    let bg = c
        .call(
            "agent_spawn",
            json!({"agent_id": "slow", "task": "go", "timeout_seconds": 0}),
        )
        .await;
    let id = field(&bg, "task_id").to_string();

    let poll = c
        .call("task_output", json!({"task_id": id, "block": false}))
        .await;
    assert!(["running", "pending"].contains(&field(&poll, "status")));
    assert_eq!(field(&poll, "note"), "still running");

    let short = c
        .call("task_output", json!({"task_id": id, "timeout": 100}))
        .await;
    assert!(!short.is_error);
    assert_eq!(
        field(&short, "note"),
        "timed out waiting after 100 ms; the task is still running"
    );
    // A running task shows what it has done so far.
    assert!(
        short
            .content
            .contains("\nrecent progress:\n  started: go\n"),
        "{}",
        short.content
    );

    let done = c.call("task_output", json!({"task_id": id})).await;
    assert_eq!(field(&done, "status"), "completed");
    assert_eq!(field(&done, "result"), "slow reply");
    assert_eq!(field(&done, "complete"), "true");
    assert!(field(&done, "created_at").ends_with('Z'));

    let unknown = c.call("task_output", json!({"task_id": "task_nope"})).await;
    assert!(unknown.is_error);
    assert_eq!(unknown.content, "Error: Unknown task_id: task_nope");

    let list = c
        .call("task_list", json!({"status_filter": "completed"}))
        .await;
    assert!(
        list.content
            .starts_with("tasks: 1 (status_filter: completed)"),
        "{}",
        list.content
    );
    let none = c
        .call("task_list", json!({"status_filter": "running"}))
        .await;
    assert!(none.content.starts_with("tasks: 0"));
    let bad = c
        .call("task_list", json!({"status_filter": "sideways"}))
        .await;
    assert!(bad.is_error);
}

#[tokio::test]
async fn task_cancel_stops_a_child_stuck_in_a_slow_model_call() {
    let f = lifecycle_fixture();
    let c = Caller::new(&f);
    let bg = c
        .call(
            "agent_spawn",
            json!({"agent_id": "slow", "task": "go", "timeout_seconds": 0}),
        )
        .await;
    let id = field(&bg, "task_id").to_string();
    // Wait until the child's model call is in flight.
    let started = Instant::now();
    cadre_testkit::eventually("the child's model call", Duration::from_secs(5), || async {
        !f.rec.of("slow").is_empty()
    })
    .await;
    let out = c.call("task_cancel", json!({"task_id": id})).await;
    assert_eq!(field(&out, "status"), "cancelled");
    assert_eq!(field(&out, "note"), "the sub-agent was stopped");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "it did not wait for the slow reply"
    );
    assert_eq!(f.rec.max_in_flight.load(Ordering::SeqCst), 1);
    // The slow call is dropped, not answered: it ends before its 1.5 s reply could have
    // come, so the child had nothing to make a further call from.
    cadre_testkit::eventually(
        "the slow call to be dropped",
        Duration::from_secs(1),
        || async { f.rec.in_flight() == 0 },
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "the slow call was answered, not dropped"
    );
    assert_eq!(
        f.rec.of("slow").len(),
        1,
        "no further model call from the child"
    );
    assert_eq!(
        f.runtime.task_record(&id).await.unwrap().status,
        TaskStatus::Cancelled
    );
    let again = c.call("task_cancel", json!({"task_id": id})).await;
    assert_eq!(
        field(&again, "note"),
        "the task had already finished; nothing to cancel"
    );
}

#[tokio::test]
async fn a_synchronous_spawn_that_times_out_is_promoted_and_delivered_once() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "agent_spawn", args = { agent_id = "slow", task = "take your time", timeout_seconds = 1 } }]
        [[scripts.turns]]
        text = "promoted"
        [[scripts.turns]]
        text = "{{user}}"
        [[scripts]]
        agent = "slow"
        [[scripts.turns]]
        delay_ms = 2500
        text = "finally done"
        "#,
        Options {
            defs: vec![worker("slow")],
            ..Default::default()
        },
    );
    let (out, s) = f.run("go").await;
    let first = tool_results(s.messages());
    assert!(
        first[0].0.contains("status: running\ntask_id: task_"),
        "{}",
        first[0].0
    );
    assert!(first[0].0.contains("no reply within 1s"));
    assert!(out.output.contains("finally done"), "{}", out.output);
    assert_eq!(f.rec.of("slow").len(), 1, "one run, not a rerun");
    let deliveries = s
        .messages()
        .iter()
        .filter(|m| matches!(m, Message::User { content } if content.contains("finally done")))
        .count();
    assert_eq!(deliveries, 1);
}

#[tokio::test]
async fn the_concurrency_cap_queues_extra_children() {
    let calls: Vec<String> = (0..40)
        .map(|i| format!("{{ name = \"agent_spawn\", args = {{ agent_id = \"worker\", task = \"t{i}\", timeout_seconds = 0 }} }}"))
        .collect();
    let script = format!(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{}]
        [[scripts.turns]]
        text = "waiting"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        delay_ms = 30
        text = "ok"
        "#,
        calls.join(", ")
    );
    let f = fixture(
        &script,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(|c| c.max_concurrent = 4),
            ..Default::default()
        },
    );
    let mut s = f.session();
    // The parent holds open while tasks run; each round of deliveries gives it a turn, and the
    // script has only two, so it may end failing once the script runs out: count the tasks.
    let _ = f.run_in(&mut s, "go").await;
    let tasks = f.runtime.tasks_of(s.id()).await;
    assert_eq!(tasks.len(), 40);
    // Every task finished; never more than 4 children at once.
    tokio::time::timeout(Duration::from_secs(10), f.runtime.wait_idle())
        .await
        .expect("every task ends");
    assert!(
        f.runtime
            .tasks_of(s.id())
            .await
            .iter()
            .all(|t| t.status == TaskStatus::Completed)
    );
    assert_eq!(f.rec.max_in_flight.load(Ordering::SeqCst), 4);
    assert_eq!(f.rec.of("worker").len(), 40);
}

#[tokio::test]
async fn task_output_says_a_limited_result_is_partial_and_why() {
    let mut limited = worker("limited");
    limited.max_turns = Some(2);
    let f = fixture(
        r#"
        [[scripts]]
        agent = "limited"
        [[scripts.turns]]
        text = "first notes"
        tool_calls = [{ name = "echo", args = { text = "a" } }]
        [[scripts.turns]]
        text = "second notes"
        tool_calls = [{ name = "echo", args = { text = "b" } }]
        "#,
        Options {
            defs: vec![limited],
            ..Default::default()
        },
    );
    let c = Caller::new(&f);
    let bg = c
        .call(
            "agent_spawn",
            json!({"agent_id": "limited", "task": "go", "timeout_seconds": 0}),
        )
        .await;
    let id = field(&bg, "task_id").to_string();
    let done = c.call("task_output", json!({"task_id": id})).await;
    assert_eq!(
        field(&done, "complete"),
        "false (reason: max_turns)",
        "{}",
        done.content
    );
    assert!(
        done.content.contains("first notes\n\nsecond notes"),
        "both turns' text: {}",
        done.content
    );
}
