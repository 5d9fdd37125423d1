//! Duplicate tool-call ids from a model — within one reply, and across turns like a local
//! server that answers `call_0` every time — are renamed before they are recorded and sent
//! back, so every result in the next request pairs with exactly one call, its own. Checked
//! on the wire the mock OpenAI and Anthropic servers of `cadre-testkit` record.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_llm::anthropic::AnthropicProvider;
use cadre_llm::openai::OpenAiProvider;
use cadre_llm::{Provider, ProviderConfig, ResolvedModel};
use cadre_testkit::{AnthropicJson, MockServer, OpenAiJson};
use cadre_tools::ToolRegistry;
use cadre_types::EndState;
use common::*;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

fn model(provider: Arc<dyn Provider>) -> ResolvedModel {
    ResolvedModel {
        provider,
        model: "mock".into(),
        spec: "mock:mock".into(),
        price: None,
    }
}

fn config(base_url: String) -> ProviderConfig {
    ProviderConfig {
        base_url: Some(base_url),
        // A variable cargo always sets, standing in for an API key.
        api_key_env: Some("CARGO_PKG_NAME".into()),
        stream: Some(false),
        max_attempts: Some(1),
        ..Default::default()
    }
}

async fn run(model: ResolvedModel) {
    let agent = builder(model)
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let out = tokio::time::timeout(Duration::from_secs(30), h.run(&agent, &mut session, "go"))
        .await
        .expect("run finished");
    assert_eq!(out.state, EndState::Completed, "{out:?}");
}

/// Every call (id, the text it echoes) and every result (id, content) of a request, in order.
type Wire = (Vec<(String, String)>, Vec<(String, String)>);

/// The calls are unique and each result answers exactly its own call.
fn check(wire: &Wire, calls: usize) {
    let (calls_seen, results) = wire;
    assert_eq!(calls_seen.len(), calls, "{wire:?}");
    let ids: HashSet<&str> = calls_seen.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids.len(), calls, "ids repeat: {wire:?}");
    assert_eq!(results.len(), calls, "{wire:?}");
    for ((call_id, text), (result_id, content)) in calls_seen.iter().zip(results) {
        assert_eq!(call_id, result_id, "{wire:?}");
        assert_eq!(content, &format!("echo:{text}"), "{wire:?}");
    }
}

fn openai_wire(body: &Value) -> Wire {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            let args: Value =
                serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
            calls.push((
                c["id"].as_str().unwrap().into(),
                args["text"].as_str().unwrap().into(),
            ));
        }
        if m["role"] == "tool" {
            results.push((
                m["tool_call_id"].as_str().unwrap().into(),
                m["content"].as_str().unwrap().into(),
            ));
        }
    }
    (calls, results)
}

fn anthropic_wire(body: &Value) -> Wire {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_use" {
                calls.push((
                    b["id"].as_str().unwrap().into(),
                    b["input"]["text"].as_str().unwrap().into(),
                ));
            } else if b["type"] == "tool_result" {
                results.push((
                    b["tool_use_id"].as_str().unwrap().into(),
                    b["content"].as_str().unwrap().into(),
                ));
            }
        }
    }
    (calls, results)
}

#[tokio::test]
async fn openai_duplicate_call_ids_are_renamed_before_they_go_back() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiJson::new()
            .tool_call("call_0", "echo", r#"{"text":"a"}"#)
            .tool_call("call_0", "echo", r#"{"text":"b"}"#)
            .into_reply(),
    );
    mock.push_openai(
        OpenAiJson::new()
            .tool_call("call_0", "echo", r#"{"text":"c"}"#)
            .into_reply(),
    );
    mock.push_openai(OpenAiJson::new().text("done").into_reply());
    let provider = OpenAiProvider::from_config("mockai", &config(mock.openai_base_url())).unwrap();
    run(model(Arc::new(provider))).await;
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    check(&openai_wire(&reqs[1].body), 2);
    check(&openai_wire(&reqs[2].body), 3);
    // The first call keeps the id the model gave it.
    assert_eq!(openai_wire(&reqs[2].body).0[0].0, "call_0");
}

#[tokio::test]
async fn anthropic_duplicate_call_ids_are_renamed_before_they_go_back() {
    let mock = MockServer::start().await.unwrap();
    mock.push_anthropic(
        AnthropicJson::new()
            .tool_use("toolu_0", "echo", json!({"text": "a"}))
            .tool_use("toolu_0", "echo", json!({"text": "b"}))
            .stop_reason("tool_use")
            .into_reply(),
    );
    mock.push_anthropic(
        AnthropicJson::new()
            .tool_use("toolu_0", "echo", json!({"text": "c"}))
            .stop_reason("tool_use")
            .into_reply(),
    );
    mock.push_anthropic(AnthropicJson::new().text("done").into_reply());
    let provider = AnthropicProvider::from_config("anthropic", &config(mock.base_url())).unwrap();
    run(model(Arc::new(provider))).await;
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    check(&anthropic_wire(&reqs[1].body), 2);
    check(&anthropic_wire(&reqs[2].body), 3);
}
