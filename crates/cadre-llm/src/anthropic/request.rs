//! Request bodies for the Messages API: top-level system prompt, content blocks, strict
//! user/assistant alternation with tool results gathered into user messages, and prompt-cache
//! breakpoints. Serialized straight from the request's strings (no intermediate
//! `serde_json::Value` tree).
//!
//! Breakpoints (`cache_control: {type: "ephemeral"}`, at most 4 per request as the API
//! allows), when caching is on:
//! 1. on the last tool — caches the tool list;
//! 2. on the system prompt (sent as one text block) — caches tools + system;
//! 3. on the last block of the latest message — the rolling breakpoint: the next request
//!    finds this prefix cached and writes only what it adds;
//! 4. when the newest turn added more blocks than the API looks back over for an earlier
//!    breakpoint ([`LOOKBACK_BLOCKS`]), also on the last block before the newest assistant
//!    turn — where the previous request put its rolling breakpoint — so that prefix is still
//!    read from the cache.
//!
//! Thinking blocks cannot carry a breakpoint; the nearest earlier block of the message does.

use super::DEFAULT_MAX_TOKENS;
use crate::CacheTtl;
use crate::json::{self, JsonF32};
use crate::schema::normalize_tool_schema;
use crate::{ModelRequest, ProviderError};
use bytes::Bytes;
use cadre_types::{Image, Message, ToolDefinition};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// How many blocks before a breakpoint the API checks for an earlier cache entry.
pub(super) const LOOKBACK_BLOCKS: usize = 20;

/// The encoded JSON body of one Messages call; `cache` turns breakpoints on; `images`
/// sends the images of tool results inside their `tool_result` blocks.
pub(super) fn build_body(
    request: &ModelRequest,
    stream: bool,
    cache: Option<CacheTtl>,
    images: bool,
) -> Result<Bytes, ProviderError> {
    let mut system = Cow::Borrowed(request.system.as_str());
    let mut turns: Vec<Turn<'_>> = Vec::new();
    for message in &request.messages {
        match message {
            Message::System { content } => {
                // The Messages API has no system role: extra instructions join the prompt.
                if !content.is_empty() {
                    let system = system.to_mut();
                    if !system.is_empty() {
                        system.push_str("\n\n");
                    }
                    system.push_str(content);
                }
            }
            Message::User { content } => push(&mut turns, USER, text_block(content)),
            Message::Assistant {
                content,
                thinking,
                thinking_signature,
                tool_calls,
            } => {
                if let Some(signature) = thinking_signature.as_deref().filter(|s| !s.is_empty()) {
                    let thinking = thinking.as_deref().unwrap_or("");
                    push(
                        &mut turns,
                        ASSISTANT,
                        Some(Block::Thinking {
                            thinking,
                            signature,
                        }),
                    );
                }
                push(&mut turns, ASSISTANT, text_block(content));
                for call in tool_calls {
                    push(
                        &mut turns,
                        ASSISTANT,
                        Some(Block::ToolUse {
                            id: &call.id,
                            name: &call.name,
                            input: ToolInput::new(&call.arguments),
                            cache_control: None,
                        }),
                    );
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                images: attached,
                ..
            } => push(
                &mut turns,
                USER,
                Some(Block::ToolResult {
                    tool_use_id: tool_call_id,
                    content: ResultContent::new(content, if images { attached } else { &[] }),
                    is_error: *is_error,
                    cache_control: None,
                }),
            ),
        }
    }
    for turn in &mut turns {
        if turn.role == USER {
            // Anthropic wants tool results before any text of the same message.
            turn.content
                .sort_by_key(|b| !matches!(b, Block::ToolResult { .. }));
        }
    }

    let mut tools: Vec<Tool<'_>> = request.tools.iter().map(Tool::new).collect();
    let marker = cache.map(CacheControl::new);
    if let Some(marker) = marker {
        if let Some(last) = tools.last_mut() {
            last.cache_control = Some(marker);
        }
        mark_latest(&mut turns, marker);
    }
    let system = match marker {
        _ if system.is_empty() => None,
        Some(marker) => Some(System::Blocks([SystemBlock {
            kind: "text",
            text: system,
            cache_control: marker,
        }])),
        None => Some(System::Text(system)),
    };
    let body = Body {
        model: &request.model,
        max_tokens: request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        temperature: request.temperature.map(JsonF32),
        stream,
        tools,
        system,
        messages: turns,
    };
    json::encode(&body, json::size_hint(request))
}

/// Put the rolling breakpoint on the latest message, and a second one where the previous
/// request's was when the newest turn added more blocks than the API looks back over.
fn mark_latest(turns: &mut [Turn<'_>], marker: CacheControl) {
    let Some(last) = turns.len().checked_sub(1) else {
        return;
    };
    mark_turn(&mut turns[last], marker);
    let Some(reply) = turns.iter().rposition(|t| t.role == ASSISTANT) else {
        return;
    };
    let added: usize = turns[reply..].iter().map(|t| t.content.len()).sum();
    if reply > 0 && added > LOOKBACK_BLOCKS {
        mark_turn(&mut turns[reply - 1], marker);
    }
}

/// Mark the last block of `turn` that can carry a breakpoint.
fn mark_turn(turn: &mut Turn<'_>, marker: CacheControl) {
    if let Some(slot) = turn.content.iter_mut().rev().find_map(Block::cache_slot) {
        *slot = Some(marker);
    }
}

const USER: &str = "user";
const ASSISTANT: &str = "assistant";

/// Add `block` to the conversation: to the last message when it has the same role (the
/// API wants strict alternation), else as a new message. `None` adds nothing.
fn push<'a>(turns: &mut Vec<Turn<'a>>, role: &'static str, block: Option<Block<'a>>) {
    let Some(block) = block else {
        return;
    };
    match turns.last_mut() {
        Some(last) if last.role == role => last.content.push(block),
        _ => turns.push(Turn {
            role,
            content: vec![block],
        }),
    }
}

/// The top level of the body, written in the order the API lays out the prompt it caches
/// (tools, system, messages) after the settings, so that consecutive requests of a
/// conversation differ only at the end.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<JsonF32>,
    stream: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<System<'a>>,
    messages: Vec<Turn<'a>>,
}

