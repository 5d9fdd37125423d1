//! The engine against the real HTTP providers, talking to the mock OpenAI and Anthropic
//! servers of `cadre-testkit`: a tool call and a final answer, streamed and not, with
//! checks on what went over the wire (model, stream flag, tools, system prompt placement,
//! the assistant's tool call and the tool result tied to it by id), and a streamed OpenAI
//! reply whose two tool calls arrive interleaved.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_llm::anthropic::AnthropicProvider;
use cadre_llm::openai::OpenAiProvider;
use cadre_llm::{ProviderConfig, ResolvedModel};
use cadre_testkit::{
    AnthropicJson, AnthropicStream, MockServer, OpenAiJson, OpenAiStream, RecordedRequest,
};
use cadre_tools::ToolRegistry;
use cadre_types::{EndState, Message};
use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SYSTEM: &str = "You are a test agent. Use the echo tool.";
const PROMPT: &str = "say hello through the tool";
const ANSWER: &str = "The tool said echo:hello.";
/// A variable cargo always sets when it runs tests; stands in for an API key.
const KEY_ENV: &str = "CARGO_PKG_NAME";

fn provider_config(base_url: String, stream: bool) -> ProviderConfig {
    ProviderConfig {
        base_url: Some(base_url),
        api_key_env: Some(KEY_ENV.into()),
        stream: Some(stream),
        max_attempts: Some(1),
        idle_timeout_secs: Some(10),
        ..Default::default()
    }
}

fn openai_model(mock: &MockServer, stream: bool) -> ResolvedModel {
    let provider =
        OpenAiProvider::from_config("mockai", &provider_config(mock.openai_base_url(), stream))
            .unwrap();
    ResolvedModel {
        provider: Arc::new(provider),
        model: "gpt-mock".into(),
        spec: "mockai:gpt-mock".into(),
        price: None,
    }
}

fn anthropic_model(mock: &MockServer, stream: bool) -> ResolvedModel {
    let provider =
        AnthropicProvider::from_config("anthropic", &provider_config(mock.base_url(), stream))
            .unwrap();
    ResolvedModel {
        provider: Arc::new(provider),
        model: "claude-mock".into(),
        spec: "anthropic:claude-mock".into(),
        price: None,
    }
}

fn echo_tools() -> ToolRegistry {
    ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo))
}

/// The key the provider read from [`KEY_ENV`], when the variable is set.
fn expected_key() -> Option<String> {
    std::env::var(KEY_ENV).ok().filter(|v| !v.trim().is_empty())
}

/// Run the echo agent on `model` and check the outcome and the session.
async fn run_echo_agent(model: ResolvedModel, call_id: &str) {
    let agent = builder(model)
        .system_prompt(SYSTEM)
        .tools(echo_tools())
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let out = tokio::time::timeout(Duration::from_secs(30), h.run(&agent, &mut session, PROMPT))
        .await
        .expect("run finished");
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert_eq!(out.output, ANSWER);
    assert_eq!(out.turns, 2);
    assert_eq!(out.usage.input_tokens, 50, "{:?}", out.usage);
    assert_eq!(out.usage.output_tokens, 11, "{:?}", out.usage);
    let tool_results: Vec<(String, String, bool)> = session
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => Some((tool_call_id.clone(), content.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        tool_results,
        vec![(call_id.to_string(), "echo:hello".to_string(), false)]
    );
}

/// The arguments of a wire tool call, parsed (they travel as a JSON string).
fn parsed_arguments(call: &Value) -> Value {
    serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap()
}

/// Checks shared by every OpenAI request of these tests.
fn check_openai_request(req: &RecordedRequest, stream: bool) {
    assert_eq!(req.path, "/v1/chat/completions");
    let body = &req.body;
    assert_eq!(body["model"], "gpt-mock");
    assert_eq!(body["stream"], json!(stream));
    assert_eq!(req.wants_stream(), stream);
    if stream {
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
    } else {
        assert!(body.get("stream_options").is_none(), "{body}");
    }
    if let Some(key) = expected_key() {
        assert_eq!(
            req.header("authorization"),
            Some(format!("Bearer {key}").as_str())
        );
    }
    assert_eq!(
        body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "echo",
                "description": "test tool",
                "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
            }
        }])
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0], json!({"role": "system", "content": SYSTEM}));
    assert_eq!(messages[1], json!({"role": "user", "content": PROMPT}));
    let systems = messages.iter().filter(|m| m["role"] == "system").count();
    assert_eq!(systems, 1, "{body}");
}

