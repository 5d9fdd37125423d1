//! The provider trait: one required method that streams a model reply.

use crate::ProviderError;
use cadre_types::{Message, ToolCall, ToolDefinition, Usage};
use futures::StreamExt;
use futures::stream::BoxStream;

/// Who is asking: lets scripted models and logs tell parent and children apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestMetadata {
    /// The agent name (`main` for the top-level agent, else the sub-agent's name).
    pub agent: String,
    /// The session the request belongs to.
    pub session_id: String,
    /// Routes requests that share a prompt prefix to the same provider cache (OpenAI's
    /// `prompt_cache_key`); empty: none.
    pub cache_key: String,
}

/// Everything a provider needs for one model call.
#[derive(Debug, Clone, Default)]
pub struct ModelRequest {
    /// The model name as the provider knows it (without the `provider:` prefix).
    pub model: String,
    /// The system prompt; the same for every call of a run.
    pub system: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools offered.
    pub tools: Vec<ToolDefinition>,
    /// Upper bound on output tokens, when set.
    pub max_output_tokens: Option<u32>,
    /// Upper bound on the bytes of text, thinking and tool-call arguments of the reply
    /// (`None`: [`DEFAULT_MAX_REPLY_BYTES`]). A provider holds no more than this of a reply
    /// (partial tool calls, one SSE event) and fails with [`ProviderError::ReplyTooLong`]
    /// beyond it.
    pub max_reply_bytes: Option<usize>,
    /// Sampling temperature, when set.
    pub temperature: Option<f32>,
    /// Who is asking.
    pub metadata: RequestMetadata,
}

/// The reply cap when a request sets none: 4 MiB of text, thinking and tool arguments.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 4 * 1024 * 1024;

impl ModelRequest {
    /// The reply cap of this request ([`Self::max_reply_bytes`] or the default).
    pub fn reply_cap(&self) -> usize {
        self.max_reply_bytes.unwrap_or(DEFAULT_MAX_REPLY_BYTES)
    }
}

/// One piece of a streamed reply. Tool calls arrive whole: providers assemble deltas.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// Visible text.
    TextDelta(String),
    /// Reasoning text.
    ThinkingDelta(String),
    /// The signature of the thinking block (Anthropic).
    ThinkingSignature(String),
    /// A complete tool call.
    ToolCall(ToolCall),
    /// Token usage of this call.
    Usage(Usage),
    /// The provider's id of the reply (`chatcmpl-…`, `msg_…`), given just before `Done`.
    ResponseId(String),
    /// The reply broke off before any tool call and is being asked for again: forget the
    /// text and thinking received so far; the new reply follows from its start.
    Restart,
    /// The reply is complete.
    Done {
        /// The provider's stop reason, if given.
        stop_reason: Option<String>,
    },
}

/// A streamed reply. Dropping it cancels the request.
pub type ModelStream = BoxStream<'static, Result<StreamEvent, ProviderError>>;

/// A model backend. Built once and shared; cheap to call concurrently.
pub trait Provider: Send + Sync {
    /// The provider's name (`openai`, `anthropic`, `scripted`, or a configured name).
    fn name(&self) -> &str;

    /// Start a model call and stream its reply. Errors, including connection errors,
    /// arrive as items of the stream.
    fn stream(&self, request: ModelRequest) -> ModelStream;

    /// When the provider expects an API key and has none: what to set (the environment
    /// variable, or the setting that names it). Callers say so instead of sending requests
    /// that cannot succeed. `None`: a key is there, or the endpoint needs none.
    fn missing_key(&self) -> Option<String> {
        None
    }

    /// The host requests go to, for telemetry (`server.address`); `None` when there is none.
    fn server_address(&self) -> Option<&str> {
        None
    }
}

/// A whole reply, collected from a stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelResponse {
    /// All text.
    pub text: String,
    /// All thinking.
    pub thinking: String,
    /// Thinking signature, if any.
    pub thinking_signature: Option<String>,
    /// Tool calls in order.
    pub tool_calls: Vec<ToolCall>,
    /// Usage.
    pub usage: Usage,
    /// Stop reason.
    pub stop_reason: Option<String>,
    /// The provider's id of the reply, if it gave one.
    pub response_id: Option<String>,
}

/// Collect a stream into a [`ModelResponse`]; the first error is returned.
pub async fn collect(mut stream: ModelStream) -> Result<ModelResponse, ProviderError> {
    let mut out = ModelResponse::default();
    while let Some(ev) = stream.next().await {
        match ev? {
            StreamEvent::TextDelta(t) => out.text.push_str(&t),
            StreamEvent::ThinkingDelta(t) => out.thinking.push_str(&t),
            StreamEvent::ThinkingSignature(s) => out.thinking_signature = Some(s),
            StreamEvent::ToolCall(c) => out.tool_calls.push(c),
            StreamEvent::Usage(u) => out.usage += u,
            StreamEvent::Restart => {
                out.text.clear();
                out.thinking.clear();
                out.thinking_signature = None;
            }
            StreamEvent::ResponseId(id) => out.response_id = Some(id),
            StreamEvent::Done { stop_reason } => out.stop_reason = stop_reason,
        }
    }
    Ok(out)
}
