//! Whole (non-streamed) Messages API replies, decoded into the events a stream gives.

use super::stream::{WireUsage, str_field};
use crate::{ProviderError, StreamEvent};
use cadre_types::{ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct FullReply {
    id: Option<String>,
    #[serde(default)]
    content: Vec<Value>,
    stop_reason: Option<String>,
    #[serde(default)]
    usage: WireUsage,
}

/// Decode a whole (non-streamed) Messages reply into the events a stream would give.
pub(super) fn parse_full(provider: &str, body: &[u8]) -> Result<Vec<StreamEvent>, ProviderError> {
    let reply: FullReply = serde_json::from_slice(body).map_err(|e| ProviderError::Stream {
        provider: provider.to_string(),
        message: format!("cannot decode reply: {e}"),
        after_tool_call: false,
    })?;
    let mut out = Vec::new();
    for block in &reply.content {
        match str_field(block, "type") {
            "text" => {
                let text = str_field(block, "text");
                if !text.is_empty() {
                    out.push(StreamEvent::TextDelta(text.to_string()));
                }
            }
            "thinking" => {
                out.push(StreamEvent::ThinkingDelta(
                    str_field(block, "thinking").into(),
                ));
                let signature = str_field(block, "signature");
                if !signature.is_empty() {
                    out.push(StreamEvent::ThinkingSignature(signature.to_string()));
                }
            }
            "tool_use" => out.push(StreamEvent::ToolCall(ToolCall {
                id: str_field(block, "id").to_string(),
                name: str_field(block, "name").to_string(),
                arguments: block
                    .get("input")
                    .filter(|v| v.is_object())
                    .map_or_else(|| "{}".to_string(), Value::to_string),
            })),
            _ => {}
        }
    }
    let mut usage = Usage {
        output_tokens: reply.usage.output_tokens.unwrap_or(0),
        ..Usage::default()
    };
    reply.usage.fill_input(&mut usage);
    out.push(StreamEvent::Usage(usage));
    if let Some(id) = reply.id.filter(|i| !i.is_empty()) {
        out.push(StreamEvent::ResponseId(id));
    }
    out.push(StreamEvent::Done {
        stop_reason: reply.stop_reason,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_become_events() {
        let body = br#"{"content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"ok"},
            {"type":"tool_use","id":"t","name":"f","input":{"p":"x"}}],
            "stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":5,
            "cache_creation_input_tokens":7}}"#;
        let out = parse_full("anthropic", body).unwrap();
        assert_eq!(out[0], StreamEvent::ThinkingDelta("t".into()));
        assert_eq!(out[1], StreamEvent::ThinkingSignature("s".into()));
        assert_eq!(out[2], StreamEvent::TextDelta("ok".into()));
        assert!(matches!(&out[3], StreamEvent::ToolCall(c) if c.arguments == r#"{"p":"x"}"#));
        assert_eq!(
            out[4],
            StreamEvent::Usage(Usage {
                input_tokens: 15,
                output_tokens: 4,
                cached_input_tokens: 5,
                cache_write_tokens: 7,
                ..Usage::default()
            })
        );
        assert_eq!(out.len(), 6);
        assert!(parse_full("anthropic", b"[]").is_err());
    }
}