/// `cache_control` of a breakpoint.
#[derive(Serialize, Clone, Copy)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

impl CacheControl {
    fn new(ttl: CacheTtl) -> Self {
        Self {
            kind: "ephemeral",
            ttl: ttl.wire(),
        }
    }
}

/// The system prompt: plain text, or one text block carrying a breakpoint.
#[derive(Serialize)]
#[serde(untagged)]
enum System<'a> {
    Text(Cow<'a, str>),
    Blocks([SystemBlock<'a>; 1]),
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: Cow<'a, str>,
    cache_control: CacheControl,
}

/// One message: a role and its content blocks.
#[derive(Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

/// One content block. A breakpoint (`cache_control`) is written last, so a block without
/// it is a prefix of the same block with it.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: ToolInput<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: ResultContent<'a>,
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
}

impl Block<'_> {
    /// Where this block's breakpoint goes; thinking blocks cannot carry one.
    fn cache_slot(&mut self) -> Option<&mut Option<CacheControl>> {
        match self {
            Block::Thinking { .. } => None,
            Block::Text { cache_control, .. }
            | Block::ToolUse { cache_control, .. }
            | Block::ToolResult { cache_control, .. } => Some(cache_control),
        }
    }
}

/// The content of a `tool_result`: its text, or its text and images as blocks.
#[derive(Serialize)]
#[serde(untagged)]
enum ResultContent<'a> {
    Text(&'a str),
    Blocks(Vec<ResultBlock<'a>>),
}

impl<'a> ResultContent<'a> {
    fn new(text: &'a str, images: &'a [Image]) -> Self {
        if images.is_empty() {
            return ResultContent::Text(text);
        }
        let mut blocks = Vec::with_capacity(images.len() + 1);
        if !text.is_empty() {
            blocks.push(ResultBlock::Text { text });
        }
        blocks.extend(images.iter().map(|image| ResultBlock::Image {
            source: ImageSource {
                kind: "base64",
                media_type: &image.media_type,
                data: &image.data,
            },
        }));
        ResultContent::Blocks(blocks)
    }
}

/// A block inside a `tool_result`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResultBlock<'a> {
    Text { text: &'a str },
    Image { source: ImageSource<'a> },
}

#[derive(Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: &'a str,
}

/// A text block, or nothing for empty text (Anthropic rejects empty text blocks).
fn text_block(text: &str) -> Option<Block<'_>> {
    (!text.is_empty()).then_some(Block::Text {
        text,
        cache_control: None,
    })
}

