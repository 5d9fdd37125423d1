//! Per-agent model routing, the depth cap and the call-time delegation guard.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::{Agent, Session, SessionMeta};
use cadre_llm::{ProviderConfig, ProviderRegistry};
use cadre_subagents::{DelegationGuard, SpawnRequest, TaskTool};
use cadre_testkit::{AnthropicStream, MockServer, OpenAiStream};
use cadre_tools::{ToolRegistry, Workspace};
use cadre_types::{EndState, Message};
use common::*;
use std::collections::HashMap;
use std::sync::Arc;

#[tokio::test]
async fn a_child_on_anthropic_under_an_openai_parent_reaches_anthropic() {
    let openai = MockServer::start().await.unwrap();
    let anthropic = MockServer::start().await.unwrap();
    let args = r#"{"subagent_type":"claude-helper","prompt":"summarise"}"#;
    openai.push_openai(
        OpenAiStream::new()
            .role()
            .tool_call(0, "call_1", "task", args)
            .finish("tool_calls")
            .done()
            .into_reply(),
    );
    openai.push_openai(
        OpenAiStream::new()
            .role()
            .text("parent got it")
            .finish("stop")
            .done()
            .into_reply(),
    );
    anthropic.push_anthropic(
        AnthropicStream::new()
            .start(10, 0)
            .text(&["child ", "summary"])
            .stop("end_turn", 5)
            .into_reply(),
    );
    let cfg = |url: String| ProviderConfig {
        base_url: Some(url),
        api_key_env: Some("CARGO_PKG_NAME".into()),
        ..Default::default()
    };
    let mut configs = HashMap::new();
    configs.insert("openai".to_string(), cfg(openai.openai_base_url()));
    configs.insert("anthropic".to_string(), cfg(anthropic.base_url()));
    let providers = Arc::new(ProviderRegistry::new(configs, "openai"));
    let mut def = worker("claude-helper");
    def.model = Some("anthropic:claude-test".into());
    let f = fixture(
        "",
        Options {
            defs: vec![def],
            providers: Some(providers),
            parent_model: "openai:gpt-test".into(),
            ..Default::default()
        },
    );
    let (out, _s) = f.run("delegate").await;
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert_eq!(out.output, "parent got it");
    let a = anthropic.requests();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].body["model"], "claude-test");
    assert_eq!(a[0].body["messages"][0]["content"][0]["text"], "summarise");
    let o = openai.requests();
    assert_eq!(o.len(), 2);
    assert_eq!(o[0].body["model"], "gpt-test");
    let second = o[1].body["messages"].to_string();
    assert!(second.contains("child summary"), "{second}");
}

#[tokio::test]
async fn depth_cap_stops_a_chain_of_delegating_agents() {
    let mut d = worker("chain");
    d.can_delegate = true;
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "chain", prompt = "level 1" } }]
        [[scripts.turns]]
        text = "{{tool_results}}"
        [[scripts]]
        agent = "chain"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "chain", prompt = "deeper" } }]
        [[scripts.turns]]
        text = "<{{tool_results}}>"
        "#,
        Options {
            defs: vec![d],
            tweak: Box::new(|c| c.max_depth = 2),
            ..Default::default()
        },
    );
    let (out, _s) = f.run("go").await;
    let chain = f.rec.of("chain");
    // depth 1 may delegate (gets `task`), depth 2 is at the cap: no delegation tools offered.
    assert_eq!(chain.len(), 4, "two chain levels, two turns each");
    let offered: Vec<bool> = chain
        .iter()
        .map(|r| r.tools.iter().any(|t| t.name == "task"))
        .collect();
    assert_eq!(
        offered.iter().filter(|o| **o).count(),
        2,
        "only the depth-1 agent's two turns offer task"
    );
    // The depth-2 agent tried anyway (its script calls task): it is told why it cannot.
    assert!(
        out.output.contains("maximum spawn depth exceeded (max=2)"),
        "{}",
        out.output
    );
    assert!(!out.output.contains("unknown tool"), "{}", out.output);
    // And a spawn from a run already at the cap is refused with the depth error.
    let s = f.session();
    let mut at_cap = (*f.run_context(&s)).clone();
    at_cap.depth = 2;
    let parent = f
        .runtime
        .top_level_parent(Arc::new(at_cap), f.cancel.clone());
    let req = SpawnRequest {
        agent: "chain".into(),
        prompt: "too deep".into(),
        description: "x".into(),
        background: false,
        isolation: None,
        call_id: None,
    };
    let err = f.runtime.spawn(req, &parent).await.unwrap_err();
    assert_eq!(err.to_string(), "maximum spawn depth exceeded (max=2)");
}

#[tokio::test]
async fn the_guard_refuses_delegation_even_when_a_registry_offers_it_by_mistake() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "leaf"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "worker", prompt = "sneaky" } }]
        [[scripts.turns]]
        text = "{{tool_results}}"
        "#,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    // A leaf built wrongly on purpose: its registry contains `task`.
    let wrong = ToolRegistry::new().with(Arc::new(TaskTool::new(&f.runtime)));
    let leaf = Agent::builder("leaf", f.parent.config().model.clone())
        .tools(wrong)
        .hook(Arc::new(DelegationGuard::new(false, 3)))
        .build();
    let mut s = Session::in_memory(SessionMeta {
        id: "sub-x".into(),
        agent: "leaf".into(),
        model: "rec:test".into(),
        created_at: 0,
        parent_session_id: None,
    });
    let mut ctx = (*f.run_context(&s)).clone();
    ctx.agent = "leaf".into();
    ctx.depth = 1;
    let run = Arc::new(ctx);
    let out = leaf
        .run(
            &mut s,
            Some("go".into()),
            run,
            Arc::new(Workspace::new(&f.ws).unwrap()),
            f.cancel.clone(),
        )
        .await;
    assert_eq!(out.state, EndState::Completed);
    assert!(
        out.output.contains("blocked: task is not available"),
        "{}",
        out.output
    );
    assert!(f.rec.of("worker").is_empty(), "no child was started");
    assert!(
        s.messages()
            .iter()
            .any(|m| matches!(m, Message::Tool { is_error: true, .. }))
    );
}
