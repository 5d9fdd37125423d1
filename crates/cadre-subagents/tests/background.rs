//! Background delegation: ids at once, exactly-once delivery, waiting runs, approvals.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::ApprovalMode;
use cadre_subagents::{BackgroundApprovals, TaskStatus};
use cadre_types::{ApprovalDecision, EndState, Message};
use common::*;
use std::time::{Duration, Instant};

fn deliveries(messages: &[Message]) -> usize {
    delivered(messages).len()
}

const BACKGROUND: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "worker", description = "bg job", prompt = "work slowly", background = true } }]
[[scripts.turns]]
text = "started: {{tool_results}}"
[[scripts.turns]]
text = "got: {{user}}"

[[scripts]]
agent = "worker"
[[scripts.turns]]
delay_ms = 600
text = "background result"
"#;

#[tokio::test]
async fn background_ids_return_at_once_and_results_are_delivered_exactly_once() {
    let f = fixture(
        BACKGROUND,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let started = Instant::now();
    let (out, s) = f.run("go").await;
    assert_eq!(out.state, EndState::Completed);
    assert!(
        out.output.starts_with("got: <background-task-results>"),
        "{}",
        out.output
    );
    assert!(out.output.contains("background result"));
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "the run waited for the task"
    );

    let parent = f.rec.of("main");
    assert_eq!(parent.len(), 3);
    // Turn 2 saw the id right away, before the child could have finished.
    let first_result = tool_results(&parent[1].messages);
    assert!(
        first_result[0].0.starts_with("<task id=\"task_")
            && first_result[0].0.ends_with("state=\"running\"/>")
    );
    assert_eq!(deliveries(&parent[1].messages), 0);
    // Turn 3 got the completion once.
    assert_eq!(deliveries(&parent[2].messages), 1);
    assert_eq!(deliveries(s.messages()), 1);
    let id = first_result[0].0.split('"').nth(1).unwrap().to_string();
    let snap = f.runtime.task_record(&id).await.unwrap();
    assert_eq!(snap.status, TaskStatus::Completed);
    assert!(snap.background);
    // The model saw the task start in its tool result: no status repeats it before turn 2;
    // the one before turn 3 says it finished. The system prompt does not change.
    let status_of = |messages: &[Message]| user_messages(messages, "<background-tasks>");
    assert_eq!(status_of(&parent[1].messages), Vec::<String>::new());
    assert_eq!(
        status_of(&parent[2].messages),
        ["<background-tasks>\nBackground tasks: 0 open, 1 finished.\n</background-tasks>"]
    );
    assert_eq!(parent[2].system, parent[0].system);
    // Its progress log (task_output shows it while the task runs) left with the task.
    assert!(f.runtime.progress_of(&id).is_empty());
    assert_eq!(f.runtime.running_here(), 0);
}

const BG_WRITE: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "worker", prompt = "write in background", background = true } }]
[[scripts.turns]]
text = "waiting"
[[scripts.turns]]
text = "{{user}}"

[[scripts]]
agent = "worker"
[[scripts.turns]]
tool_calls = [{ name = "write", args = { text = "x.txt" } }]
[[scripts.turns]]
text = "child saw: {{tool_results}}"
"#;

#[tokio::test]
async fn background_approvals_fail_closed_by_default() {
    let f = fixture(
        BG_WRITE,
        Options {
            defs: vec![worker("worker")],
            mode: ApprovalMode::Ask,
            answer: ApprovalDecision::AllowOnce,
            ..Default::default()
        },
    );
    let (out, _s) = f.run("go").await;
    assert_eq!(
        f.approvals.asked.lock().unwrap().len(),
        0,
        "the human was never asked"
    );
    assert!(
        out.output.contains("background sub-agents cannot ask"),
        "{}",
        out.output
    );
    // The child is told which setting refused, not that a person denied it.
    assert!(
        out.output
            .contains("refused by policy (subagents.background_approvals = "),
        "{}",
        out.output
    );
    assert!(!out.output.contains("denied by the user"), "{}", out.output);
}

#[tokio::test]
async fn background_approvals_can_escalate_to_the_parent_channel() {
    let f = fixture(
        BG_WRITE,
        Options {
            defs: vec![worker("worker")],
            mode: ApprovalMode::Ask,
            answer: ApprovalDecision::AllowOnce,
            tweak: Box::new(|c| c.background_approvals = BackgroundApprovals::Escalate),
            ..Default::default()
        },
    );
    let (out, _s) = f.run("go").await;
    let asked = f.approvals.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].agent, "worker");
    assert!(
        out.output.contains("child saw: write:x.txt"),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn failed_children_are_reported_as_failed_not_completed() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "worker", prompt = "fail" } }]
        [[scripts.turns]]
        text = "{{tool_results}}"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        text = "partial progress"
        tool_calls = [{ name = "echo", args = { text = "a" } }]
        [[scripts.turns]]
        error = "model went away"
        "#,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let (_out, s) = f.run("go").await;
    let r = tool_results(s.messages());
    assert!(r[0].1, "flagged as an error");
    assert!(
        r[0].0
            .starts_with("<task state=\"failed\" complete=\"false\" reason=\"error\"><error>scripted model: model went away</error>"),
        "{}",
        r[0].0
    );
    assert!(
        r[0].0
            .contains("<task_result>partial progress</task_result>")
    );
}

