//! Request bodies for the Messages API: top-level system prompt, content blocks, strict
//! user/assistant alternation with tool results gathered into user messages.

use super::DEFAULT_MAX_TOKENS;
use crate::ModelRequest;
use crate::http::f32_json;
use crate::schema::normalize_tool_schema;
use cadre_types::Message;
use serde_json::{Map, Value, json};

/// The JSON body of one Messages call.
pub(super) fn build_body(request: &ModelRequest, stream: bool) -> Value {
    let mut system = request.system.clone();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, blocks) = match message {
            Message::System { content } => {
                // The Messages API has no system role: extra instructions join the prompt.
                if !content.is_empty() {
                    if !system.is_empty() {
                        system.push_str("\n\n");
                    }
                    system.push_str(content);
                }
                continue;
            }
            Message::User { content } => ("user", text_block(content).into_iter().collect()),
            Message::Assistant {
                content,
                thinking,
                thinking_signature,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                if let Some(signature) = thinking_signature.as_deref().filter(|s| !s.is_empty()) {
                    blocks.push(json!({
                        "type": "thinking",
                        "thinking": thinking.as_deref().unwrap_or(""),
                        "signature": signature,
                    }));
                }
                blocks.extend(text_block(content));
                for call in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": tool_input(&call.arguments),
                    }));
                }
                ("assistant", blocks)
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": tool_call_id,
                    "content": content,
                    "is_error": is_error,
                })],
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }

    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert(
        "max_tokens".into(),
        json!(request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if !system.is_empty() {
        body.insert("system".into(), Value::String(system));
    }
    let messages = turns
        .into_iter()
        .map(|(role, mut blocks)| {
            if role == "user" {
                // Anthropic wants tool results before any text of the same message.
                blocks
                    .sort_by_key(|b| b.get("type").and_then(Value::as_str) != Some("tool_result"));
            }
            json!({"role": role, "content": blocks})
        })
        .collect();
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": normalize_tool_schema(&t.parameters),
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), f32_json(t));
    }
    body.insert("stream".into(), Value::Bool(stream));
    Value::Object(body)
}

/// A text block, or nothing for empty text (Anthropic rejects empty text blocks).
fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// Tool-call arguments as the JSON object `tool_use.input` requires; `{}` when they are
/// not a JSON object.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_types::{ToolCall, ToolDefinition};

    fn tool_msg(id: &str, content: &str, is_error: bool) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "t".into(),
            content: content.into(),
            is_error,
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
        let body = build_body(&request, false);
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
}
