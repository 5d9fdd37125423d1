//! Request bodies for Chat Completions: messages, tools and sampling options, serialized
//! straight from the request's strings (no intermediate `serde_json::Value` tree).

use crate::json::{self, JsonF32};
use crate::schema::normalize_tool_schema;
use crate::{ModelRequest, ProviderError};
use bytes::Bytes;
use cadre_types::{Message, ToolCall, ToolDefinition};
use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// The longest `prompt_cache_key` sent (OpenAI limits the field); longer keys are cut.
pub(super) const MAX_CACHE_KEY_CHARS: usize = 64;

/// The encoded JSON body of one Chat Completions call; `cache_key` sends the request's
/// `prompt_cache_key`; `images` sends the images of tool results (see [`Messages`]).
pub(super) fn build_body(
    request: &ModelRequest,
    stream: bool,
    cache_key: bool,
    images: bool,
) -> Result<Bytes, ProviderError> {
    let key = request.metadata.cache_key.as_str();
    let key = match key.char_indices().nth(MAX_CACHE_KEY_CHARS) {
        Some((at, _)) => &key[..at],
        None => key,
    };
    let body = Body {
        model: &request.model,
        stream,
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
        max_tokens: request.max_output_tokens,
        temperature: request.temperature.map(JsonF32),
        prompt_cache_key: (cache_key && !key.is_empty()).then_some(key),
        tools: request.tools.iter().map(Tool::new).collect(),
        messages: Messages { request, images },
    };
    json::encode(&body, json::size_hint(request))
}

/// The top level of the body. Fields are written in this order: the settings, then the
/// tools, then the messages, so that consecutive requests of a conversation differ only at
/// the end (the bytes before are the prefix a provider's prompt cache can reuse).
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<JsonF32>,
    /// Routes requests with the same key (a session, or children of one definition) to
    /// the same prompt cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    messages: Messages<'a>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// The system prompt first, then the conversation in wire form, written one message at
/// a time. A tool message carries text only, so with `images` on, the images of a run of
/// tool results follow it as one user message (tool messages must come right after the
/// reply that called them).
struct Messages<'a> {
    request: &'a ModelRequest,
    images: bool,
}

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let request = self.request;
        let mut seq = serializer.serialize_seq(None)?;
        if !request.system.is_empty() {
            seq.serialize_element(&WireMessage::System {
                content: &request.system,
            })?;
        }
        let mut pending: Vec<&Message> = Vec::new();
        for (i, message) in request.messages.iter().enumerate() {
            seq.serialize_element(&WireMessage::new(message))?;
            if let Message::Tool { images, .. } = message
                && self.images
                && !images.is_empty()
            {
                pending.push(message);
            }
            let run_ends = !matches!(request.messages.get(i + 1), Some(Message::Tool { .. }));
            if run_ends && !pending.is_empty() {
                seq.serialize_element(&ImageMessage(&pending))?;
                pending.clear();
            }
        }
        seq.end()
    }
}

/// The user message carrying the images of a run of tool results, each group introduced
/// by a line naming its call.
struct ImageMessage<'a>(&'a [&'a Message]);

impl Serialize for ImageMessage<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut parts: Vec<Part> = Vec::new();
        for message in self.0 {
            let Message::Tool {
                tool_call_id,
                name,
                images,
                ..
            } = message
            else {
                continue;
            };
            parts.push(Part::Text {
                text: format!("Images returned by tool call {tool_call_id} ({name}):"),
            });
            parts.extend(images.iter().map(|image| Part::ImageUrl {
                image_url: ImageUrl {
                    url: format!("data:{};base64,{}", image.media_type, image.data),
                },
            }));
        }
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("role", "user")?;
        map.serialize_entry("content", &parts)?;
        map.end()
    }
}

/// One content part of a user message.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

/// One message as Chat Completions wants it.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` when a reply with tool calls has no text.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "ToolCalls::is_empty")]
        tool_calls: ToolCalls<'a>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