#[tokio::test]
async fn a_child_that_hits_max_turns_returns_its_partial_output() {
    let mut d = worker("worker");
    d.max_turns = Some(1);
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "worker", prompt = "long job" } }]
        [[scripts.turns]]
        text = "{{tool_results}}"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        text = "halfway there"
        tool_calls = [{ name = "echo", args = { text = "a" } }]
        "#,
        Options {
            defs: vec![d],
            ..Default::default()
        },
    );
    let (out, _s) = f.run("go").await;
    assert!(
        out.output.contains("limit reached (max turns)"),
        "{}",
        out.output
    );
    assert!(
        out.output
            .contains("<task_result>halfway there</task_result>"),
        "{}",
        out.output
    );
    // The child's usage is rolled up into the parent's.
    let worker = f
        .runtime
        .tasks_of(&f.rec.of("main")[0].metadata.session_id)
        .await[0]
        .usage;
    assert!(worker.total() > 0);
    assert!(out.usage.total() > worker.total(), "{:?}", out.usage);
}

#[tokio::test]
async fn a_child_limited_to_two_turns_returns_both_texts_marked_incomplete() {
    let mut d = worker("worker");
    d.max_turns = Some(2);
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [
          { name = "task", args = { subagent_type = "worker", prompt = "fg job" } },
          { name = "task", args = { subagent_type = "worker", prompt = "bg job", background = true } },
        ]
        [[scripts.turns]]
        text = "{{tool_results}}"
        [[scripts.turns]]
        text = "{{user}}"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        text = "first findings"
        tool_calls = [{ name = "echo", args = { text = "a" } }]
        [[scripts.turns]]
        text = "second findings"
        tool_calls = [{ name = "echo", args = { text = "b" } }]
        "#,
        Options {
            defs: vec![d],
            ..Default::default()
        },
    );
    let (_out, s) = f.run("go").await;
    // Foreground: the tool result carries both turns' text and says why it is partial.
    let r = tool_results(s.messages());
    assert!(
        r[0].0.starts_with(
            "<task state=\"failed\" complete=\"false\" reason=\"max_turns\"><error>limit reached (max turns)"
        ),
        "{}",
        r[0].0
    );
    assert!(
        r[0].0
            .contains("<task_result>first findings\n\nsecond findings</task_result>"),
        "{}",
        r[0].0
    );
    // Background: the delivered result says the same.
    let delivered = delivered(s.messages())
        .into_iter()
        .next()
        .expect("the background result was delivered");
    assert!(
        delivered.contains("complete=\"false\" reason=\"max_turns\">"),
        "{delivered}"
    );
    assert!(
        delivered.contains("<task_result>first findings\n\nsecond findings</task_result>"),
        "{delivered}"
    );
}

#[tokio::test]
async fn a_100_kib_result_is_stored_as_a_file_and_the_parent_gets_its_head_and_path() {
    let big = "0123456789abcdef\n".repeat(100 * 1024 / 17 + 1);
    let script = format!(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [
          {{ name = "task", args = {{ subagent_type = "worker", prompt = "fg" }} }},
          {{ name = "task", args = {{ subagent_type = "worker", prompt = "bg", background = true }} }},
        ]
        [[scripts.turns]]
        text = "waiting"
        [[scripts.turns]]
        text = "done"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        text = """{big}"""
        "#
    );
    let f = fixture(
        &script,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let (_out, s) = f.run("go").await;
    let r = tool_results(s.messages());
    let fg = &r[0].0;
    assert!(
        fg.len() < 6 * 1024,
        "the parent's tool result is small: {}",
        fg.len()
    );
    let path = fg
        .split("<result_file path=\"")
        .nth(1)
        .and_then(|p| p.split('"').next())
        .expect("the result is referenced");
    let stored = std::fs::read_to_string(path).unwrap();
    assert!(stored.len() >= 100 * 1024, "{}", stored.len());
    assert!(
        stored.trim() == big.trim(),
        "the whole result is in the file"
    );
    assert!(fg.contains(&format!("bytes=\"{}\"", stored.len())), "{fg}");
    // The background delivery is bounded the same way.
    let delivered = delivered(s.messages())
        .into_iter()
        .next()
        .expect("the background result was delivered");
    assert!(delivered.len() < 6 * 1024, "{}", delivered.len());
    assert!(delivered.contains("<result_file path=\""), "{delivered}");
}

#[tokio::test]
async fn every_background_result_is_delivered_even_when_they_trickle_in() {
    let spawns: Vec<String> = (0..20)
        .map(|i| format!("{{ name = \"task\", args = {{ subagent_type = \"worker\", prompt = \"job {i}\", background = true }} }}"))
        .collect();
    let waiting_turns = "[[scripts.turns]]\ntext = \"noted\"\n".repeat(40);
    let script = format!(
        "[[scripts]]\nagent = \"main\"\n[[scripts.turns]]\ntool_calls = [{}]\n{waiting_turns}\n\
         [[scripts]]\nagent = \"worker\"\n[[scripts.turns]]\ndelay_ms = 60\ntext = \"result of {{{{user}}}}\"\n",
        spawns.join(", ")
    );
    let f = fixture(
        &script,
        Options {
            defs: vec![worker("worker")],
            // Two at a time: completions trickle in over ~600 ms.
            tweak: Box::new(|c| c.max_concurrent = 2),
            ..Default::default()
        },
    );
    let (out, s) = f.run("go").await;
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    let delivered: String = delivered(s.messages()).concat();
    for i in 0..20 {
        assert_eq!(
            delivered.matches(&format!("result of job {i}<")).count(),
            1,
            "job {i}"
        );
    }
    // Deliveries were batched: far fewer parent turns than tasks.
    assert!(
        f.rec.of("main").len() <= 12,
        "{} parent turns",
        f.rec.of("main").len()
    );
}
