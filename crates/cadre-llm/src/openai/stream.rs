//! Streamed Chat Completions replies: the SSE chunk decoder, which assembles tool-call
//! deltas by index.

use crate::http::{SseDecoder, Unfinished};
use crate::{ProviderError, StreamEvent};
use cadre_types::{ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Deserialize)]
struct Chunk {
    id: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    index: Option<usize>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            input_tokens: u.prompt_tokens.unwrap_or(0),
            output_tokens: u.completion_tokens.unwrap_or(0),
            cached_input_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            // OpenAI writes its cache for free and does not report it.
            ..Usage::default()
        }
    }
}

/// A tool call whose fragments are still arriving.
#[derive(Default)]
pub(super) struct PartialCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: String,
}

impl PartialCall {
    /// The finished call: a generated id when none came, `{}` for empty arguments.
    pub(super) fn finish(self) -> ToolCall {
        ToolCall {
            id: if self.id.is_empty() {
                format!("call_{:016x}", fastrand::u64(..))
            } else {
                self.id
            },
            name: self.name,
            arguments: if self.arguments.trim().is_empty() {
                "{}".into()
            } else {
                self.arguments
            },
        }
    }
}

/// Decodes one streamed Chat Completions reply.
pub(super) struct Decoder {
    provider: String,
    calls: BTreeMap<usize, PartialCall>,
    last_index: Option<usize>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    /// The reply's id, from the first chunk that has one.
    response_id: Option<String>,
}

impl Decoder {
    /// A decoder for a reply from `provider`.
    pub(super) fn new(provider: &str) -> Self {
        Self {
            provider: provider.to_string(),
            calls: BTreeMap::new(),
            last_index: None,
            finish_reason: None,
            usage: None,
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

    fn add_tool_delta(&mut self, delta: ToolCallDelta) {
        // Servers that omit `index` start a new call whenever a new id appears.
        let index = delta
            .index
            .unwrap_or_else(|| match (&delta.id, self.last_index) {
                (Some(id), Some(last))
                    if self
                        .calls
                        .get(&last)
                        .is_some_and(|c| !c.id.is_empty() && c.id != *id) =>
                {
                    last + 1
                }
                (_, Some(last)) => last,
                (_, None) => 0,
            });
        self.last_index = Some(index);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = delta.id.filter(|id| !id.is_empty())
            && call.id.is_empty()
        {
            call.id = id;
        }
        if let Some(f) = delta.function {
            if let Some(name) = f.name.filter(|n| !n.is_empty())
                && call.name.is_empty()
            {
                call.name = name;
            }
            if let Some(args) = f.arguments {
                call.arguments.push_str(&args);
            }
        }
    }

    /// Emit the assembled tool calls (in index order), usage and `Done`.
    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        self.flush_calls(out);
        if let Some(usage) = self.usage.take() {
            out.push(StreamEvent::Usage(usage));
        }
        if let Some(id) = self.response_id.take() {
            out.push(StreamEvent::ResponseId(id));
        }
        out.push(StreamEvent::Done {
            stop_reason: self.finish_reason.take(),
        });
    }

    fn flush_calls(&mut self, out: &mut Vec<StreamEvent>) {
        for (_, call) in std::mem::take(&mut self.calls) {
            out.push(StreamEvent::ToolCall(call.finish()));
        }
    }
}

impl SseDecoder for Decoder {
    fn held_bytes(&self) -> usize {
        self.calls
            .values()
            .map(|c| c.id.len() + c.name.len() + c.arguments.len())
            .sum()
    }

    fn tool_call_started(&self) -> bool {
        !self.calls.is_empty()
    }