/// The second OpenAI request carries the assistant's tool call and the tool result.
fn check_openai_follow_up(req: &RecordedRequest) {
    let messages = req.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{}", req.body);
    let assistant = &messages[2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"], "Let me check.");
    let calls = assistant["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["id"], "call_1");
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "echo");
    assert_eq!(parsed_arguments(&calls[0]), json!({"text": "hello"}));
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "echo:hello"})
    );
}

async fn openai_round_trip(stream: bool) {
    let mock = MockServer::start().await.unwrap();
    if stream {
        mock.push_openai(
            OpenAiStream::new()
                .role()
                .text("Let me ")
                .text("check.")
                .tool_call_start(0, "call_1", "echo")
                .tool_call_args(0, "{\"text\":")
                .tool_call_args(0, "\"hello\"}")
                .finish("tool_calls")
                .usage(20, 5, 0)
                .done()
                .into_reply(),
        );
        mock.push_openai(
            OpenAiStream::new()
                .role()
                .text("The tool said ")
                .text("echo:hello.")
                .finish("stop")
                .usage(30, 6, 0)
                .done()
                .into_reply(),
        );
    } else {
        mock.push_openai(
            OpenAiJson::new()
                .text("Let me check.")
                .tool_call("call_1", "echo", "{\"text\":\"hello\"}")
                .usage(20, 5, 0)
                .into_reply(),
        );
        mock.push_openai(OpenAiJson::new().text(ANSWER).usage(30, 6, 0).into_reply());
    }

    run_echo_agent(openai_model(&mock, stream), "call_1").await;

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    for req in &reqs {
        check_openai_request(req, stream);
    }
    assert_eq!(reqs[0].body["messages"].as_array().unwrap().len(), 2);
    check_openai_follow_up(&reqs[1]);
    assert_eq!(mock.pending_replies(), (0, 0));
}

#[tokio::test]
async fn openai_streaming_tool_call_round_trip() {
    openai_round_trip(true).await;
}

#[tokio::test]
async fn openai_non_streaming_tool_call_round_trip() {
    openai_round_trip(false).await;
}

/// Checks shared by every Anthropic request of these tests.
fn check_anthropic_request(req: &RecordedRequest, stream: bool) {
    assert_eq!(req.path, "/v1/messages");
    let body = &req.body;
    assert_eq!(body["model"], "claude-mock");
    assert_eq!(body["stream"], json!(stream));
    assert_eq!(req.wants_stream(), stream);
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.header("authorization"), None);
    if let Some(key) = expected_key() {
        assert_eq!(req.header("x-api-key"), Some(key.as_str()));
    }
    assert!(body["max_tokens"].as_u64().is_some_and(|n| n > 0), "{body}");
    // The system prompt is top-level (the Messages API has no system role), as one text
    // block with a cache breakpoint; the last tool and the latest message carry one too.
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": SYSTEM, "cache_control": ephemeral}])
    );
    let messages = body["messages"].as_array().unwrap();
    assert!(messages.iter().all(|m| m["role"] != "system"), "{body}");
    let last = messages.last().unwrap()["content"].as_array().unwrap();
    assert_eq!(last.last().unwrap()["cache_control"], ephemeral, "{body}");
    assert_eq!(
        req.raw
            .windows(13)
            .filter(|w| w == b"cache_control")
            .count(),
        3
    );
    assert_eq!(
        without_breakpoints(&messages[0]),
        json!({"role": "user", "content": [{"type": "text", "text": PROMPT}]})
    );
    assert_eq!(
        body["tools"],
        json!([{
            "name": "echo",
            "description": "test tool",
            "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
            "cache_control": ephemeral,
        }])
    );
}

/// `v` without its `cache_control` markers.
fn without_breakpoints(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(map) => map
            .iter()
            .filter(|(k, _)| *k != "cache_control")
            .map(|(k, v)| (k.clone(), without_breakpoints(v)))
            .collect(),
        serde_json::Value::Array(items) => items.iter().map(without_breakpoints).collect(),
        other => other.clone(),
    }
}

