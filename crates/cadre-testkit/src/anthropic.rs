//! Builders for Anthropic Messages replies: SSE event sequences (message_start, content
//! blocks with their deltas, message_delta, message_stop, ping, error) and whole JSON bodies.

use crate::reply::MockReply;
use crate::sse::sse_event;
use bytes::Bytes;
use serde_json::{Value, json};

/// A streamed Messages reply, one SSE frame per event.
///
/// Block helpers ([`text`](Self::text), [`tool_use`](Self::tool_use),
/// [`thinking`](Self::thinking)) number their blocks automatically; a `message_start`
/// is added before the first block when none was written.
///
/// ```
/// use cadre_testkit::AnthropicStream;
/// let reply = AnthropicStream::new()
///     .start(12, 0)
///     .text(&["Hel", "lo"])
///     .tool_use("toolu_1", "read_file", &["{\"path\":", "\"a.txt\"}"])
///     .stop("tool_use", 7)
///     .into_reply();
/// ```
#[derive(Debug, Clone)]
pub struct AnthropicStream {
    model: String,
    frames: Vec<Bytes>,
    started: bool,
    next_index: usize,
}

impl Default for AnthropicStream {
    fn default() -> Self {
        Self::new()
    }
}

impl AnthropicStream {
    /// An empty sequence for model `mock-model`.
    pub fn new() -> Self {
        Self::with_model("mock-model")
    }

    /// An empty sequence for `model`.
    pub fn with_model(model: &str) -> Self {
        Self {
            model: model.to_string(),
            frames: Vec::new(),
            started: false,
            next_index: 0,
        }
    }

    /// Append an event whose SSE name is its `type` field.
    pub fn event(mut self, event: &Value) -> Self {
        let name = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message")
            .to_string();
        self.frames.push(sse_event(&name, &event.to_string()));
        self
    }

    /// Append raw bytes as one frame.
    pub fn raw(mut self, bytes: impl Into<Bytes>) -> Self {
        self.frames.push(bytes.into());
        self
    }

    /// Append `message_start` with the given input and cache-read token counts.
    pub fn start(self, input_tokens: u64, cache_read_tokens: u64) -> Self {
        self.start_with_cache(input_tokens, cache_read_tokens, 0)
    }

