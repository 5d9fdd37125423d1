//! Shared helpers for the provider integration tests: providers pointed at a mock server
//! with short retry delays, a standard request, and stream collection.

#![allow(dead_code)]

use cadre_llm::anthropic::AnthropicProvider;
use cadre_llm::openai::OpenAiProvider;
use cadre_llm::{ModelRequest, Provider, ProviderConfig, ProviderError, RetryPolicy, StreamEvent};
use cadre_testkit::MockServer;
use cadre_types::{Message, ToolCall, ToolDefinition};
use futures::StreamExt;
use serde_json::json;
use std::time::Duration;

/// An environment variable cargo always sets for test binaries, used as a stand-in API key
/// (tests never mutate the process environment).
pub const KEY_VAR: &str = "CARGO_PKG_NAME";

/// The value of [`KEY_VAR`].
pub fn key() -> String {
    std::env::var(KEY_VAR).unwrap()
}

/// Provider settings pointing at `base`.
pub fn config(base: String, stream: bool) -> ProviderConfig {
    ProviderConfig {
        base_url: Some(base),
        api_key_env: Some(KEY_VAR.into()),
        stream: Some(stream),
        idle_timeout_secs: Some(5),
        ..Default::default()
    }
}

/// Short backoff so retry tests stay fast.
pub fn fast_retries() -> RetryPolicy {
    RetryPolicy::default().with_base_delay(Duration::from_millis(5))
}

/// An OpenAI provider named `openai` talking to the mock.
pub fn openai(mock: &MockServer, stream: bool) -> OpenAiProvider {
    openai_with(config(mock.openai_base_url(), stream))
}

/// An OpenAI provider named `openai` built from `cfg`, with fast retries.
pub fn openai_with(cfg: ProviderConfig) -> OpenAiProvider {
    OpenAiProvider::from_config("openai", &cfg)
        .unwrap()
        .with_retry_policy(fast_retries())
}

/// An Anthropic provider named `anthropic` talking to the mock.
pub fn anthropic(mock: &MockServer, stream: bool) -> AnthropicProvider {
    anthropic_with(config(mock.base_url(), stream))
}

/// An Anthropic provider named `anthropic` built from `cfg`, with fast retries.
pub fn anthropic_with(cfg: ProviderConfig) -> AnthropicProvider {
    AnthropicProvider::from_config("anthropic", &cfg)
        .unwrap()
        .with_retry_policy(fast_retries())
}

/// The `read_file` tool.
pub fn read_file_tool() -> ToolDefinition {
    ToolDefinition {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"]
        }),
    }
}

/// A request with a system prompt, the given messages and the `read_file` tool.
pub fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
        system: "You are terse.".into(),
        messages,
        tools: vec![read_file_tool()],
        ..Default::default()
    }
}

/// A tool call.
pub fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

/// A tool result message.
pub fn tool_result(id: &str, content: &str, is_error: bool) -> Message {
    Message::Tool {
        tool_call_id: id.into(),
        name: "read_file".into(),
        content: content.into(),
        is_error,
        images: Vec::new(),
    }
}

/// An assistant message with only tool calls.
pub fn assistant_calls(calls: Vec<ToolCall>) -> Message {
    Message::Assistant {
        content: String::new(),
        thinking: None,
        thinking_signature: None,
        tool_calls: calls,
    }
}

/// All events of a reply, and the error that ended it, if any.
pub async fn run(
    provider: &dyn Provider,
    request: ModelRequest,
) -> (Vec<StreamEvent>, Option<ProviderError>) {
    let mut stream = provider.stream(request);
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(ev) => events.push(ev),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

/// The concatenated text deltas.
pub fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// The tool calls.
pub fn calls_of(events: &[StreamEvent]) -> Vec<ToolCall> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

/// A tool result carrying one PNG image, after the call that asked for it.
pub fn history_with_image() -> Vec<Message> {
    vec![
        Message::user("look"),
        assistant_calls(vec![
            call("c1", "shot", "{}"),
            call("c2", "read_file", r#"{"path":"a"}"#),
        ]),
        Message::Tool {
            tool_call_id: "c1".into(),
            name: "shot".into(),
            content: "[image image/png, 4 bytes, saved to x.png]".into(),
            is_error: false,
            images: vec![cadre_types::Image {
                media_type: "image/png".into(),
                data: "iVBORw==".into(),
            }],
        },
        tool_result("c2", "text", false),
    ]
}