/// The second Anthropic request carries the assistant's tool_use and the tool_result.
fn check_anthropic_follow_up(req: &RecordedRequest) {
    let messages = req.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{}", req.body);
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "hello"}},
        ]})
    );
    assert_eq!(
        without_breakpoints(&messages[2]),
        json!({"role": "user", "content": [{
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "echo:hello",
            "is_error": false,
        }]})
    );
}

async fn anthropic_round_trip(stream: bool) {
    let mock = MockServer::start().await.unwrap();
    if stream {
        mock.push_anthropic(
            AnthropicStream::new()
                .start(20, 0)
                .text(&["Let me ", "check."])
                .ping()
                .tool_use("toolu_1", "echo", &["{\"text\":", "\"hello\"}"])
                .stop("tool_use", 5)
                .into_reply(),
        );
        mock.push_anthropic(
            AnthropicStream::new()
                .start(30, 0)
                .text(&["The tool said ", "echo:hello."])
                .stop("end_turn", 6)
                .into_reply(),
        );
    } else {
        mock.push_anthropic(
            AnthropicJson::new()
                .text("Let me check.")
                .tool_use("toolu_1", "echo", json!({"text": "hello"}))
                .usage(20, 5, 0)
                .into_reply(),
        );
        mock.push_anthropic(
            AnthropicJson::new()
                .text(ANSWER)
                .usage(30, 6, 0)
                .into_reply(),
        );
    }

    run_echo_agent(anthropic_model(&mock, stream), "toolu_1").await;

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    for req in &reqs {
        check_anthropic_request(req, stream);
    }
    assert_eq!(reqs[0].body["messages"].as_array().unwrap().len(), 1);
    check_anthropic_follow_up(&reqs[1]);
    assert_eq!(mock.pending_replies(), (0, 0));
}

#[tokio::test]
async fn anthropic_streaming_tool_call_round_trip() {
    anthropic_round_trip(true).await;
}

#[tokio::test]
async fn anthropic_non_streaming_tool_call_round_trip() {
    anthropic_round_trip(false).await;
}

#[tokio::test]
async fn openai_interleaved_parallel_tool_calls_run_and_return_in_call_order() {
    let mock = MockServer::start().await.unwrap();
    // Two calls whose fragments alternate; the decoder must assemble them by index.
    mock.push_openai(
        OpenAiStream::new()
            .role()
            .tool_call_start(0, "call_a", "meet")
            .tool_call_start(1, "call_b", "meet")
            .tool_call_args(1, "{\"text\":")
            .tool_call_args(0, "{\"text\":")
            .tool_call_args(0, "\"c1\"}")
            .tool_call_args(1, "\"c2\"}")
            .finish("tool_calls")
            .done()
            .into_reply(),
    );
    mock.push_openai(
        OpenAiStream::new()
            .text("both met")
            .finish("stop")
            .done()
            .into_reply(),
    );
    // Both calls must be inside the tool at once to pass the barrier; the second
    // finishes first (see Behaviour::Barrier).
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let finished = Arc::new(Mutex::new(Vec::new()));
    let tools = ToolRegistry::new().with(TestTool::new(
        "meet",
        Behaviour::Barrier(barrier, finished.clone()),
    ));
    let agent = builder(openai_model(&mock, true))
        .system_prompt(SYSTEM)
        .tools(tools)
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let out = tokio::time::timeout(Duration::from_secs(10), h.run(&agent, &mut session, "go"))
        .await
        .expect("both calls ran concurrently");
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert_eq!(out.output, "both met");
    assert_eq!(*finished.lock().unwrap(), vec!["c2", "c1"]);

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let messages = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5, "{}", reqs[1].body);
    let calls = messages[2]["tool_calls"].as_array().unwrap();
    let sent: Vec<(&str, Value)> = calls
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), parsed_arguments(c)))
        .collect();
    assert_eq!(
        sent,
        vec![
            ("call_a", json!({"text": "c1"})),
            ("call_b", json!({"text": "c2"})),
        ]
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_a", "content": "done:c1"})
    );
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": "call_b", "content": "done:c2"})
    );
}
