//! HTTP plumbing shared by the OpenAI-compatible and Anthropic providers: the client,
//! headers with `${VAR}` expansion, one request attempt (status check, SSE decoding with
//! an idle timeout, or a whole JSON body), and the retry loop around attempts.

mod attempt;
mod limit;

pub(crate) use attempt::run_body;

use crate::retry::RetryPolicy;
use crate::{ProviderConfig, ProviderError, StreamEvent};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::time::Duration;

/// Everything one provider instance needs to send requests; built once in `from_config`.
#[derive(Clone)]
pub(crate) struct HttpCore {
    /// Provider name for errors and logs.
    pub name: String,
    /// The shared client (connection pool).
    pub client: reqwest::Client,
    /// The endpoint.
    pub url: reqwest::Url,
    /// Authentication, protocol and configured extra headers.
    pub headers: HeaderMap,
    /// Stream replies over SSE.
    pub stream: bool,
    /// Longest wait for any byte of the reply.
    pub idle_timeout: Duration,
    /// Retries.
    pub retry: RetryPolicy,
    /// What to check when the server refuses the key (the key's environment variable).
    pub auth_hint: String,
    /// Requests in flight at once, when capped (`max_concurrent_requests`).
    pub limit: Option<std::sync::Arc<tokio::sync::Semaphore>>,
}

impl HttpCore {
    /// Common part of `from_config`: client, timeouts, streaming flag and extra headers
    /// (added after `base`, so configured headers override defaults).
    pub fn new(
        name: &str,
        cfg: &ProviderConfig,
        url: &str,
        mut headers: HeaderMap,
        auth_hint: String,
    ) -> Result<Self, ProviderError> {
        let url = reqwest::Url::parse(url).map_err(|e| {
            ProviderError::Config(format!("provider {name}: bad base URL {url:?}: {e}"))
        })?;
        for (key, value) in &cfg.headers {
            let value = cadre_types::env_ref::expand_env(value).map_err(|e| {
                ProviderError::Config(format!("provider {name}: header {key}: {e}"))
            })?;
            insert_header(&mut headers, name, key, &value)?;
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(15))
            .user_agent(concat!("cadre/", env!("CARGO_PKG_VERSION")))
            .redirect(crate::redirects::same_origin_redirects())
            .build()
            .map_err(|e| ProviderError::Config(format!("provider {name}: HTTP client: {e}")))?;
        Ok(Self {
            name: name.to_string(),
            client,
            url,
            headers,
            stream: cfg.stream.unwrap_or(true),
            idle_timeout: Duration::from_secs(cfg.idle_timeout_secs.unwrap_or(60).max(1)),
            retry: RetryPolicy::from_config(cfg),
            auth_hint,
            limit: cfg.max_concurrent_requests.filter(|n| *n > 0).map(|n| {
                let n = n.min(tokio::sync::Semaphore::MAX_PERMITS);
                std::sync::Arc::new(tokio::sync::Semaphore::new(n))
            }),
        })
    }
}

/// Add one header, with a configuration error naming the provider when it is invalid.
pub(crate) fn insert_header(
    headers: &mut HeaderMap,
    provider: &str,
    key: &str,
    value: &str,
) -> Result<(), ProviderError> {
    let name = HeaderName::from_bytes(key.as_bytes()).map_err(|e| {
        ProviderError::Config(format!("provider {provider}: bad header name {key:?}: {e}"))
    })?;
    let mut value = HeaderValue::from_str(value).map_err(|e| {
        ProviderError::Config(format!(
            "provider {provider}: bad value for header {key}: {e}"
        ))
    })?;
    if name == reqwest::header::AUTHORIZATION || key.to_ascii_lowercase().contains("key") {
        value.set_sensitive(true);
    }
    headers.insert(name, value);
    Ok(())
}

/// The value of environment variable `var` (as cadre started with it), when set and not blank.
pub(crate) fn env_value(var: &str) -> Option<String> {
    cadre_types::process_env::var(var).filter(|v| !v.trim().is_empty())
}

