//! Provider errors, with the retry classification the retry policy relies on.

use std::time::Duration;

/// Why a model call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// The key was refused (401/403).
    #[error("authentication failed for {provider}: check {hint}")]
    Auth {
        /// Provider name.
        provider: String,
        /// What to check (usually the env var of the key).
        hint: String,
    },
    /// The model does not exist (404 or the provider's "model not found").
    #[error("unknown model {model} for {provider}: {message}")]
    UnknownModel {
        /// Provider name.
        provider: String,
        /// The model name.
        model: String,
        /// The provider's message.
        message: String,
    },
    /// The prompt does not fit the model's context window.
    #[error("context too long for {provider}: {message}")]
    ContextTooLong {
        /// Provider name.
        provider: String,
        /// The provider's message.
        message: String,
    },
    /// Any other HTTP error status, with the provider's own message.
    #[error("{provider} returned HTTP {status}: {message}")]
    Http {
        /// Provider name.
        provider: String,
        /// HTTP status code.
        status: u16,
        /// The provider's message.
        message: String,
        /// `Retry-After`, when the server sent one.
        retry_after: Option<Duration>,
    },
    /// The connection failed or broke.
    #[error("connection to {provider} failed: {message}")]
    Transport {
        /// Provider name.
        provider: String,
        /// Detail.
        message: String,
    },
    /// The stream broke or could not be decoded.
    #[error("bad stream from {provider}: {message}")]
    Stream {
        /// Provider name.
        provider: String,
        /// Detail.
        message: String,
        /// Whether tool-call content had arrived before the break: the reply cannot be
        /// asked for again then (text alone is discarded and re-requested).
        after_tool_call: bool,
    },
    /// The reply grew past its cap (text, thinking and tool arguments, or one SSE event);
    /// the stream was dropped.
    #[error("the reply from {provider} grew past {limit} bytes")]
    ReplyTooLong {
        /// Provider name.
        provider: String,
        /// The cap in bytes.
        limit: usize,
    },
    /// No data arrived for too long.
    #[error("{provider} stream stalled: no data for {}s", .after.as_secs())]
    IdleTimeout {
        /// Provider name.
        provider: String,
        /// The idle limit that fired.
        after: Duration,
        /// Whether tool-call content had arrived before the stall.
        after_tool_call: bool,
    },
    /// The model cannot be used here: an unknown provider, a missing key or base URL.
    #[error(transparent)]
    NotReady(#[from] crate::registry::NotReady),
    /// Bad configuration (a bad URL or header).
    #[error("provider configuration: {0}")]
    Config(String),
    /// A failed request was not sent again because its caller said no (the run may not
    /// act any more: it lost its task to another node, or its budget ran out).
    #[error("{provider}: {message} (not retried: the run may not go on)")]
    RetryRefused {
        /// The provider's name.
        provider: String,
        /// The error of the last attempt.
        message: String,
    },
    /// A scripted model could not answer (no matching script, turns exhausted, bad file).
    #[error("scripted model: {0}")]
    Script(String),
}

impl ProviderError {
    /// True when the same request may succeed if sent again.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => {
                matches!(status, 408 | 409 | 429 | 500 | 502 | 503 | 504 | 529)
            }
            ProviderError::Transport { .. } => true,
            ProviderError::Stream {
                after_tool_call, ..
            }
            | ProviderError::IdleTimeout {
                after_tool_call, ..
            } => !after_tool_call,
            _ => false,
        }
    }

    /// The server's `Retry-After`, when it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
