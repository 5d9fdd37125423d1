//! Anthropic Messages provider: `POST {base}/v1/messages`, streamed over SSE or as one
//! JSON body.
//!
//! Configuration, from the provider table and then the environment:
//! * base URL: `base_url`; else `ANTHROPIC_BASE_URL`; else `https://api.anthropic.com`. A
//!   base that already ends in `/v1` is accepted too.
//! * API key: the variable named by `api_key_env`; else `ANTHROPIC_API_KEY`, sent as
//!   `x-api-key`. Without a key the header is left out.
//! * `anthropic-version: 2023-06-01` is always sent; configured headers (e.g.
//!   `anthropic-beta`) are added and may override it.
//! * prompt caching: `cache_control` breakpoints on the tools, the system prompt and the
//!   latest message (see `anthropic/request.rs`) unless `cache = "off"`; `cache_ttl = "1h"` asks for the
//!   one-hour lifetime.

mod full;
mod request;
mod stream;

use crate::http::{self, HttpCore, Wire};
use crate::retry::RetryPolicy;
use crate::{
    CacheMode, CacheTtl, ModelRequest, ModelStream, Provider, ProviderConfig, ProviderError,
    StreamEvent,
};
use reqwest::header::HeaderMap;
use std::sync::Arc;
use std::time::Duration;

/// Default base URL of Anthropic providers.
pub const ANTHROPIC_DEFAULT_BASE: &str = "https://api.anthropic.com";
/// The host of Anthropic's own API, which needs a key.
pub const ANTHROPIC_API_HOST: &str = "api.anthropic.com";
/// The API version header value sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` sent when the request sets none (Anthropic requires the field).
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// A provider speaking the Anthropic Messages protocol.
pub struct AnthropicProvider {
    core: Arc<HttpCore>,
    wire: Arc<AnthropicWire>,
    /// Cache breakpoints and their lifetime, unless `cache = "off"`.
    cache: Option<CacheTtl>,
    /// Send the images of tool results (`images`, default on).
    images: bool,
    /// What to set when a key is expected and absent (see [`Provider::missing_key`]).
    missing_key: Option<String>,
}

impl std::fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("name", &self.core.name)
            .field("url", &self.core.url.as_str())
            .field("stream", &self.core.stream)
            .finish()
    }
}

impl AnthropicProvider {
    /// Build from a provider table (see the module documentation for defaults). Fails on
    /// a bad base URL or a header that references an unset variable.
    pub fn from_config(name: &str, cfg: &ProviderConfig) -> Result<Self, ProviderError> {
        let base = cfg
            .base_url
            .clone()
            .or_else(|| http::env_value("ANTHROPIC_BASE_URL"))
            .unwrap_or_else(|| ANTHROPIC_DEFAULT_BASE.into());
        let base = base.trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        let key_env = cfg
            .api_key_env
            .clone()
            .unwrap_or_else(|| "ANTHROPIC_API_KEY".to_string());
        let mut headers = HeaderMap::new();
        if let Some(key) = http::env_value(&key_env) {
            http::insert_header(&mut headers, name, "x-api-key", &key)?;
        }
        http::insert_header(&mut headers, name, "anthropic-version", ANTHROPIC_VERSION)?;
        let core = HttpCore::new(name, cfg, &url, headers, key_env)?;
        // A key is expected where one is named, and by Anthropic's own API; a proxy or local
        // server reached through `base_url` may need none.
        let expects_key =
            cfg.api_key_env.is_some() || core.url.host_str() == Some(ANTHROPIC_API_HOST);
        let has_key = core.headers.contains_key("x-api-key")
            || core.headers.contains_key(reqwest::header::AUTHORIZATION);
        let missing_key = (expects_key && !has_key).then(|| core.auth_hint.clone());
        let wire = Arc::new(AnthropicWire {
            provider: name.to_string(),
            auth_hint: core.auth_hint.clone(),
        });
        let cache = (cfg.cache != Some(CacheMode::Off)).then(|| cfg.cache_ttl.unwrap_or_default());
        Ok(Self {
            core: Arc::new(core),
            wire,
            cache,
            images: cfg.images.unwrap_or(true),
            missing_key,
        })
    }

    /// Replace the retry policy (e.g. short backoff delays in tests). Other settings stay.
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> Self {
        Arc::make_mut(&mut self.core).retry = policy;
        self
    }

    /// The endpoint requests go to (`{base}/v1/messages`).
    pub fn endpoint(&self) -> &str {
        self.core.url.as_str()
    }

    /// The retry policy in force.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.core.retry
    }
}

impl Provider for AnthropicProvider {
    fn server_address(&self) -> Option<&str> {
        self.core.url.host_str()
    }

