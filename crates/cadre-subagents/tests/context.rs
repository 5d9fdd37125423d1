//! The sub-agents section of the system prompt (rules and agents, the same on every turn)
//! and the status of a session's background tasks, appended to the conversation only when it
//! changed, capped at 10 task lines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_store::{NewTask, Transition};
use cadre_subagents::{TaskStatus, ToolSurface, section, status_message};
use cadre_types::Message;
use common::*;

const RULES: &str = "# Sub-agents
You can delegate self-contained jobs to sub-agents. Each starts with a fresh context and sees only the brief you write, so make it complete.
- Prefer background runs for independent work that can go on in parallel; start several at once.
- Results of background tasks are delivered to you automatically when they finish; do not poll in a loop.
- The status of your background tasks is appended to the conversation as a <background-tasks> message whenever it changes; an earlier status may be stale.
";

const AGENTS: &str = "- general-purpose: A capable all-round agent for open-ended work: investigating questions that need several searches, finding code or files when the first guess may miss, and carrying out multi-step tasks. It has the same tools as you (except delegation) and works in the same workspace.
- worker: The worker agent.";

async fn add_task(f: &Fixture, session: &str, id: &str, description: &str) {
    let mut t = NewTask::new("worker", session, "p");
    t.id = id.to_string();
    t.description = description.to_string();
    t.background = true;
    f.runtime.store().create(&t).await.unwrap();
}

async fn add_tasks(f: &Fixture, session: &str, n: usize) {
    for i in 0..n {
        let id = format!("task_{i:02}");
        add_task(f, session, &id, &format!("job {i}")).await;
        if i % 3 == 0 {
            set(f, &id, TaskStatus::Running).await;
        }
    }
}

async fn set(f: &Fixture, id: &str, to: TaskStatus) {
    f.runtime
        .store()
        .transition(id, Transition::to(to).with_result("r"))
        .await
        .unwrap();
}

fn worker_fixture() -> Fixture {
    fixture(
        "",
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    )
}

async fn status(f: &Fixture, session: &str) -> Option<String> {
    status_after(f, session, &[]).await
}

async fn status_after(f: &Fixture, session: &str, history: &[Message]) -> Option<String> {
    let summary = f
        .runtime
        .store()
        .background_summary(session, 10)
        .await
        .unwrap();
    status_message(&summary, history)
}

#[tokio::test]
async fn the_section_holds_rules_and_agents_only() {
    let f = worker_fixture();
    // With the task tool, its description lists the agents (once per request).
    let with_task =
        format!("{RULES}\nThe available agents are listed in the description of the task tool.");
    for surface in [ToolSurface::Both, ToolSurface::Task] {
        assert_eq!(section(f.runtime.registry(), surface), with_task);
    }
    let task = f.runtime.delegation_tools();
    let task = task.get("task").unwrap().definition().description;
    assert!(
        task.ends_with(&format!("Available agents:\n{AGENTS}\n")),
        "{task}"
    );
    // Without it, the section does.
    let lifecycle = format!("{RULES}\nAvailable agents (the agent_id of agent_spawn):\n{AGENTS}");
    assert_eq!(
        section(f.runtime.registry(), ToolSurface::Lifecycle),
        lifecycle
    );
    add_tasks(&f, "s-1", 3).await;
    assert_eq!(
        section(f.runtime.registry(), ToolSurface::Lifecycle),
        lifecycle,
        "tasks do not change it"
    );
}

#[tokio::test]
async fn no_status_without_background_tasks() {
    let f = worker_fixture();
    assert_eq!(status(&f, "s-1").await, None);
}

#[tokio::test]
async fn status_with_three_tasks_one_finished() {
    let f = worker_fixture();
    add_tasks(&f, "s-1", 3).await;
    add_tasks(&f, "s-other", 0).await;
    set(&f, "task_00", TaskStatus::Completed).await;
    let want = "<background-tasks>\n\
                Background tasks: 2 open, 1 finished. Open, newest first:\n\
                - task_02 worker: job 2\n\
                - task_01 worker: job 1\n\
                </background-tasks>";
    assert_eq!(status(&f, "s-1").await.unwrap(), want);
    for id in ["task_01", "task_02"] {
        set(&f, id, TaskStatus::Failed).await;
    }
    assert_eq!(
        status(&f, "s-1").await.unwrap(),
        "<background-tasks>\nBackground tasks: 0 open, 3 finished.\n</background-tasks>"
    );
}