/// Tool-call arguments as the JSON object `tool_use.input` requires: the argument text
/// itself, embedded as it is, when it is a JSON object; else `{}`.
enum ToolInput<'a> {
    Object(&'a RawValue),
    Empty,
}

impl<'a> ToolInput<'a> {
    fn new(arguments: &'a str) -> Self {
        json::raw_object(arguments).map_or(ToolInput::Empty, ToolInput::Object)
    }
}

impl Serialize for ToolInput<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolInput::Object(raw) => raw.serialize(serializer),
            ToolInput::Empty => serializer.serialize_map(Some(0))?.end(),
        }
    }
}

/// One offered tool.
#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

impl<'a> Tool<'a> {
    fn new(def: &'a ToolDefinition) -> Self {
        Tool {
            name: &def.name,
            description: &def.description,
            input_schema: normalize_tool_schema(&def.parameters),
            cache_control: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_types::ToolCall;
    use serde_json::json;

    /// The body as sent, parsed back.
    fn body_json(request: &ModelRequest, stream: bool) -> Value {
        serde_json::from_slice(&build_body(request, stream, None, true).unwrap()).unwrap()
    }

    fn tool_msg(id: &str, content: &str, is_error: bool) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "t".into(),
            content: content.into(),
            is_error,
            images: Vec::new(),
        }
    }

