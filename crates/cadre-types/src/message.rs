//! Conversation messages as cadre keeps them, independent of any provider's wire format.

use serde::{Deserialize, Serialize};

/// One tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; tool results refer back to it.
    pub id: String,
    /// The tool name as the model spelled it (it may not exist).
    pub name: String,
    /// The raw JSON text of the arguments, kept verbatim so malformed JSON can be reported to the model.
    pub arguments: String,
}

/// An image a tool returned, sent to models that accept images with the tool's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// Its MIME type (`image/png`, `image/jpeg`, `image/gif` or `image/webp`).
    pub media_type: String,
    /// The image bytes, base64-encoded (standard alphabet, padded).
    pub data: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// A system instruction (normally only the engine's built prompt).
    System {
        /// The instruction text.
        content: String,
    },
    /// Input from the user (or the delegating parent, or an injected notice).
    User {
        /// The text.
        content: String,
    },
    /// A model reply: text, optional thinking and zero or more tool calls.
    Assistant {
        /// Visible text of the reply (may be empty).
        #[serde(default)]
        content: String,
        /// Reasoning text the provider exposed, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<String>,
        /// Provider signature for the thinking block (Anthropic requires it when replaying).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking_signature: Option<String>,
        /// Tool calls requested in this reply, in the order the model issued them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The observation for one tool call.
    Tool {
        /// The id of the call this answers.
        tool_call_id: String,
        /// The tool's name.
        name: String,
        /// What the model sees.
        content: String,
        /// True when the call failed (unknown tool, bad arguments, denied, tool error, timeout).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        /// Images the tool returned; `content` names them too, for models without images.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
    },
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            content: content.into(),
        }
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message::Assistant {
            content: content.into(),
            thinking: None,
            thinking_signature: None,
            tool_calls: Vec::new(),
        }
    }

    /// The visible text of a message (empty for tool results' metadata).
    pub fn text(&self) -> &str {
        match self {
            Message::System { content }
            | Message::User { content }
            | Message::Assistant { content, .. }
            | Message::Tool { content, .. } => content,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_json() {
        let msgs = vec![
            Message::system("sys"),
            Message::user("hi"),
            Message::Assistant {
                content: String::new(),
                thinking: Some("hmm".into()),
                thinking_signature: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\":\"a\"}".into(),
                }],
            },
            Message::Tool {
                tool_call_id: "c1".into(),
                name: "read_file".into(),
                content: "x".into(),
                is_error: true,
                images: vec![Image {
                    media_type: "image/png".into(),
                    data: "AAAA".into(),
                }],
            },
        ];
        let json = serde_json::to_string(&msgs).unwrap();
        let back: Vec<Message> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, msgs);
        assert!(json.contains("\"role\":\"tool\""));
    }
}
