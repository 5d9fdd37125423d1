//! Usage with cache reads and writes, and its cost, per sub-agent and rolled up: a parent on
//! a priced model (anthropic:claude-sonnet-4-5, through the testkit's mock server) runs two
//! sub-agents; each task records its own tokens and dollars and the parent's run reports
//! the sum of all of them; `task_list` shows each task's tokens and dollars.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_engine::{ApprovalMode, NonInteractiveApprovals, PermissionPolicy};
use cadre_llm::{PriceTable, ProviderConfig, ProviderKind};
use cadre_subagents::{AgentDefinition, Harness, RunOptions, TaskStatus, WorkspaceMode};
use cadre_testkit::{AnthropicStream, MockServer, RecordedRequest};
use cadre_types::{EndState, Usage};
use serde_json::json;
use std::sync::Arc;

/// (uncached input, cache read, cache write, output) of each call.
const PARENT_FIRST: (u64, u64, u64, u64) = (100, 0, 1000, 10);
const PARENT_SECOND: (u64, u64, u64, u64) = (50, 1000, 80, 5);
const CHILD: (u64, u64, u64, u64) = (20, 500, 0, 30);

fn usage((input, read, write, output): (u64, u64, u64, u64)) -> Usage {
    Usage {
        input_tokens: input + read + write,
        output_tokens: output,
        cached_input_tokens: read,
        cache_write_tokens: write,
        ..Usage::default()
    }
}

fn respond(req: &RecordedRequest) -> cadre_testkit::MockReply {
    let tools: Vec<&str> = req.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    let turns = req.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count();
    let reply = |(input, read, write, _): (u64, u64, u64, u64)| {
        AnthropicStream::new().start_with_cache(input, read, write)
    };
    if !tools.contains(&"task") {
        return reply(CHILD)
            .text(&["child result"])
            .stop("end_turn", CHILD.3)
            .into_reply();
    }
    if turns == 1 {
        return reply(PARENT_SECOND)
            .tool_use("toolu_list", "task_list", &["{}"])
            .stop("tool_use", PARENT_SECOND.3)
            .into_reply();
    }
    if turns == 2 {
        return reply((0, 0, 0, 0))
            .text(&["both done"])
            .stop("end_turn", 0)
            .into_reply();
    }
    let mut s = reply(PARENT_FIRST);
    for i in 0..2 {
        let args = json!({"subagent_type": "worker", "description": format!("job {i}"),
                          "prompt": format!("job {i}")});
        s = s.tool_use(&format!("toolu_{i}"), "task", &[&args.to_string()]);
    }
    s.stop("tool_use", PARENT_FIRST.3).into_reply()
}

#[tokio::test]
async fn usage_and_cost_roll_up_across_two_sub_agents() {
    let server = MockServer::start_with(Arc::new(respond)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut worker = AgentDefinition::new("worker", "Does a job.");
    worker.prompt = "You are a worker.".into();
    worker.workspace.mode = WorkspaceMode::Shared;
    let harness = Harness::builder()
        .model("anthropic:claude-sonnet-4-5")
        .workspace(dir.path())
        .provider(
            "anthropic",
            ProviderConfig {
                kind: Some(ProviderKind::Anthropic),
                base_url: Some(server.base_url()),
                max_attempts: Some(1),
                ..Default::default()
            },
        )
        .subagent(worker)
        .without_agent_files()
        .in_memory_sessions()
        .permissions(PermissionPolicy {
            mode: ApprovalMode::AutoApprove,
            ..Default::default()
        })
        .build()
        .unwrap();
    let mut session = harness.new_session().unwrap();
    let out = harness
        .run_in(
            &mut session,
            "run two jobs",
            RunOptions {
                approvals: Arc::new(NonInteractiveApprovals::new(true)),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(out.state, EndState::Completed, "{}", out.output);

    let price = PriceTable::built_in()
        .lookup("anthropic", "claude-sonnet-4-5")
        .unwrap();
    let priced = |u: Usage| u.priced(Some(price.cost_usd(&u)));
    // One child: 20 × $3 + 500 × $0.30 + 30 × $15 per million = $0.00066.
    let child = priced(usage(CHILD));
    assert_eq!(child.cost_nano_usd, 660_000);

    let tasks = harness.runtime().tasks_of(session.id()).await;
    assert_eq!(tasks.len(), 2);
    for t in &tasks {
        assert_eq!(t.status, TaskStatus::Completed);
        assert_eq!(t.usage, child, "{}", t.id);
    }
    let mut total = priced(usage(PARENT_FIRST));
    total += priced(usage(PARENT_SECOND));
    total += child;
    total += child;
    total += priced(usage((0, 0, 0, 0)));
    assert_eq!(out.usage, total);
    assert_eq!(out.usage.cached_input_tokens, 2000);
    assert_eq!(out.usage.cache_write_tokens, 1080);
    assert!(out.usage.cost_usd().is_some());

    // task_list shows each sub-agent's tokens and dollars.
    let last = server.requests().last().unwrap().body.clone();
    let listed = last["messages"].as_array().unwrap().last().unwrap()["content"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        listed
            .matches("\ntokens: 550 (in 520, cached 500, out 30)\ncost: $0.0007")
            .count(),
        2,
        "{listed}"
    );
}