impl<'a> WireMessage<'a> {
    fn new(message: &'a Message) -> Self {
        match message {
            Message::System { content } => WireMessage::System { content },
            Message::User { content } => WireMessage::User { content },
            // Thinking is not sent back: several servers reject `reasoning_content`.
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => WireMessage::Assistant {
                content: (tool_calls.is_empty() || !content.is_empty()).then_some(content),
                tool_calls: ToolCalls(tool_calls),
            },
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => WireMessage::Tool {
                tool_call_id,
                content,
            },
        }
    }
}

/// The tool calls of an assistant message, written one at a time.
struct ToolCalls<'a>(&'a [ToolCall]);

impl ToolCalls<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for ToolCalls<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|call| WireToolCall {
            id: &call.id,
            kind: "function",
            function: WireFunction {
                name: &call.name,
                arguments: replay_arguments(&call.arguments),
            },
        }))
    }
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    /// The arguments as a JSON string (not an object), as the API wants.
    arguments: &'a str,
}

/// One offered tool.
#[derive(Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: ToolFunction<'a>,
}

#[derive(Serialize)]
struct ToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: Value,
}

impl<'a> Tool<'a> {
    fn new(def: &'a ToolDefinition) -> Self {
        Tool {
            kind: "function",
            function: ToolFunction {
                name: &def.name,
                description: &def.description,
                parameters: normalize_tool_schema(&def.parameters),
            },
        }
    }
}

