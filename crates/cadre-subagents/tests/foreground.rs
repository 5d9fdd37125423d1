//! Foreground delegation with `task`: isolation, fan-out, timeouts, cancellation, approvals.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::ApprovalMode;
use cadre_subagents::DELEGATION_TOOLS;
use cadre_types::{ApprovalDecision, EndState, Message, UpdateKind};
use common::*;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[tokio::test]
async fn a_child_sees_only_its_prompt_and_brief_and_no_delegation_tools() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [
          { name = "task", args = { subagent_type = "worker", description = "one", prompt = "Find the first thing." } },
          { name = "task", args = { subagent_type = "worker", description = "two", prompt = "Find the second thing." } },
        ]
        [[scripts.turns]]
        text = "parent done: {{tool_results}}"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        text = "worker answer to: {{user}}"
        "#,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let (out, _s) = f.run("Do the two things.").await;
    assert_eq!(out.state, EndState::Completed);
    let children = f.rec.of("worker");
    assert_eq!(children.len(), 2);
    for (child, brief) in children
        .iter()
        .zip(["Find the first thing.", "Find the second thing."])
    {
        assert_eq!(
            child.messages,
            vec![Message::user(brief)],
            "only the delegation prompt"
        );
        assert!(
            child.system.starts_with("You are the worker."),
            "{}",
            child.system
        );
        assert!(child.system.contains("You are `worker`, a sub-agent"));
        assert!(child.system.contains("you cannot delegate"));
        assert!(!child.system.contains("PARENT SYSTEM PROMPT"));
        let tools: Vec<&str> = child.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(tools, vec!["echo", "write", "hang"]);
        assert!(tools.iter().all(|t| !DELEGATION_TOOLS.contains(t)));
    }
    assert_ne!(
        children[0].metadata.session_id,
        children[1].metadata.session_id
    );
    assert!(
        children
            .iter()
            .all(|c| c.metadata.session_id.starts_with("sub-"))
    );
    assert_eq!(
        out.output,
        "parent done: <task state=\"completed\" complete=\"true\"><task_result>worker answer to: Find the first thing.</task_result></task>\n\
         <task state=\"completed\" complete=\"true\"><task_result>worker answer to: Find the second thing.</task_result></task>"
    );
}

#[tokio::test]
async fn parallel_fan_out_runs_children_concurrently_with_results_in_call_order() {
    const N: usize = 8;
    let calls: Vec<String> = (0..N)
        .map(|i| format!("{{ name = \"task\", args = {{ subagent_type = \"worker\", prompt = \"job {i}\" }} }}"))
        .collect();
    let script = format!(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{}]
        [[scripts.turns]]
        text = "done"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        delay_ms = 400
        text = "result of {{{{user}}}}"
        "#,
        calls.join(", ")
    );
    let f = fixture(
        &script,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let (out, s) = f.run("fan out").await;
    assert_eq!(out.state, EndState::Completed);
    // The parent's model call is over before the children start, so every concurrent
    // model call seen is a child's: all N were in flight at once.
    assert_eq!(f.rec.max_in_flight.load(Ordering::SeqCst), N);
    let results = tool_results(s.messages());
    assert_eq!(results.len(), N);
    for (i, (r, err)) in results.iter().enumerate() {
        assert!(!err);
        assert!(r.contains(&format!("result of job {i}<")), "{i}: {r}");
    }
}

#[tokio::test]
async fn a_foreground_child_outlives_the_per_tool_timeout() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "worker", prompt = "slow job" } }]
        [[scripts.turns]]
        text = "{{tool_results}}"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        delay_ms = 1500
        text = "slow but done"
        "#,
        Options {
            defs: vec![worker("worker")],
            parent_tool_timeout: Duration::from_secs(1),
            ..Default::default()
        },
    );
    let (out, _s) = f.run("go").await;
    assert_eq!(out.state, EndState::Completed);
    assert!(out.output.contains("slow but done"), "{}", out.output);
}

#[tokio::test]
async fn cancelling_the_parent_cancels_the_child_before_its_next_model_call() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "worker", prompt = "hang around" } }]
        [[scripts.turns]]
        text = "never"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        tool_calls = [{ name = "hang" }]
        [[scripts.turns]]
        text = "never either"
        "#,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let cancel = f.cancel.clone();
    let events = f.events.clone();
    tokio::spawn(async move {
        // Cancel once the child is inside its tool call.
        cadre_testkit::eventually("the child's tool call", Duration::from_secs(2), || {
            let started = events
                .updates()
                .iter()
                .any(|u| u.kind == UpdateKind::ToolStart);
            async move { started }
        })
        .await;
        cancel.cancel();
    });
    let (out, _s) = tokio::time::timeout(Duration::from_secs(10), f.run("go"))
        .await
        .unwrap();
    assert_eq!(out.state, EndState::Cancelled);
    assert_eq!(
        f.rec.of("worker").len(),
        1,
        "the child's next model call never happened"
    );
    assert!(
        f.events
            .updates()
            .iter()
            .any(|u| u.kind == UpdateKind::Cancelled)
    );
}

#[tokio::test]
async fn foreground_approvals_go_to_the_parent_channel_labelled_with_the_child() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "worker", prompt = "write it" } }]
        [[scripts.turns]]
        text = "{{tool_results}}"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        tool_calls = [{ name = "write", args = { text = "file.txt" } }]
        [[scripts.turns]]
        text = "wrote: {{tool_results}}"
        "#,
        Options {
            defs: vec![worker("worker")],
            mode: ApprovalMode::Ask,
            answer: ApprovalDecision::AllowOnce,
            ..Default::default()
        },
    );
    let (out, _s) = f.run("go").await;
    let asked = f.approvals.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].agent, "worker");
    assert_eq!(asked[0].tool, "write");
    assert!(asked[0].task_id.as_deref().unwrap().starts_with("task_"));
    assert!(
        out.output.contains("wrote: write:file.txt"),
        "{}",
        out.output
    );
    // The UI sees the child's approval request in the parent's stream.
    assert!(
        f.events.all().iter().any(|e| e.agent == "worker"
            && matches!(e.event, cadre_types::Event::ApprovalRequired { .. }))
    );
}

#[tokio::test]
async fn unknown_agents_are_tool_errors() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "nobody", prompt = "x" } }]
        [[scripts.turns]]
        text = "{{tool_results}}"
        "#,
        Options::default(),
    );
    let (out, s) = f.run("go").await;
    assert_eq!(out.state, EndState::Completed);
    let r = tool_results(s.messages());
    assert!(r[0].1);
    assert!(r[0].0.contains("Unknown agent_id: nobody"), "{}", r[0].0);
}
