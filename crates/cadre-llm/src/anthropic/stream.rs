//! Streamed Messages API replies: the SSE event decoder (content blocks,
//! `input_json_delta` assembly, thinking signatures, usage).

use super::{map_error, status_of};
use crate::http::{SseDecoder, Unfinished};
use crate::{ProviderError, StreamEvent};
use cadre_types::{ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

#[derive(Deserialize, Default)]
pub(super) struct WireUsage {
    input_tokens: Option<u64>,
    pub(super) output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Input counts cached and cache-writing tokens too, as [`Usage`] documents.
    pub(super) fn input(&self) -> u64 {
        self.input_tokens.unwrap_or(0)
            + self.cache_read_input_tokens.unwrap_or(0)
            + self.cache_creation_input_tokens.unwrap_or(0)
    }

    /// Copy the input side (all input, cache reads, cache writes) into `usage`.
    pub(super) fn fill_input(&self, usage: &mut Usage) {
        usage.input_tokens = self.input();
        usage.cached_input_tokens = self.cache_read_input_tokens.unwrap_or(0);
        usage.cache_write_tokens = self.cache_creation_input_tokens.unwrap_or(0);
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: Value,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        #[serde(default)]
        delta: Value,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    id: Option<String>,
    #[serde(default)]
    model: String,
    #[serde(default)]
    usage: WireUsage,
}

/// A content block still arriving.
enum Block {
    Text,
    Thinking {
        signature: String,
    },
    Tool {
        id: String,
        name: String,
        json: String,
        initial: Option<String>,
    },
    Other,
}

pub(super) fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Decodes one streamed Messages reply.
pub(super) struct Decoder {
    provider: String,
    auth_hint: String,
    model: String,
    blocks: HashMap<usize, Block>,
    usage: Usage,
    stop_reason: Option<String>,
    /// The reply's id, from `message_start`.
    response_id: Option<String>,
}

impl Decoder {
    /// A decoder for a reply from `provider`; `auth_hint` names the key variable.
    pub(super) fn new(provider: &str, auth_hint: &str) -> Self {
        Self {
            provider: provider.to_string(),
            auth_hint: auth_hint.to_string(),
            model: String::new(),
            blocks: HashMap::new(),
            usage: Usage::default(),
            stop_reason: None,
            response_id: None,
        }
    }

    fn error(&self, message: String) -> ProviderError {
        ProviderError::Stream {
            provider: self.provider.clone(),
            message,
            after_tool_call: false,
        }
    }

    fn start_block(&mut self, index: usize, block: &Value, out: &mut Vec<StreamEvent>) {
        let state = match str_field(block, "type") {
            "text" => {
                let text = str_field(block, "text");
                if !text.is_empty() {
                    out.push(StreamEvent::TextDelta(text.to_string()));
                }
                Block::Text
            }
            "thinking" => {
                let thinking = str_field(block, "thinking");
                if !thinking.is_empty() {
                    out.push(StreamEvent::ThinkingDelta(thinking.to_string()));
                }
                Block::Thinking {
                    signature: str_field(block, "signature").to_string(),
                }
            }
            "tool_use" => Block::Tool {
                id: str_field(block, "id").to_string(),
                name: str_field(block, "name").to_string(),
                json: String::new(),
                initial: block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                    .map(Value::to_string),
            },
            _ => Block::Other,
        };
        self.blocks.insert(index, state);
    }

    fn delta(&mut self, index: usize, delta: &Value, out: &mut Vec<StreamEvent>) {
        let block = self.blocks.get_mut(&index);
        match (str_field(delta, "type"), block) {
            ("text_delta", _) => {
                let text = str_field(delta, "text");
                if !text.is_empty() {
                    out.push(StreamEvent::TextDelta(text.to_string()));
                }
            }
            ("thinking_delta", _) => {
                let text = str_field(delta, "thinking");
                if !text.is_empty() {
                    out.push(StreamEvent::ThinkingDelta(text.to_string()));
                }
            }
            ("signature_delta", Some(Block::Thinking { signature })) => {
                signature.push_str(str_field(delta, "signature"));
            }
            ("input_json_delta", Some(Block::Tool { json, .. })) => {
                json.push_str(str_field(delta, "partial_json"));
            }
            _ => {}
        }
    }

    fn stop_block(&mut self, index: usize, out: &mut Vec<StreamEvent>) {
        match self.blocks.remove(&index) {
            Some(Block::Tool {
                id,
                name,
                json,
                initial,
            }) => {
                let arguments = if json.trim().is_empty() {
                    initial.unwrap_or_else(|| "{}".into())
                } else {
                    json
                };
                out.push(StreamEvent::ToolCall(ToolCall {
                    id,
                    name,
                    arguments,
                }));
            }
            Some(Block::Thinking { signature }) if !signature.is_empty() => {
                out.push(StreamEvent::ThinkingSignature(signature));
            }
            _ => {}
        }
    }
}

impl SseDecoder for Decoder {
    fn held_bytes(&self) -> usize {
        self.blocks
            .values()
            .map(|b| match b {
                Block::Tool {
                    id,
                    name,
                    json,
                    initial,
                } => id.len() + name.len() + json.len() + initial.as_ref().map_or(0, String::len),
                Block::Thinking { signature } => signature.len(),
                Block::Text | Block::Other => 0,
            })
            .sum()
    }

    fn tool_call_started(&self) -> bool {
        self.blocks
            .values()
            .any(|b| matches!(b, Block::Tool { .. }))
    }

    fn on_event(
        &mut self,
        _event: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, ProviderError> {
        if data.trim().is_empty() {
            return Ok(false);
        }
        let event: Event = serde_json::from_str(data)
            .map_err(|e| self.error(format!("cannot decode event {data:?}: {e}")))?;
        match event {
            Event::MessageStart { message } => {
                self.model = message.model;
                self.response_id = message.id.filter(|i| !i.is_empty());
                message.usage.fill_input(&mut self.usage);
                self.usage.output_tokens = message.usage.output_tokens.unwrap_or(0);
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, &content_block, out),
            Event::ContentBlockDelta { index, delta } => self.delta(index, &delta, out),
            Event::ContentBlockStop { index } => self.stop_block(index, out),
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.get("stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(usage) = usage {
                    if let Some(o) = usage.output_tokens {
                        self.usage.output_tokens = o;
                    }
                    if usage.input() > 0 {
                        usage.fill_input(&mut self.usage);
                    }
                }
            }
            Event::MessageStop => {
                out.push(StreamEvent::Usage(self.usage));
                if let Some(id) = self.response_id.take() {
                    out.push(StreamEvent::ResponseId(id));
                }
                out.push(StreamEvent::Done {
                    stop_reason: self.stop_reason.take(),
                });
                return Ok(true);
            }
            Event::Error { error } => {
                let kind = str_field(&error, "type");
                let message = str_field(&error, "message").to_string();
                return Err(map_error(
                    &self.provider,
                    &self.auth_hint,
                    status_of(kind),
                    kind,
                    message,
                    None,
                    &self.model,
                ));
            }
            Event::Ping | Event::Unknown => {}
        }
        Ok(false)
    }

    fn on_eof(&mut self, _out: &mut Vec<StreamEvent>) -> Result<(), Unfinished> {
        let in_tool = self
            .blocks
            .values()
            .any(|b| matches!(b, Block::Tool { .. }));
        Err(if in_tool {
            Unfinished::InToolCall
        } else {
            Unfinished::Before("message_stop")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &[&str]) -> (Vec<StreamEvent>, Result<(), ProviderError>) {
        let mut d = Decoder::new("anthropic", "ANTHROPIC_API_KEY");
        let mut out = Vec::new();
        for e in events {
            match d.on_event("", e, &mut out) {
                Ok(true) => return (out, Ok(())),
                Ok(false) => {}
                Err(err) => return (out, Err(err)),
            }
        }
        let end = d.on_eof(&mut out).map_err(|m| d.error(m.to_string()));
        (out, end)
    }

    #[test]
    fn blocks_assemble_into_events() {
        let (out, end) = feed(&[
            r#"{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":20,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"tu","name":"f","input":{}}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"1}"}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}"#,
            r#"{"type":"message_stop"}"#,
        ]);
        end.unwrap();
        assert_eq!(
            out,
            vec![
                StreamEvent::ThinkingDelta("hm".into()),
                StreamEvent::ThinkingSignature("SIG".into()),
                StreamEvent::TextDelta("Hi".into()),
                StreamEvent::ToolCall(ToolCall {
                    id: "tu".into(),
                    name: "f".into(),
                    arguments: r#"{"a":1}"#.into()
                }),
                StreamEvent::Usage(Usage {
                    input_tokens: 120,
                    output_tokens: 42,
                    cached_input_tokens: 90,
                    cache_write_tokens: 20,
                    ..Usage::default()
                }),
                StreamEvent::ResponseId("msg_1".into()),
                StreamEvent::Done {
                    stop_reason: Some("tool_use".into())
                },
            ]
        );
    }

    #[test]
    fn error_events_and_truncation() {
        let (_, end) = feed(&[
            r#"{"type":"message_start","message":{"model":"claude","usage":{"input_tokens":1}}}"#,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ]);
        let err = end.unwrap_err();
        assert!(err.is_retryable(), "{err}");
        assert!(err.to_string().contains("Overloaded"));

        let (out, end) = feed(&[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"tu","name":"f","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
        ]);
        assert!(out.is_empty());
        assert!(end.unwrap_err().to_string().contains("tool call"));
    }
}