    /// Append `message_start` with uncached input, cache-read and cache-write token counts.
    pub fn start_with_cache(
        mut self,
        input_tokens: u64,
        cache_read_tokens: u64,
        cache_write_tokens: u64,
    ) -> Self {
        self.started = true;
        let event = json!({
            "type": "message_start",
            "message": {
                "id": "msg_mock", "type": "message", "role": "assistant", "model": self.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                          "cache_read_input_tokens": cache_read_tokens,
                          "cache_creation_input_tokens": cache_write_tokens},
            }
        });
        self.event(&event)
    }

    fn ensure_started(self) -> Self {
        if self.started { self } else { self.start(0, 0) }
    }

    fn take_index(&mut self) -> usize {
        let i = self.next_index;
        self.next_index += 1;
        i
    }

    /// Append `content_block_start` for block `index` with `block`.
    pub fn block_start(self, index: usize, block: &Value) -> Self {
        self.event(&json!({"type": "content_block_start", "index": index, "content_block": block}))
    }

    /// Append `content_block_delta` for block `index` with `delta`.
    pub fn block_delta(self, index: usize, delta: &Value) -> Self {
        self.event(&json!({"type": "content_block_delta", "index": index, "delta": delta}))
    }

    /// Append `content_block_stop` for block `index`.
    pub fn block_stop(self, index: usize) -> Self {
        self.event(&json!({"type": "content_block_stop", "index": index}))
    }

    /// Append a whole text block: start, one `text_delta` per piece, stop.
    pub fn text(self, pieces: &[&str]) -> Self {
        let mut s = self.ensure_started();
        let i = s.take_index();
        s = s.block_start(i, &json!({"type": "text", "text": ""}));
        for p in pieces {
            s = s.block_delta(i, &json!({"type": "text_delta", "text": p}));
        }
        s.block_stop(i)
    }

    /// Append a whole thinking block with an optional signature (sent as `signature_delta`).
    pub fn thinking(self, text: &str, signature: Option<&str>) -> Self {
        let mut s = self.ensure_started();
        let i = s.take_index();
        s = s.block_start(i, &json!({"type": "thinking", "thinking": ""}));
        s = s.block_delta(i, &json!({"type": "thinking_delta", "thinking": text}));
        if let Some(sig) = signature {
            s = s.block_delta(i, &json!({"type": "signature_delta", "signature": sig}));
        }
        s.block_stop(i)
    }

    /// Append a whole tool_use block: start (id, name, `input: {}`), one
    /// `input_json_delta` per fragment, stop.
    pub fn tool_use(self, id: &str, name: &str, json_fragments: &[&str]) -> Self {
        let (s, i) = self.tool_use_open(id, name, json_fragments);
        s.block_stop(i)
    }

    /// Like [`tool_use`](Self::tool_use) without the closing `content_block_stop`; returns
    /// the block index too (to cut a stream in the middle of a call).
    pub fn tool_use_open(self, id: &str, name: &str, json_fragments: &[&str]) -> (Self, usize) {
        let mut s = self.ensure_started();
        let i = s.take_index();
        s = s.block_start(
            i,
            &json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
        );
        for f in json_fragments {
            s = s.block_delta(i, &json!({"type": "input_json_delta", "partial_json": f}));
        }
        (s, i)
    }

    /// Append a `ping` event.
    pub fn ping(self) -> Self {
        self.event(&json!({"type": "ping"}))
    }

    /// Append `message_delta` with `stop_reason` and the output token count.
    pub fn message_delta(self, stop_reason: &str, output_tokens: u64) -> Self {
        self.event(&json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output_tokens},
        }))
    }

    /// Append `message_stop`.
    pub fn message_stop(self) -> Self {
        self.event(&json!({"type": "message_stop"}))
    }

    /// Append `message_delta` and `message_stop`.
    pub fn stop(self, stop_reason: &str, output_tokens: u64) -> Self {
        self.message_delta(stop_reason, output_tokens)
            .message_stop()
    }

    /// Append an `error` event (`overloaded_error`, `api_error`, ...).
    pub fn error(self, kind: &str, message: &str) -> Self {
        self.event(&json!({"type": "error", "error": {"type": kind, "message": message}}))
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

/// A whole (non-streamed) Messages reply.
#[derive(Debug, Clone)]
pub struct AnthropicJson {
    model: String,
    content: Vec<Value>,
    stop_reason: String,
    usage: (u64, u64, u64),
    cache_write: u64,
}

impl Default for AnthropicJson {
    fn default() -> Self {
        Self::new()
    }
}

impl AnthropicJson {
    /// An empty reply (`stop_reason` `end_turn`, zero usage) for model `mock-model`.
    pub fn new() -> Self {
        Self {
            model: "mock-model".into(),
            content: Vec::new(),
            stop_reason: "end_turn".into(),
            usage: (0, 0, 0),
            cache_write: 0,
        }
    }

    /// Add a text block.
    pub fn text(mut self, text: &str) -> Self {
        self.content.push(json!({"type": "text", "text": text}));
        self
    }

    /// Add a thinking block with a signature.
    pub fn thinking(mut self, text: &str, signature: &str) -> Self {
        self.content
            .push(json!({"type": "thinking", "thinking": text, "signature": signature}));
        self
    }

    /// Add a tool_use block and set `stop_reason` to `tool_use`.
    pub fn tool_use(mut self, id: &str, name: &str, input: Value) -> Self {
        self.content
            .push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
        self.stop_reason = "tool_use".into();
        self
    }

    /// Set `stop_reason`.
    pub fn stop_reason(mut self, reason: &str) -> Self {
        self.stop_reason = reason.to_string();
        self
    }

    /// Set usage (input, output, cache-read input tokens).
    pub fn usage(mut self, input: u64, output: u64, cache_read: u64) -> Self {
        self.usage = (input, output, cache_read);
        self
    }

    /// Set the cache-write (`cache_creation_input_tokens`) count.
    pub fn cache_write(mut self, tokens: u64) -> Self {
        self.cache_write = tokens;
        self
    }

    /// The JSON body.
    pub fn to_json(&self) -> Value {
        let (i, o, c) = self.usage;
        let w = self.cache_write;
        json!({
            "id": "msg_mock", "type": "message", "role": "assistant", "model": self.model,
            "content": self.content, "stop_reason": self.stop_reason, "stop_sequence": null,
            "usage": {"input_tokens": i, "output_tokens": o, "cache_read_input_tokens": c,
                      "cache_creation_input_tokens": w},
        })
    }

    /// A 200 JSON reply.
    pub fn into_reply(self) -> MockReply {
        MockReply::json(&self.to_json())
    }
}
