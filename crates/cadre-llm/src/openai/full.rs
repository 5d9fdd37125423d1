//! Whole (non-streamed) Chat Completions replies, decoded into the events a stream gives.

use super::stream::{PartialCall, WireUsage};
use crate::{ProviderError, StreamEvent};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Completion {
    id: Option<String>,
    #[serde(default)]
    choices: Vec<FullChoice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct FullChoice {
    message: FullMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct FullMessage {
    content: Option<Value>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Option<Vec<FullToolCall>>,
}

#[derive(Deserialize)]
struct FullToolCall {
    id: Option<String>,
    function: FullFunction,
}

#[derive(Deserialize)]
struct FullFunction {
    name: String,
    arguments: Option<Value>,
}

/// Text of a `content` that is a string or a list of `{type: text, text}` parts.
fn content_text(content: Value) -> String {
    match content {
        Value::String(s) => s,
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// Decode a whole (non-streamed) Chat Completions reply into the events a stream would give.
pub(super) fn parse_full(provider: &str, body: &[u8]) -> Result<Vec<StreamEvent>, ProviderError> {
    let reply: Completion = serde_json::from_slice(body).map_err(|e| ProviderError::Stream {
        provider: provider.to_string(),
        message: format!("cannot decode reply: {e}"),
        after_tool_call: false,
    })?;
    let mut out = Vec::new();
    let mut stop_reason = None;
    if let Some(choice) = reply.choices.into_iter().next() {
        let m = choice.message;
        for thinking in [m.reasoning_content, m.reasoning].into_iter().flatten() {
            if !thinking.is_empty() {
                out.push(StreamEvent::ThinkingDelta(thinking));
            }
        }
        let text = m.content.map(content_text).unwrap_or_default();
        if !text.is_empty() {
            out.push(StreamEvent::TextDelta(text));
        }
        for call in m.tool_calls.into_iter().flatten() {
            let arguments = match call.function.arguments {
                Some(Value::String(s)) => s,
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            let partial = PartialCall {
                id: call.id.unwrap_or_default(),
                name: call.function.name,
                arguments,
            };
            out.push(StreamEvent::ToolCall(partial.finish()));
        }
        stop_reason = choice.finish_reason;
    }
    if let Some(usage) = reply.usage {
        out.push(StreamEvent::Usage(usage.into()));
    }
    if let Some(id) = reply.id.filter(|i| !i.is_empty()) {
        out.push(StreamEvent::ResponseId(id));
    }
    out.push(StreamEvent::Done { stop_reason });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_text_and_usage() {
        let full = br#"{"choices":[{"message":{"role":"assistant","content":[{"type":"text","text":"hi"}],
            "tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#;
        let events = parse_full("p", full).unwrap();
        assert_eq!(events.len(), 4);
        assert_eq!(events[0], StreamEvent::TextDelta("hi".into()));
        assert!(matches!(&events[1], StreamEvent::ToolCall(c) if c.arguments == r#"{"a":1}"#));
        assert!(
            matches!(&events[3], StreamEvent::Done { stop_reason: Some(r) } if r == "tool_calls")
        );
        assert!(parse_full("p", b"not json").is_err());
    }
}
