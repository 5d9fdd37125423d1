//! Builders for OpenAI Chat Completions replies: SSE chunk sequences (text, reasoning,
//! tool-call deltas with explicit indexes, finish, usage, `[DONE]`) and whole JSON bodies.

use crate::reply::MockReply;
use crate::sse::sse_data;
use bytes::Bytes;
use serde_json::{Value, json};

/// A streamed Chat Completions reply, one SSE frame per builder call.
///
/// ```
/// use cadre_testkit::OpenAiStream;
/// let reply = OpenAiStream::new()
///     .text("Hel")
///     .text("lo")
///     .finish("stop")
///     .usage(10, 2, 0)
///     .done()
///     .into_reply();
/// ```
#[derive(Debug, Clone)]
pub struct OpenAiStream {
    model: String,
    frames: Vec<Bytes>,
}

impl Default for OpenAiStream {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenAiStream {
    /// An empty sequence whose chunks name the model `mock-model`.
    pub fn new() -> Self {
        Self::with_model("mock-model")
    }

    /// An empty sequence whose chunks name `model`.
    pub fn with_model(model: &str) -> Self {
        Self {
            model: model.to_string(),
            frames: Vec::new(),
        }
    }

    /// Append a chunk with one choice carrying `delta` and `finish_reason`.
    pub fn delta(self, delta: Value, finish_reason: Option<&str>) -> Self {
        let chunk = json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        });
        self.chunk(&chunk)
    }

    /// Append an arbitrary JSON chunk as a `data:` frame.
    pub fn chunk(mut self, chunk: &Value) -> Self {
        self.frames.push(sse_data(&chunk.to_string()));
        self
    }

    /// Append raw bytes as one frame (malformed data, comments, partial frames).
    pub fn raw(mut self, bytes: impl Into<Bytes>) -> Self {
        self.frames.push(bytes.into());
        self
    }

    /// Append the opening chunk `{"role":"assistant","content":""}`.
    pub fn role(self) -> Self {
        self.delta(json!({"role": "assistant", "content": ""}), None)
    }

    /// Append a text delta.
    pub fn text(self, text: &str) -> Self {
        self.delta(json!({"content": text}), None)
    }

    /// Append a `reasoning_content` delta.
    pub fn reasoning(self, text: &str) -> Self {
        self.delta(json!({"reasoning_content": text}), None)
    }

    /// Append the first fragment of tool call `index`: its id and name, empty arguments.
    pub fn tool_call_start(self, index: usize, id: &str, name: &str) -> Self {
        self.delta(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": ""}}]}),
            None,
        )
    }

    /// Append an `arguments` fragment for tool call `index`.
    pub fn tool_call_args(self, index: usize, fragment: &str) -> Self {
        self.delta(
            json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
            None,
        )
    }

    /// Append a whole tool call in one chunk (`index`, id, name, complete arguments).
    pub fn tool_call(self, index: usize, id: &str, name: &str, arguments: &str) -> Self {
        self.delta(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": arguments}}]}),
            None,
        )
    }

    /// Append the closing chunk with `finish_reason` (`stop`, `tool_calls`, `length`).
    pub fn finish(self, reason: &str) -> Self {
        self.delta(json!({}), Some(reason))
    }

    /// Append the usage chunk (empty `choices`), as sent with `include_usage`.
    pub fn usage(self, prompt: u64, completion: u64, cached: u64) -> Self {
        let chunk = json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.model,
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        });
        self.chunk(&chunk)
    }

    /// Append `data: [DONE]`.
    pub fn done(mut self) -> Self {
        self.frames.push(sse_data("[DONE]"));
        self
    }

    /// The frames built so far.
    pub fn frames(&self) -> &[Bytes] {
        &self.frames
    }

    /// A 200 `text/event-stream` reply sending each frame separately.
    pub fn into_reply(self) -> MockReply {
        MockReply::sse(self.frames)
    }
}

/// A whole (non-streamed) Chat Completions reply.
#[derive(Debug, Clone)]
pub struct OpenAiJson {
    model: String,
    content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Vec<Value>,
    finish_reason: String,
    usage: (u64, u64, u64),
}

impl Default for OpenAiJson {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenAiJson {
    /// An empty reply (`finish_reason` `stop`, zero usage) for model `mock-model`.
    pub fn new() -> Self {
        Self {
            model: "mock-model".into(),
            content: None,
            reasoning: None,
            tool_calls: Vec::new(),
            finish_reason: "stop".into(),
            usage: (0, 0, 0),
        }
    }

    /// Set the message text.
    pub fn text(mut self, text: &str) -> Self {
        self.content = Some(text.to_string());
        self
    }

    /// Set `reasoning_content`.
    pub fn reasoning(mut self, text: &str) -> Self {
        self.reasoning = Some(text.to_string());
        self
    }

    /// Add a tool call and set `finish_reason` to `tool_calls`.
    pub fn tool_call(mut self, id: &str, name: &str, arguments: &str) -> Self {
        self.tool_calls.push(json!({
            "id": id, "type": "function", "function": {"name": name, "arguments": arguments}
        }));
        self.finish_reason = "tool_calls".into();
        self
    }

    /// Set `finish_reason`.
    pub fn finish(mut self, reason: &str) -> Self {
        self.finish_reason = reason.to_string();
        self
    }

    /// Set usage (prompt, completion, cached prompt tokens).
    pub fn usage(mut self, prompt: u64, completion: u64, cached: u64) -> Self {
        self.usage = (prompt, completion, cached);
        self
    }

    /// The JSON body.
    pub fn to_json(&self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.content});
        if let Some(r) = &self.reasoning {
            message["reasoning_content"] = json!(r);
        }
        if !self.tool_calls.is_empty() {
            message["tool_calls"] = Value::Array(self.tool_calls.clone());
        }
        let (p, c, cached) = self.usage;
        json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
                      "prompt_tokens_details": {"cached_tokens": cached}},
        })
    }

    /// A 200 JSON reply.
    pub fn into_reply(self) -> MockReply {
        MockReply::json(&self.to_json())
    }
}