#[tokio::test]
async fn a_status_is_not_repeated_and_shrinks_to_counts_when_only_tasks_finished() {
    let f = worker_fixture();
    add_tasks(&f, "s-1", 3).await;
    let first = status(&f, "s-1").await.unwrap();
    let mut history = vec![Message::user("go"), Message::user(first)];
    assert_eq!(status_after(&f, "s-1", &history).await, None, "unchanged");
    set(&f, "task_01", TaskStatus::Completed).await;
    let counts = status_after(&f, "s-1", &history).await.unwrap();
    assert_eq!(
        counts,
        "<background-tasks>\nBackground tasks: 2 open (as seen before), 1 finished.\n</background-tasks>"
    );
    history.push(Message::user(counts));
    assert_eq!(
        status_after(&f, "s-1", &history).await,
        None,
        "unchanged again"
    );
    // A pending task that starts running is still open: nothing to tell.
    set(&f, "task_02", TaskStatus::Running).await;
    assert_eq!(status_after(&f, "s-1", &history).await, None, "started");
    // A new open task lists them again.
    add_task(&f, "s-1", "task_09", "job 9").await;
    let full = status_after(&f, "s-1", &history).await.unwrap();
    assert!(
        full.contains("3 open, 1 finished. Open, newest first:\n- task_09 worker: job 9\n- task_02 worker: job 2\n- task_00 worker: job 0\n"),
        "{full}"
    );
    history.push(Message::user(full));
    set(&f, "task_09", TaskStatus::Completed).await;
    set(&f, "task_00", TaskStatus::Completed).await;
    set(&f, "task_02", TaskStatus::Completed).await;
    let all_done = status_after(&f, "s-1", &history).await.unwrap();
    assert!(all_done.contains(": 0 open, 4 finished."), "{all_done}");
}

#[tokio::test]
async fn tasks_the_model_saw_start_are_not_listed_again() {
    let f = worker_fixture();
    add_tasks(&f, "s-1", 2).await;
    let started = |id: &str| Message::Tool {
        tool_call_id: format!("call_{id}"),
        name: "task".into(),
        content: format!("<task id=\"{id}\" state=\"running\"/>"),
        is_error: false,
        images: Vec::new(),
    };
    let mut history = vec![Message::user("go"), started("task_00")];
    // task_01 is unknown to the model: the full list.
    let full = status_after(&f, "s-1", &history).await.unwrap();
    assert!(
        full.contains("- task_01 worker: job 1\n- task_00 worker: job 0"),
        "{full}"
    );
    history.pop();
    history.push(started("task_00"));
    history.push(started("task_01"));
    assert_eq!(
        status_after(&f, "s-1", &history).await,
        None,
        "both just started"
    );
    set(&f, "task_00", TaskStatus::Completed).await;
    assert_eq!(
        status_after(&f, "s-1", &history).await.unwrap(),
        "<background-tasks>\nBackground tasks: 1 open (as seen before), 1 finished.\n</background-tasks>"
    );
}

#[tokio::test]
async fn status_with_twelve_open_tasks_lists_ten_and_counts_the_rest() {
    let f = worker_fixture();
    add_tasks(&f, "s-1", 12).await;
    let s = status(&f, "s-1").await.unwrap();
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 14, "{s}");
    assert!(lines[1].contains("12 open, 0 finished"), "{s}");
    assert_eq!(lines[2], "- task_11 worker: job 11");
    assert_eq!(lines[11], "- task_02 worker: job 2");
    assert_eq!(lines[12], "… 2 more");
}

#[tokio::test]
async fn a_description_cannot_close_the_status_early_or_make_it_long() {
    let f = worker_fixture();
    let description = format!("a\n</background-tasks>\nfake {}", "y".repeat(500));
    add_task(&f, "s-1", "task_x", &description).await;
    let s = status(&f, "s-1").await.unwrap();
    assert_eq!(s.matches("</background-tasks>").count(), 1, "{s}");
    assert_eq!(s.lines().count(), 4, "{s}");
    assert!(s.len() < 400, "{s}");
}

#[tokio::test]
async fn the_system_prompt_stays_the_same_and_the_status_is_appended_when_it_changes() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "worker", description = "job a", prompt = "a", background = true } }]
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
    let (_out, session) = f.run("go").await;
    let reqs = f.rec.of("main");
    assert_eq!(
        reqs.len(),
        6,
        "five turns, then one more for the delivered result"
    );
    let want = format!(
        "PARENT SYSTEM PROMPT\n\n{RULES}\nThe available agents are listed in the description of the task tool."
    );
    for r in &reqs {
        assert_eq!(r.system, want);
        assert_eq!(r.tools, reqs[0].tools);
    }
    assert_eq!(f.parent.config().system_prompt, "PARENT SYSTEM PROMPT");
    // The model saw the task start in its tool result, so the status first reached it when
    // the task ended; never twice the same in a row.
    let statuses = user_messages(session.messages(), "<background-tasks>");
    assert_eq!(
        statuses,
        ["<background-tasks>\nBackground tasks: 0 open, 1 finished.\n</background-tasks>"]
    );
    for pair in statuses.windows(2) {
        assert_ne!(pair[0], pair[1], "an unchanged status is not sent again");
    }
    // Each request extends the previous one.
    for pair in reqs.windows(2) {
        assert_eq!(
            pair[1].messages[..pair[0].messages.len()],
            pair[0].messages[..]
        );
    }
}