    #[test]
    fn tool_results_merge_into_one_user_message() {
        let request = ModelRequest {
            model: "claude".into(),
            system: "sys".into(),
            messages: vec![
                Message::user("go"),
                Message::user("and more"),
                Message::Assistant {
                    content: "calling".into(),
                    thinking: Some("plan".into()),
                    thinking_signature: Some("sig".into()),
                    tool_calls: vec![
                        ToolCall {
                            id: "a".into(),
                            name: "t".into(),
                            arguments: r#"{"x":1}"#.into(),
                        },
                        ToolCall {
                            id: "b".into(),
                            name: "t".into(),
                            arguments: "not json".into(),
                        },
                    ],
                },
                tool_msg("a", "one", false),
                tool_msg("b", "two", true),
                Message::user("note"),
                Message::Assistant {
                    content: String::new(),
                    thinking: Some("unsigned".into()),
                    thinking_signature: None,
                    tool_calls: vec![],
                },
                Message::system("extra rule"),
            ],
            tools: vec![ToolDefinition {
                name: "t".into(),
                description: "d".into(),
                parameters: Value::Null,
            }],
            ..Default::default()
        };
        let body = body_json(&request, false);
        assert_eq!(
            body,
            json!({
                "model": "claude",
                "max_tokens": 8192,
                "system": "sys\n\nextra rule",
                "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "go"}, {"type": "text", "text": "and more"}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "plan", "signature": "sig"},
                        {"type": "text", "text": "calling"},
                        {"type": "tool_use", "id": "a", "name": "t", "input": {"x": 1}},
                        {"type": "tool_use", "id": "b", "name": "t", "input": {}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "a", "content": "one", "is_error": false},
                        {"type": "tool_result", "tool_use_id": "b", "content": "two", "is_error": true},
                        {"type": "text", "text": "note"}]}
                ],
                "tools": [{"name": "t", "description": "d",
                           "input_schema": {"type": "object", "properties": {}}}],
                "stream": false
            })
        );
    }

    fn call(id: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn body_of_a_whole_conversation_is_pinned() {
        let request = ModelRequest {
            model: "claude-x".into(),
            system: String::new(),
            messages: vec![
                Message::system(""),
                Message::system("first rule"),
                Message::user("look \"here\"\n"),
                Message::Assistant {
                    content: "reading".into(),
                    thinking: Some("plan".into()),
                    thinking_signature: Some("sig-1".into()),
                    tool_calls: vec![
                        call(
                            "a",
                            r#" {"path": "a.rs", "lines": [1, 2], "big": 123456789012345678901234567890} "#,
                        ),
                        call("b", r#"{"path": "b.rs""#),
                        call("c", "[1]"),
                    ],
                },
                Message::user("wait"),
                tool_msg("a", "fn main() {}", false),
                tool_msg("b", "bad arguments", true),
                tool_msg("c", "", true),
                Message::Assistant {
                    content: String::new(),
                    thinking: None,
                    thinking_signature: Some("sig-2".into()),
                    tool_calls: vec![],
                },
                Message::Assistant {
                    content: String::new(),
                    thinking: Some("unsigned".into()),
                    thinking_signature: Some(String::new()),
                    tool_calls: vec![],
                },
                Message::system("second rule"),
                Message::assistant("done"),
                Message::user(""),
            ],
            tools: vec![ToolDefinition {
                name: "read_file".into(),
                description: "Read a file".into(),
                parameters: json!({"$schema": "x", "type": "object",
                                   "properties": {"path": {"type": "string"}}}),
            }],
            max_output_tokens: Some(1000),
            temperature: Some(0.2),
            ..Default::default()
        };
        let bytes = build_body(&request, true, None, true).unwrap();
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(text.contains(r#""temperature":0.2"#), "{text}");
        // Valid arguments are embedded as they are, not re-encoded.
        assert!(
            text.contains(r#""input":{"path": "a.rs", "lines": [1, 2], "big": 123456789012345678901234567890}"#),
            "{text}"
        );
        assert!(!text.contains("unsigned"), "{text}");
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "claude-x",
                "max_tokens": 1000,
                "system": "first rule\n\nsecond rule",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "look \"here\"\n"}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "plan", "signature": "sig-1"},
                        {"type": "text", "text": "reading"},
                        {"type": "tool_use", "id": "a", "name": "read_file",
                         "input": serde_json::from_str::<Value>(
                             r#"{"path": "a.rs", "lines": [1, 2], "big": 123456789012345678901234567890}"#
                         ).unwrap()},
                        {"type": "tool_use", "id": "b", "name": "read_file", "input": {}},
                        {"type": "tool_use", "id": "c", "name": "read_file", "input": {}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "a", "content": "fn main() {}",
                         "is_error": false},
                        {"type": "tool_result", "tool_use_id": "b", "content": "bad arguments",
                         "is_error": true},
                        {"type": "tool_result", "tool_use_id": "c", "content": "", "is_error": true},
                        {"type": "text", "text": "wait"}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "", "signature": "sig-2"},
                        {"type": "text", "text": "done"}]}
                ],
                "tools": [{"name": "read_file", "description": "Read a file",
                           "input_schema": {"type": "object",
                                            "properties": {"path": {"type": "string"}}}}],
                "temperature": 0.2,
                "stream": true
            })
        );
        let plain = body_json(&ModelRequest::default(), false);
        assert_eq!(
            plain,
            json!({"model": "", "max_tokens": 8192, "messages": [], "stream": false})
        );
    }

    const EPHEMERAL: &str = r#""cache_control":{"type":"ephemeral"}"#;

    fn cached(request: &ModelRequest, ttl: CacheTtl) -> (String, Value) {
        let bytes = build_body(request, true, Some(ttl), true).unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let body = serde_json::from_str(&text).unwrap();
        (text, body)
    }

    fn tools(names: &[&str]) -> Vec<ToolDefinition> {
        names
            .iter()
            .map(|n| ToolDefinition {
                name: (*n).into(),
                description: "d".into(),
                parameters: Value::Null,
            })
            .collect()
    }

    fn turn_of_calls(n: usize) -> Vec<Message> {
        let calls: Vec<ToolCall> = (0..n).map(|i| call(&format!("c{i}"), "{}")).collect();
        let mut out = vec![Message::Assistant {
            content: String::new(),
            thinking: None,
            thinking_signature: None,
            tool_calls: calls,
        }];
        out.extend((0..n).map(|i| tool_msg(&format!("c{i}"), "ok", false)));
        out
    }

    #[test]
    fn breakpoints_go_on_the_last_tool_the_system_prompt_and_the_latest_message() {
        let mut messages = vec![Message::user("go")];
        messages.extend(turn_of_calls(2));
        messages.push(Message::user("status"));
        let request = ModelRequest {
            model: "claude".into(),
            system: "sys".into(),
            messages,
            tools: tools(&["a", "b"]),
            ..Default::default()
        };
        let (text, body) = cached(&request, CacheTtl::FiveMinutes);
        assert_eq!(text.matches("cache_control").count(), 3, "{text}");
        let marker = json!({"type": "ephemeral"});
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(body["tools"][1]["cache_control"], marker);
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "sys", "cache_control": marker}])
        );
        let last = &body["messages"][2]["content"];
        assert_eq!(
            last[2],
            json!({"type": "text", "text": "status", "cache_control": marker})
        );
        assert!(last[1].get("cache_control").is_none());
        assert!(
            body["messages"][0]["content"][0]
                .get("cache_control")
                .is_none()
        );
        // The marker is written last in its block: without it, the block is a prefix.
        assert!(
            text.contains(&format!(r#""text":"status",{EPHEMERAL}}}"#)),
            "{text}"
        );

        let (text, _) = cached(&request, CacheTtl::OneHour);
        assert_eq!(text.matches(r#""ttl":"1h""#).count(), 3, "{text}");
        let off =
            String::from_utf8(build_body(&request, true, None, true).unwrap().to_vec()).unwrap();
        assert!(!off.contains("cache_control"), "{off}");
        assert!(off.contains(r#""system":"sys""#), "{off}");
    }

    #[test]
    fn a_thinking_block_passes_the_breakpoint_to_the_block_before_it() {
        let request = ModelRequest {
            messages: vec![
                Message::user("go"),
                Message::Assistant {
                    content: String::new(),
                    thinking: Some("t".into()),
                    thinking_signature: Some("sig".into()),
                    tool_calls: vec![],
                },
            ],
            ..Default::default()
        };
        let (text, body) = cached(&request, CacheTtl::FiveMinutes);
        // No tools, no system, and the assistant turn has only a thinking block: nothing to
        // mark there, so the only breakpoint would be lost; none is written.
        assert_eq!(text.matches("cache_control").count(), 0, "{text}");
        assert!(
            body["messages"][1]["content"][0]
                .get("cache_control")
                .is_none()
        );
    }

    #[test]
    fn a_turn_longer_than_the_lookback_keeps_the_previous_breakpoint_too() {
        let mut messages = vec![Message::user("go")];
        messages.extend(turn_of_calls(1));
        messages.extend(turn_of_calls(LOOKBACK_BLOCKS + 5));
        let request = ModelRequest {
            system: "sys".into(),
            messages,
            tools: tools(&["a"]),
            ..Default::default()
        };
        let (text, body) = cached(&request, CacheTtl::FiveMinutes);
        assert_eq!(text.matches("cache_control").count(), 4, "{text}");
        let turns = body["messages"].as_array().unwrap();
        assert_eq!(turns.len(), 5);
        // The previous request ended with the first turn's tool result; it is marked again.
        assert!(
            turns[2]["content"][0].get("cache_control").is_some(),
            "{text}"
        );
        let last = turns[4]["content"].as_array().unwrap();
        assert!(last[last.len() - 1].get("cache_control").is_some());
        // A short turn needs no second message breakpoint.
        let mut short = vec![Message::user("go")];
        short.extend(turn_of_calls(1));
        short.extend(turn_of_calls(3));
        let request = ModelRequest {
            system: "sys".into(),
            messages: short,
            tools: tools(&["a"]),
            ..Default::default()
        };
        assert_eq!(
            cached(&request, CacheTtl::FiveMinutes)
                .0
                .matches("cache_control")
                .count(),
            3
        );
    }
}
