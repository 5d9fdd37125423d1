//! The per-turn sub-agents section: rebuilt each turn from the registry and the session's
//! background tasks, capped at 10 task lines; the base prompt is never changed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_subagents::{NewTask, TaskStatus, section};
use common::*;
use tokio_util::sync::CancellationToken;

const RULES: &str = "# Sub-agents
You can delegate self-contained jobs to sub-agents. Each starts with a fresh context and sees only the brief you write, so make it complete.
- Prefer background runs for independent work that can go on in parallel; start several at once.
- Results of background tasks are delivered to you automatically when they finish; do not poll in a loop.
- The status shown below and in earlier messages may be stale; a task may have finished since.

Available agents:
- general-purpose: A capable all-round agent for open-ended work: investigating questions that need several searches, finding code or files when the first guess may miss, and carrying out multi-step tasks. It has the same tools as you (except delegation) and works in the same workspace.
- worker: The worker agent.";

fn add_tasks(f: &Fixture, session: &str, n: usize) {
    for i in 0..n {
        let id = format!("task_{i:02}");
        f.runtime.tracker().insert(
            NewTask {
                id: id.clone(),
                agent: "worker".into(),
                parent_session_id: session.into(),
                child_session_id: format!("sub-{i}"),
                description: format!("job {i}"),
                background: true,
            },
            CancellationToken::new(),
        );
        if i % 3 == 0 {
            f.runtime
                .tracker()
                .transition(&id, TaskStatus::Running, None, None, None)
                .unwrap();
        }
    }
}

#[test]
fn section_with_no_tasks() {
    let f = fixture(
        "",
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    assert_eq!(section(&f.runtime, "s-1"), RULES);
}

#[test]
fn section_with_three_tasks() {
    let f = fixture(
        "",
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    add_tasks(&f, "s-1", 3);
    add_tasks(&f, "s-other", 2);
    let want = format!(
        "{RULES}\n\nBackground tasks of this session (newest first):\n\
         - task_02 [pending] worker: job 2\n\
         - task_01 [pending] worker: job 1\n\
         - task_00 [running] worker: job 0"
    );
    assert_eq!(section(&f.runtime, "s-1"), want);
}

#[test]
fn section_with_twelve_tasks_lists_ten_and_counts_the_rest() {
    let f = fixture(
        "",
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    add_tasks(&f, "s-1", 12);
    let s = section(&f.runtime, "s-1");
    let tail: Vec<&str> = s
        .lines()
        .skip_while(|l| !l.starts_with("Background tasks"))
        .collect();
    assert_eq!(tail.len(), 12, "{s}");
    assert_eq!(tail[1], "- task_11 [pending] worker: job 11");
    assert_eq!(tail[10], "- task_02 [pending] worker: job 2");
    assert_eq!(tail[11], "… 2 more");
}

#[tokio::test]
async fn the_base_prompt_is_unchanged_after_five_turns() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "worker", prompt = "a", background = true } }]
        [[scripts.turns]]
        tool_calls = [{ name = "echo", args = { text = "1" } }]
        [[scripts.turns]]
        tool_calls = [{ name = "echo", args = { text = "2" } }]
        [[scripts.turns]]
        tool_calls = [{ name = "echo", args = { text = "3" } }]
        [[scripts.turns]]
        text = "done"
        [[scripts.turns]]
        text = "{{user}}"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        delay_ms = 500
        text = "w"
        "#,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let (_out, _s) = f.run("go").await;
    let reqs = f.rec.of("main");
    assert_eq!(
        reqs.len(),
        6,
        "five turns, then one more for the delivered result"
    );
    for r in &reqs {
        assert!(
            r.system
                .starts_with("PARENT SYSTEM PROMPT\n\n# Sub-agents\n"),
            "{}",
            r.system
        );
        assert_eq!(
            r.system.matches("# Sub-agents").count(),
            1,
            "rebuilt, not appended"
        );
    }
    assert_eq!(f.parent.config().system_prompt, "PARENT SYSTEM PROMPT");
    assert!(reqs[1].system.contains("worker: a"));
}