    fn on_event(
        &mut self,
        _event: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.finish(out);
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|e| self.error(format!("cannot decode chunk {data:?}: {e}")))?;
        if let Some(err) = chunk.error {
            let (message, _) = crate::http::error_message(500, &err.to_string());
            return Err(self.error(format!("error event: {message}")));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        if self.response_id.is_none() {
            self.response_id = chunk.id.filter(|i| !i.is_empty());
        }
        if let Some(choice) = chunk.choices.into_iter().next() {
            if let Some(delta) = choice.delta {
                for thinking in [delta.reasoning_content, delta.reasoning]
                    .into_iter()
                    .flatten()
                {
                    if !thinking.is_empty() {
                        out.push(StreamEvent::ThinkingDelta(thinking));
                    }
                }
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::TextDelta(text));
                }
                for call in delta.tool_calls.into_iter().flatten() {
                    self.add_tool_delta(call);
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
                self.flush_calls(out);
            }
        }
        Ok(false)
    }

    fn on_eof(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), Unfinished> {
        if self.finish_reason.is_none() {
            return Err(if self.calls.is_empty() {
                Unfinished::Before("the reply was complete")
            } else {
                Unfinished::InToolCall
            });
        }
        self.finish(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(chunks: &[&str]) -> (Vec<StreamEvent>, Result<(), String>) {
        let mut d = Decoder::new("p");
        let mut out = Vec::new();
        for c in chunks {
            if d.on_event("message", c, &mut out).unwrap() {
                return (out, Ok(()));
            }
        }
        let end = d.on_eof(&mut out).map_err(|u| u.to_string());
        (out, end)
    }

    #[test]
    fn interleaved_tool_calls_assemble_in_index_order() {
        let (out, end) = feed(&[
            r#"{"choices":[{"delta":{"role":"assistant","content":null}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"two","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"one","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"y\":2}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}"#,
            "[DONE]",
        ]);
        end.unwrap();
        let call = |id: &str, name: &str, args: &str| {
            StreamEvent::ToolCall(ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: args.into(),
            })
        };
        assert_eq!(
            out,
            vec![
                call("a", "one", r#"{"x":1}"#),
                call("b", "two", r#"{"y":2}"#),
                StreamEvent::Usage(Usage {
                    input_tokens: 7,
                    output_tokens: 3,
                    cached_input_tokens: 2,
                    ..Usage::default()
                }),
                StreamEvent::Done {
                    stop_reason: Some("tool_calls".into())
                },
            ]
        );
    }

    #[test]
    fn the_replys_id_comes_just_before_done() {
        let (out, end) = feed(&[
            r#"{"id":"chatcmpl-1","choices":[{"delta":{"content":"hi"}}]}"#,
            r#"{"id":"chatcmpl-1","choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        end.unwrap();
        assert_eq!(
            out,
            vec![
                StreamEvent::TextDelta("hi".into()),
                StreamEvent::ResponseId("chatcmpl-1".into()),
                StreamEvent::Done {
                    stop_reason: Some("stop".into())
                },
            ]
        );
    }

    #[test]
    fn calls_without_index_split_on_new_ids() {
        let (out, end) = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"one","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"two"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]);
        end.unwrap();
        assert_eq!(out.len(), 3);
        assert!(
            matches!(&out[1], StreamEvent::ToolCall(c) if c.name == "two" && c.arguments == "{}")
        );
    }

    #[test]
    fn truncated_stream_never_yields_partial_calls() {
        let (out, end) = feed(&[
            r#"{"choices":[{"delta":{"content":"hi"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"one","arguments":"{\"x"}}]}}]}"#,
        ]);
        assert_eq!(out, vec![StreamEvent::TextDelta("hi".into())]);
        assert!(end.unwrap_err().contains("tool call"));
    }

    #[test]
    fn reasoning_deltas_become_thinking() {
        let (out, end) = feed(&[
            r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"more"}}]}"#,
            r#"{"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}"#,
        ]);
        end.unwrap();
        assert_eq!(out[0], StreamEvent::ThinkingDelta("think".into()));
        assert_eq!(out[1], StreamEvent::ThinkingDelta("more".into()));
        assert_eq!(out[2], StreamEvent::TextDelta("ok".into()));
    }
}