/// Turns SSE events of one reply into [`StreamEvent`]s.
pub(crate) trait SseDecoder: Send {
    /// Bytes of the reply the decoder holds back (tool calls and signatures still
    /// arriving), counted against the reply cap.
    fn held_bytes(&self) -> usize;

    /// Whether a tool call has begun arriving and is not complete yet.
    fn tool_call_started(&self) -> bool;

    /// Handle one SSE event (`event` is the SSE event name, `message` when absent).
    /// Push events to emit into `out`; return `Ok(true)` once the reply is complete.
    fn on_event(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, ProviderError>;

    /// The body ended. Push the closing events when the reply is complete, else say what
    /// is missing.
    fn on_eof(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), Unfinished>;
}

/// Why a streamed reply whose body ended is not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unfinished {
    /// It ended inside a tool call.
    #[error("stream ended in the middle of a tool call")]
    InToolCall,
    /// It ended before the provider's end of reply (named).
    #[error("stream ended before {0}")]
    Before(&'static str),
}

/// The provider-specific side of a request: decoding replies and mapping errors.
pub(crate) trait Wire: Send + Sync + 'static {
    /// A fresh decoder for one streamed reply.
    fn decoder(&self) -> Box<dyn SseDecoder>;
    /// Decode a whole (non-streamed) JSON reply.
    fn parse_full(&self, body: &[u8]) -> Result<Vec<StreamEvent>, ProviderError>;
    /// Map an error status and body to an error.
    fn map_error(
        &self,
        status: u16,
        body: &str,
        retry_after: Option<Duration>,
        model: &str,
    ) -> ProviderError;
}

/// An error with its sources, e.g. `error sending request: connection refused`.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// The human message of an error body: `{"error":{"message":..}}`, `{"error":".."}`,
/// `{"message":..}` or `{"detail":..}`, else the (shortened) text itself. Also returns the
/// error's `code` or `type`, when given.
pub(crate) fn error_message(status: u16, body: &str) -> (String, Option<String>) {
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(body) {
        let err = json.get("error").unwrap_or(&json);
        let code = ["code", "type"]
            .iter()
            .find_map(|k| err.get(*k))
            .and_then(|v| match v {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                _ => None,
            });
        let message = match err {
            serde_json::Value::String(s) => Some(s.clone()),
            _ => ["message", "detail", "error"]
                .iter()
                .find_map(|k| err.get(*k).and_then(|v| v.as_str()))
                .map(str::to_string),
        };
        if let Some(message) = message {
            return (message, code);
        }
    }
    let text = body.trim();
    if text.is_empty() {
        let reason = reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no message");
        return (reason.to_string(), None);
    }
    let mut short: String = text.chars().take(500).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    (short, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_header_reference_is_a_config_error_naming_provider_and_header() {
        let mut cfg = ProviderConfig::default();
        cfg.headers
            .insert("X-Key".into(), "Bearer ${CADRE_TEST_UNCLOSED".into());
        let e = HttpCore::new(
            "p1",
            &cfg,
            "http://127.0.0.1:1/",
            HeaderMap::new(),
            String::new(),
        )
        .err()
        .map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("provider p1: header X-Key: unclosed `${` at byte 7")),
            "{e:?}"
        );
    }

    #[test]
    fn error_messages_are_extracted() {
        let (m, c) = error_message(
            400,
            r#"{"error":{"message":"too long","code":"context_length_exceeded"}}"#,
        );
        assert_eq!(
            (m.as_str(), c.as_deref()),
            ("too long", Some("context_length_exceeded"))
        );
        let (m, _) = error_message(404, r#"{"error":"model 'x' not found"}"#);
        assert_eq!(m, "model 'x' not found");
        let (m, c) = error_message(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(
            (m.as_str(), c.as_deref()),
            ("Overloaded", Some("overloaded_error"))
        );
        assert_eq!(error_message(502, "").0, "Bad Gateway");
        assert_eq!(error_message(500, "  boom \n").0, "boom");
    }
}
