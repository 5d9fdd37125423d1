//! Budgets down the delegation tree: a run's token and wall-clock budgets count what its
//! sub-agents spend, foreground and background, at every depth; a child's budget is the
//! smaller of its own and what its parent has left; when the parent's runs out, its running
//! children end `limit reached` with their partial output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::Limits;
use cadre_subagents::{TaskRecord, TaskStatus};
use cadre_types::{EndState, Event, LimitKind};
use common::*;
use std::time::Duration;

fn max_tokens(n: u64) -> Limits {
    Limits {
        max_tokens: Some(n),
        ..Limits::default()
    }
}

async fn tasks(f: &Fixture) -> Vec<TaskRecord> {
    let session = &f.rec.of("main")[0].metadata.session_id;
    f.runtime.tasks_of(session).await
}

fn limit_reached(t: &TaskRecord, limit: LimitKind) -> bool {
    let end = t.end_state.as_deref();
    t.status == TaskStatus::Failed
        && end.and_then(|e| cadre_types::parse_end_state(e, None))
            == Some(EndState::LimitReached { limit })
}

#[tokio::test]
async fn two_background_children_spend_the_parents_budget_and_end_limit_reached() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        usage = { input_tokens = 10, output_tokens = 0 }
        tool_calls = [
          { name = "task", args = { subagent_type = "worker", prompt = "one", background = true } },
          { name = "task", args = { subagent_type = "worker", prompt = "two", background = true } },
        ]
        [[scripts.turns]]
        usage = { input_tokens = 10, output_tokens = 0 }
        text = "waiting"
        [[scripts.turns]]
        usage = { input_tokens = 10, output_tokens = 0 }
        text = "main: {{user}}"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        usage = { input_tokens = 2200, output_tokens = 0 }
        text = "partial of {{user}}"
        tool_calls = [{ name = "hang", args = {} }]
        [[scripts.turns]]
        text = "finished {{user}}"
        "#,
        Options {
            defs: vec![worker("worker")],
            limits: max_tokens(3000),
            ..Default::default()
        },
    );
    let (out, _s) = f.run("go").await;
    assert_eq!(
        out.state,
        EndState::LimitReached {
            limit: LimitKind::Tokens
        },
        "{}",
        out.output
    );
    assert!(out.usage.total() >= 4400, "{:?}", out.usage);
    let tasks = tasks(&f).await;
    assert_eq!(tasks.len(), 2);
    for t in &tasks {
        assert!(limit_reached(t, LimitKind::Tokens), "{t:?}");
        let result = t.result.as_deref().unwrap_or("");
        assert!(
            result.starts_with("partial of"),
            "partial output kept: {t:?}"
        );
    }
    // The children's model calls are in the parent's usage events, with its running total.
    let last = f
        .events
        .all()
        .into_iter()
        .filter(|e| e.agent == "main")
        .filter_map(|e| match e.event {
            Event::Usage {
                total, subagent, ..
            } => Some((total, subagent)),
            _ => None,
        })
        .max_by_key(|(total, _)| total.total())
        .unwrap();
    assert!(last.0.total() >= 4400, "{last:?}");
    assert_eq!(last.1.as_deref(), Some("worker"));
}

#[tokio::test]
async fn general_purpose_gets_what_the_parent_has_left_not_a_copy_of_its_budget() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        usage = { input_tokens = 1000, output_tokens = 0 }
        tool_calls = [{ name = "task", args = { subagent_type = "general-purpose", prompt = "job" } }]
        [[scripts.turns]]
        text = "main: {{tool_results}}"
        [[scripts]]
        agent = "general-purpose"
        [[scripts.turns]]
        usage = { input_tokens = 2200, output_tokens = 0 }
        text = "gp partial"
        tool_calls = [{ name = "echo", args = { text = "x" } }]
        [[scripts.turns]]
        usage = { input_tokens = 10, output_tokens = 0 }
        text = "gp finished"
        "#,
        Options {
            limits: max_tokens(3000),
            ..Default::default()
        },
    );
    let (out, _s) = f.run("go").await;
    // 2200 is under a copy of 3000, but not under the 2000 the parent had left.
    assert_eq!(
        out.state,
        EndState::LimitReached {
            limit: LimitKind::Tokens
        }
    );
    assert_eq!(f.rec.of("general-purpose").len(), 1, "no second turn");
    let t = &tasks(&f).await[0];
    assert!(limit_reached(t, LimitKind::Tokens), "{t:?}");
    assert_eq!(t.result.as_deref(), Some("gp partial"));
    assert_eq!(out.usage.total(), 3200);
}

#[tokio::test]
async fn a_grandchild_spends_from_every_ancestor() {
    let mut d1 = worker("d1");
    d1.can_delegate = true;
    d1.max_tokens = Some(100_000);
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        usage = { input_tokens = 10, output_tokens = 0 }
        tool_calls = [{ name = "task", args = { subagent_type = "d1", prompt = "go on" } }]
        [[scripts.turns]]
        text = "main: {{tool_results}}"
        [[scripts]]
        agent = "d1"
        [[scripts.turns]]
        usage = { input_tokens = 10, output_tokens = 0 }
        tool_calls = [{ name = "task", args = { subagent_type = "worker", prompt = "deep" } }]
        [[scripts.turns]]
        usage = { input_tokens = 10, output_tokens = 0 }
        text = "d1 finished"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        usage = { input_tokens = 5000, output_tokens = 0 }
        text = "deep partial"
        tool_calls = [{ name = "hang", args = {} }]
        "#,
        Options {
            defs: vec![d1, worker("worker")],
            limits: max_tokens(3000),
            ..Default::default()
        },
    );
    let (out, _s) = f.run("go").await;
    assert_eq!(
        out.state,
        EndState::LimitReached {
            limit: LimitKind::Tokens
        }
    );
    assert!(out.usage.total() >= 5020, "{:?}", out.usage);
    assert_eq!(f.rec.of("d1").len(), 1, "d1 stopped with the main budget");
    let t = &tasks(&f).await[0];
    assert!(limit_reached(t, LimitKind::Tokens), "{t:?}");
}

#[tokio::test(start_paused = true)]
async fn the_parents_deadline_ends_a_foreground_child_with_its_partial_output() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "worker", prompt = "slow" } }]
        [[scripts.turns]]
        text = "main: {{tool_results}}"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        text = "worker partial"
        tool_calls = [{ name = "hang", args = {} }]
        [[scripts.turns]]
        text = "worker finished"
        "#,
        Options {
            defs: vec![worker("worker")],
            limits: Limits {
                wall_clock: Some(Duration::from_secs(30)),
                ..Limits::default()
            },
            ..Default::default()
        },
    );
    let (out, _s) = f.run("go").await;
    assert_eq!(
        out.state,
        EndState::LimitReached {
            limit: LimitKind::WallClock
        }
    );
    let t = &tasks(&f).await[0];
    assert!(limit_reached(t, LimitKind::WallClock), "{t:?}");
    assert_eq!(t.result.as_deref(), Some("worker partial"));
}