    fn name(&self) -> &str {
        &self.core.name
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = request::build_body(&request, self.core.stream, self.cache, self.images);
        let cap = request.reply_cap();
        http::run_body(
            self.core.clone(),
            self.wire.clone(),
            request.model,
            cap,
            body,
            request.retry_gate,
        )
    }

    fn missing_key(&self) -> Option<String> {
        self.missing_key.clone()
    }
}

/// Decoding and error mapping for the Anthropic protocol.
pub(crate) struct AnthropicWire {
    pub(crate) provider: String,
    pub(crate) auth_hint: String,
}

impl Wire for AnthropicWire {
    fn decoder(&self) -> Box<dyn http::SseDecoder> {
        Box::new(stream::Decoder::new(&self.provider, &self.auth_hint))
    }

    fn parse_full(&self, body: &[u8]) -> Result<Vec<StreamEvent>, ProviderError> {
        full::parse_full(&self.provider, body)
    }

    fn map_error(
        &self,
        status: u16,
        body: &str,
        retry_after: Option<Duration>,
        model: &str,
    ) -> ProviderError {
        let (message, kind) = http::error_message(status, body);
        map_error(
            &self.provider,
            &self.auth_hint,
            status,
            kind.as_deref().unwrap_or(""),
            message,
            retry_after,
            model,
        )
    }
}

/// The HTTP status Anthropic uses for an error type (for errors inside a stream).
fn status_of(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        _ => 500,
    }
}

/// Map an Anthropic error (status, `error.type`, message) to a [`ProviderError`].
fn map_error(
    provider: &str,
    auth_hint: &str,
    status: u16,
    kind: &str,
    message: String,
    retry_after: Option<Duration>,
    model: &str,
) -> ProviderError {
    let lower = message.to_lowercase();
    if matches!(status, 401 | 403) || matches!(kind, "authentication_error" | "permission_error") {
        return ProviderError::Auth {
            provider: provider.to_string(),
            hint: auth_hint.to_string(),
        };
    }
    if status == 413
        || kind == "request_too_large"
        || lower.contains("prompt is too long")
        || lower.contains("context window")
        || lower.contains("context length")
    {
        return ProviderError::ContextTooLong {
            provider: provider.to_string(),
            message,
        };
    }
    if status == 404 || kind == "not_found_error" {
        return ProviderError::UnknownModel {
            provider: provider.to_string(),
            model: model.to_string(),
            message,
        };
    }
    let status = if kind == "overloaded_error" {
        529
    } else {
        status
    };
    ProviderError::Http {
        provider: provider.to_string(),
        status,
        message,
        retry_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(status: u16, body: &str) -> ProviderError {
        AnthropicWire {
            provider: "anthropic".into(),
            auth_hint: "ANTHROPIC_API_KEY".into(),
        }
        .map_error(status, body, None, "claude-x")
    }

    #[test]
    fn errors_are_classified() {
        let e = map(
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
        );
        assert_eq!(
            e.to_string(),
            "authentication failed for anthropic: check ANTHROPIC_API_KEY"
        );
        let e = map(
            404,
            r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}"#,
        );
        assert!(matches!(e, ProviderError::UnknownModel { .. }), "{e}");
        let e = map(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
        );
        assert!(matches!(e, ProviderError::ContextTooLong { .. }), "{e}");
        let e = map(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(e.to_string(), "anthropic returned HTTP 529: Overloaded");
        assert!(e.is_retryable());
        assert!(
            !map(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#
            )
            .is_retryable()
        );
    }

    #[test]
    fn a_key_is_missing_only_where_one_is_expected() {
        let unset = "CADRE_TEST_SURELY_UNSET_KEY_2";
        let cfg = |base: &str, headers: &[(&str, &str)]| ProviderConfig {
            base_url: Some(base.into()),
            api_key_env: Some(unset.into()),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        let missing = |cfg: ProviderConfig| {
            AnthropicProvider::from_config("anthropic", &cfg)
                .unwrap()
                .missing_key()
        };
        assert_eq!(
            missing(cfg(ANTHROPIC_DEFAULT_BASE, &[])),
            Some(unset.to_string())
        );
        assert_eq!(
            missing(cfg(ANTHROPIC_DEFAULT_BASE, &[("x-api-key", "k")])),
            None
        );
        // A proxy reached through base_url, with no key setting of its own, may need none.
        let proxy = ProviderConfig {
            base_url: Some("http://127.0.0.1:9/".into()),
            ..Default::default()
        };
        assert_eq!(missing(proxy), None);
    }

    #[test]
    fn endpoint_accepts_bases_with_or_without_v1() {
        for base in ["http://h:1", "http://h:1/", "http://h:1/v1"] {
            let cfg = ProviderConfig {
                base_url: Some(base.into()),
                ..Default::default()
            };
            let p = AnthropicProvider::from_config("anthropic", &cfg).unwrap();
            assert_eq!(p.endpoint(), "http://h:1/v1/messages");
        }
    }
}
