//! Timeouts, cancellation and budgets end runs honestly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::Limits;
use cadre_tools::ToolRegistry;
use cadre_types::{EndState, LimitKind, Message};
use common::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// Time is paused: the tool timeout and the time that passes are tokio's clock.
#[tokio::test(start_paused = true)]
async fn per_tool_timeout_fires_but_exempt_tools_outlive_it_until_cancelled() {
    let (model, _rec) = scripted(
        r#"
        [[turns]]
        tool_calls = [{ name = "slow" }]
        [[turns]]
        tool_calls = [{ name = "exempt" }]
        [[turns]]
        text = "unreachable"
        "#,
    );
    let log = Arc::new(Mutex::new(Vec::new()));
    let tools = ToolRegistry::new()
        .with(TestTool::new("slow", Behaviour::Hang(log.clone())))
        .with(TestTool::exempt("exempt", Behaviour::Hang(log.clone())));
    let agent = builder(model)
        .tools(tools)
        .tool_timeout(Duration::from_millis(200))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let cancel = h.cancel.clone();
    let events = h.events.clone();
    // Once the exempt tool runs, let six of its would-be timeouts pass, then cancel.
    let canceller = tokio::spawn(async move {
        cadre_testkit::eventually("the exempt tool to start", Duration::from_secs(5), || {
            let started = events.events().iter().any(
                |e| matches!(e, cadre_types::Event::ToolStart { tool, .. } if tool == "exempt"),
            );
            async move { started }
        })
        .await;
        tokio::time::advance(Duration::from_millis(1200)).await;
        cancel.cancel();
    });
    let out = h.run(&agent, &mut session, "go").await;
    canceller.await.unwrap();
    assert_eq!(out.state, EndState::Cancelled);
    let results: Vec<String> = session
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert!(
        results[0].contains("timed out after 0.2s"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("cancelled"), "{}", results[1]);
    // Both tools saw their cancellation (the timed-out one via its call token).
    assert_eq!(
        *log.lock().unwrap(),
        vec!["slow cancelled", "exempt cancelled"]
    );
}

#[tokio::test]
async fn max_turns_ends_with_limit_reached_and_partial_output() {
    let (model, _rec) = scripted(
        r#"
        [[turns]]
        text = "step one done"
        tool_calls = [{ name = "echo", args = { text = "1" } }]
        [[turns]]
        text = "step two done"
        tool_calls = [{ name = "echo", args = { text = "2" } }]
        [[turns]]
        text = "never"
        "#,
    );
    let agent = builder(model)
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .limits(Limits {
            max_turns: 2,
            ..Default::default()
        })
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "go").await;
    assert_eq!(
        out.state,
        EndState::LimitReached {
            limit: LimitKind::MaxTurns
        }
    );
    // Not only the last turn's text: everything the run wrote, since it did not complete.
    assert_eq!(out.output, "step one done\n\nstep two done");
    assert!(!out.state.is_complete());
    assert_eq!(out.turns, 2);
    // The second reply's call was not run, and says so: every call has a result.
    let last = session.messages().last().unwrap();
    assert!(
        matches!(last, Message::Tool { content, is_error: true, .. } if content.contains("turn limit"))
    );
}

#[tokio::test]
async fn token_budget_ends_with_limit_reached() {
    let (model, rec) = scripted(
        r#"
        [[turns]]
        text = "partial work"
        usage = { input_tokens = 800, output_tokens = 300 }
        tool_calls = [{ name = "echo", args = { text = "1" } }]
        [[turns]]
        text = "never"
        "#,
    );
    let agent = builder(model)
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .limits(Limits {
            max_tokens: Some(1000),
            ..Default::default()
        })
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "go").await;
    assert_eq!(
        out.state,
        EndState::LimitReached {
            limit: LimitKind::Tokens
        }
    );
    assert_eq!(out.output, "partial work");
    assert_eq!(out.usage.total(), 1100);
    assert_eq!(rec.requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn wall_clock_budget_stops_a_slow_model() {
    let (model, _rec) = scripted(
        r#"
        [[turns]]
        text = "thinking slowly"
        delay_ms = 30000
        "#,
    );
    let agent = builder(model)
        .limits(Limits {
            wall_clock: Some(Duration::from_millis(300)),
            ..Default::default()
        })
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let started = Instant::now();
    let out = h.run(&agent, &mut session, "go").await;
    assert_eq!(
        out.state,
        EndState::LimitReached {
            limit: LimitKind::WallClock
        }
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn provider_errors_fail_the_run_with_the_message() {
    let (model, _rec) = scripted(
        r#"
        [[turns]]
        error = "upstream exploded"
        "#,
    );
    let agent = builder(model).build();
    let h = Harness::new();
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "go").await;
    match out.state {
        EndState::Failed { error } => assert!(error.contains("upstream exploded"), "{error}"),
        other => panic!("expected failure, got {other:?}"),
    }
}

#[tokio::test]
async fn a_reply_that_breaks_off_keeps_the_text_it_streamed() {
    let (model, _rec) = scripted(
        r#"
        [[turns]]
        text = "found the bug in parse.rs"
        tool_calls = [{ name = "echo", args = { text = "1" } }]
        [[turns]]
        text = "the fix is to"
        error = "connection reset"
        "#,
    );
    let agent = builder(model)
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "go").await;
    assert!(
        matches!(out.state, EndState::Failed { .. }),
        "{:?}",
        out.state
    );
    assert_eq!(out.output, "found the bug in parse.rs\n\nthe fix is to");
}
