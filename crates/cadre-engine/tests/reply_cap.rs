//! A model reply is capped: an endless reply from the mock server (text, tool-call
//! arguments, one SSE event that never ends, or more tokens than `max_output_tokens`) ends
//! the run `limit reached (reply too long)` with the text that arrived, and no tool runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_llm::anthropic::AnthropicProvider;
use cadre_llm::openai::OpenAiProvider;
use cadre_llm::{ProviderConfig, ResolvedModel};
use cadre_testkit::{AnthropicStream, MockServer, OpenAiStream};
use cadre_tools::ToolRegistry;
use cadre_types::{EndState, Event, LimitKind, Message};
use common::*;
use std::sync::Arc;
use std::time::Duration;

const CAP: usize = 256 * 1024;

fn config(base_url: String) -> ProviderConfig {
    ProviderConfig {
        base_url: Some(base_url),
        max_attempts: Some(1),
        idle_timeout_secs: Some(10),
        ..Default::default()
    }
}

fn openai(mock: &MockServer) -> ResolvedModel {
    let provider = OpenAiProvider::from_config("mockai", &config(mock.openai_base_url())).unwrap();
    ResolvedModel {
        provider: Arc::new(provider),
        model: "gpt-mock".into(),
        spec: "mockai:gpt-mock".into(),
        price: None,
    }
}

fn anthropic(mock: &MockServer) -> ResolvedModel {
    let provider = AnthropicProvider::from_config("anthropic", &config(mock.base_url())).unwrap();
    ResolvedModel {
        provider: Arc::new(provider),
        model: "claude-mock".into(),
        spec: "anthropic:claude-mock".into(),
        price: None,
    }
}

/// Run an agent with the `echo` tool under `CAP` (and `max_output_tokens`, when given),
/// check that it ended `limit reached (reply too long)` with a `Done` event saying so, and
/// return its output and whether the tool ran.
async fn run_capped(model: ResolvedModel, max_output_tokens: Option<u32>) -> (String, bool) {
    let mut b = builder(model)
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .max_reply_bytes(CAP);
    if let Some(n) = max_output_tokens {
        b = b.max_output_tokens(n);
    }
    let agent = b.build();
    let h = Harness::new();
    let mut session = h.session();
    // Without the cap the run never ends (or runs out of memory): fail after a deadline.
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        h.run(&agent, &mut session, "talk forever"),
    )
    .await
    .expect("the endless reply was not cut off");
    let too_long = EndState::LimitReached {
        limit: LimitKind::ReplyTooLong,
    };
    assert_eq!(out.state, too_long, "{}", out.output.len());
    assert_eq!(out.state.to_string(), "limit reached (reply too long)");
    let done = h.events.events().into_iter().find_map(|e| match e {
        Event::Done { state, .. } => Some(state),
        _ => None,
    });
    assert_eq!(done, Some(too_long));
    assert!(out.output.len() <= CAP, "{}", out.output.len());
    let ran = session
        .messages()
        .iter()
        .any(|m| matches!(m, Message::Tool { .. }));
    (out.output, ran)
}

#[tokio::test]
async fn an_endless_text_reply_ends_limit_reached_with_the_partial_text() {
    let mock = MockServer::start().await.unwrap();
    let chunk = "loop ".repeat(64 * 1024 / 5);
    mock.push_openai(
        OpenAiStream::new()
            .role()
            .text("Here is the start. ")
            .text(&chunk)
            .into_reply()
            .repeat_last(),
    );
    let (output, ran) = run_capped(openai(&mock), None).await;
    assert!(!ran);
    assert!(
        output.starts_with("Here is the start. loop loop"),
        "{}",
        &output[..40]
    );
    assert!(output.len() > CAP / 2, "{}", output.len());
}

#[tokio::test]
async fn endless_tool_call_arguments_are_dropped_and_the_tool_never_runs() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .text("calling")
            .tool_call_start(0, "call_1", "echo")
            .tool_call_args(0, "{\"text\":\"")
            .tool_call_args(0, &"a".repeat(16 * 1024))
            .into_reply()
            .repeat_last(),
    );
    let (output, ran) = run_capped(openai(&mock), None).await;
    assert!(!ran, "a tool ran from a partial call");
    assert_eq!(output, "calling");

    let mock = MockServer::start().await.unwrap();
    mock.push_anthropic(
        AnthropicStream::new()
            .tool_use_open("toolu_1", "echo", &[&"a".repeat(16 * 1024)])
            .0
            .into_reply()
            .repeat_last(),
    );
    let (_, ran) = run_capped(anthropic(&mock), None).await;
    assert!(!ran, "a tool ran from a partial call");
}

#[tokio::test]
async fn one_sse_event_that_never_ends_is_dropped() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .text("before")
            .raw("data: {\"choices\":[{\"delta\":{\"content\":\"")
            .raw("x".repeat(32 * 1024))
            .into_reply()
            .repeat_last(),
    );
    let (output, _) = run_capped(openai(&mock), None).await;
    assert_eq!(output, "before");
}

#[tokio::test]
async fn cadre_counts_output_tokens_itself() {
    let mock = MockServer::start().await.unwrap();
    // A server that ignores `max_tokens`: small deltas, without end.
    mock.push_openai(OpenAiStream::new().text("word ").into_reply().repeat_last());
    let (output, _) = run_capped(openai(&mock), Some(100)).await;
    // 100 tokens with the estimate's margin (a quarter) at four bytes a token.
    assert!(
        output.len() <= 500 && output.len() >= 400,
        "{}",
        output.len()
    );
    let request = &mock.requests()[0];
    assert_eq!(request.body["max_tokens"], 100);
}