/// Arguments as replayed in history: servers such as llama.cpp's reject a request whose
/// earlier tool call has invalid JSON arguments, so those are sent as `{}` (the model already
/// saw the parse error in the tool result). Valid arguments are sent as they are, borrowed.
fn replay_arguments(arguments: &str) -> &str {
    if json::is_json_object(arguments) {
        arguments
    } else {
        "{}"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The body as sent, parsed back.
    fn body_json(request: &ModelRequest, stream: bool) -> Value {
        serde_json::from_slice(&build_body(request, stream, false, true).unwrap()).unwrap()
    }

    #[test]
    fn invalid_arguments_are_replayed_as_an_empty_object() {
        assert_eq!(replay_arguments(r#"{"a":1}"#), r#"{"a":1}"#);
        assert_eq!(replay_arguments(r#"{"a": "unterminated"#), "{}");
        assert_eq!(replay_arguments("[1]"), "{}");
        assert_eq!(replay_arguments(r#"{"a":"\ud800"}"#), "{}");
        assert_eq!(replay_arguments(" {} "), " {} ");
    }

    #[test]
    fn body_has_system_first_tool_calls_and_tool_results() {
        let request = ModelRequest {
            model: "m".into(),
            system: "be brief".into(),
            messages: vec![
                Message::user("hi"),
                Message::Assistant {
                    content: String::new(),
                    thinking: Some("hmm".into()),
                    thinking_signature: None,
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "read_file".into(),
                        arguments: r#"{"path":"a"}"#.into(),
                    }],
                },
                Message::Tool {
                    tool_call_id: "c1".into(),
                    name: "read_file".into(),
                    content: "text".into(),
                    is_error: false,
                    images: Vec::new(),
                },
            ],
            tools: vec![ToolDefinition {
                name: "read_file".into(),
                description: "Read".into(),
                parameters: json!({"$schema": "x", "type": "object", "properties": {}}),
            }],
            max_output_tokens: Some(100),
            temperature: Some(0.2),
            ..Default::default()
        };
        let body = body_json(&request, true);
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function",
                         "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "text"}
                ],
                "tools": [{"type": "function", "function": {
                    "name": "read_file", "description": "Read",
                    "parameters": {"type": "object", "properties": {}}}}],
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 100,
                "temperature": 0.2
            })
        );
        let plain = body_json(&ModelRequest::default(), false);
        assert_eq!(plain, json!({"model": "", "messages": [], "stream": false}));
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn tool_result(id: &str, content: &str, is_error: bool) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "t".into(),
            content: content.into(),
            is_error,
            images: Vec::new(),
        }
    }

    #[test]
    fn body_of_a_whole_conversation_is_pinned() {
        let request = ModelRequest {
            model: "gpt-x".into(),
            system: "be brief".into(),
            messages: vec![
                Message::user("look \"here\"\n"),
                Message::Assistant {
                    content: "reading two files".into(),
                    thinking: Some("secret plan".into()),
                    thinking_signature: Some("sig".into()),
                    tool_calls: vec![
                        call("c1", "read_file", r#"{"path": "a.rs", "lines": [1, 2]}"#),
                        call("c2", "read_file", r#"{"path": "b.rs""#),
                    ],
                },
                tool_result("c1", "fn main() {}", false),
                tool_result("c2", "invalid arguments", true),
                Message::Assistant {
                    content: String::new(),
                    thinking: None,
                    thinking_signature: None,
                    tool_calls: vec![call("c3", "grep", r#"{"pattern":"x"}"#)],
                },
                tool_result("c3", "", false),
                Message::system("a late rule"),
                Message::assistant("done"),
                Message::assistant(""),
            ],
            tools: vec![
                ToolDefinition {
                    name: "read_file".into(),
                    description: "Read a file".into(),
                    parameters: json!({"type": "object", "properties": {"path": {"type": "string"}},
                                       "required": ["path"], "examples": [{}]}),
                },
                ToolDefinition {
                    name: "grep".into(),
                    description: "Search".into(),
                    parameters: Value::Null,
                },
            ],
            max_output_tokens: Some(4096),
            temperature: Some(0.2),
            ..Default::default()
        };
        let bytes = build_body(&request, true, false, true).unwrap();
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(text.contains(r#""temperature":0.2"#), "{text}");
        assert!(
            !text.contains("secret plan") && !text.contains("sig"),
            "{text}"
        );
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "gpt-x",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "look \"here\"\n"},
                    {"role": "assistant", "content": "reading two files", "tool_calls": [
                        {"id": "c1", "type": "function", "function": {
                            "name": "read_file",
                            "arguments": "{\"path\": \"a.rs\", \"lines\": [1, 2]}"}},
                        {"id": "c2", "type": "function", "function": {
                            "name": "read_file", "arguments": "{}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "fn main() {}"},
                    {"role": "tool", "tool_call_id": "c2", "content": "invalid arguments"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c3", "type": "function", "function": {
                            "name": "grep", "arguments": "{\"pattern\":\"x\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "c3", "content": ""},
                    {"role": "system", "content": "a late rule"},
                    {"role": "assistant", "content": "done"},
                    {"role": "assistant", "content": ""}
                ],
                "tools": [
                    {"type": "function", "function": {
                        "name": "read_file", "description": "Read a file",
                        "parameters": {"type": "object",
                                       "properties": {"path": {"type": "string"}},
                                       "required": ["path"]}}},
                    {"type": "function", "function": {
                        "name": "grep", "description": "Search",
                        "parameters": {"type": "object", "properties": {}}}}
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 4096,
                "temperature": 0.2
            })
        );
        let body = body_json(&request, false);
        assert_eq!(body["stream"], json!(false));
        assert!(body.get("stream_options").is_none());
    }

    #[test]
    fn the_cache_key_is_sent_when_asked_and_cut_to_its_limit() {
        let mut request = ModelRequest {
            model: "m".into(),
            metadata: crate::RequestMetadata {
                cache_key: "s-123".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        let body = |r: &ModelRequest, on: bool| -> Value {
            serde_json::from_slice(&build_body(r, false, on, true).unwrap()).unwrap()
        };
        assert_eq!(body(&request, true)["prompt_cache_key"], json!("s-123"));
        assert!(body(&request, false).get("prompt_cache_key").is_none());
        request.metadata.cache_key = "é".repeat(100);
        let key = body(&request, true)["prompt_cache_key"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(key.chars().count(), MAX_CACHE_KEY_CHARS);
        request.metadata.cache_key.clear();
        assert!(body(&request, true).get("prompt_cache_key").is_none());
    }
}
