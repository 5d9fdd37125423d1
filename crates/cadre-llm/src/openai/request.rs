//! Request bodies for Chat Completions: messages, tools and sampling options.

use crate::ModelRequest;
use crate::http::f32_json;
use crate::schema::normalize_tool_schema;
use cadre_types::{Message, ToolDefinition};
use serde_json::{Map, Value, json};

/// The JSON body of one Chat Completions call.
pub(super) fn build_body(request: &ModelRequest, stream: bool) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("messages".into(), Value::Array(messages(request)));
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool).collect()),
        );
    }
    body.insert("stream".into(), Value::Bool(stream));
    if stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(max) = request.max_output_tokens {
        body.insert("max_tokens".into(), json!(max));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), f32_json(t));
    }
    Value::Object(body)
}

/// The system prompt first, then the conversation in wire form.
fn messages(request: &ModelRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        out.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        out.push(match message {
            Message::System { content } => json!({"role": "system", "content": content}),
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => {
                // Thinking is not sent back: several servers reject `reasoning_content`.
                if tool_calls.is_empty() {
                    json!({"role": "assistant", "content": content})
                } else {
                    let calls: Vec<Value> = tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": replay_arguments(&c.arguments)},
                            })
                        })
                        .collect();
                    let content = if content.is_empty() {
                        Value::Null
                    } else {
                        Value::String(content.clone())
                    };
                    json!({"role": "assistant", "content": content, "tool_calls": calls})
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
        });
    }
    out
}

fn tool(def: &ToolDefinition) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": def.name,
            "description": def.description,
            "parameters": normalize_tool_schema(&def.parameters),
        }
    })
}

/// Arguments as replayed in history: servers such as llama.cpp's reject a request whose
/// earlier tool call has invalid JSON arguments, so those are sent as `{}` (the model already
/// saw the parse error in the tool result).
fn replay_arguments(arguments: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(_)) => arguments.to_string(),
        _ => "{}".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_arguments_are_replayed_as_an_empty_object() {
        assert_eq!(replay_arguments(r#"{"a":1}"#), r#"{"a":1}"#);
        assert_eq!(replay_arguments(r#"{"a": "unterminated"#), "{}");
        assert_eq!(replay_arguments("[1]"), "{}");
    }
    use cadre_types::ToolCall;

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
        let body = build_body(&request, true);
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
        let plain = build_body(&ModelRequest::default(), false);
        assert_eq!(plain, json!({"model": "", "messages": [], "stream": false}));
    }
}
