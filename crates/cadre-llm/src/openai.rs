//! OpenAI-compatible Chat Completions provider (OpenAI, Ollama, vLLM, llama.cpp,
//! OpenRouter, ...): `POST {base}/chat/completions`, streamed over SSE or as one JSON body.
//!
//! Configuration, from the provider table and then the environment:
//! * base URL: `base_url`; else `OPENAI_BASE_URL` (provider `openai` only); else
//!   `https://api.openai.com/v1` for `openai` and `http://127.0.0.1:11434/v1` for `ollama`;
//!   other names must set `base_url`.
//! * API key: the variable named by `api_key_env`; else `OPENAI_API_KEY` for `openai`. Without
//!   a key no `Authorization` header is sent (local servers need none).
//! * prompt caching: the request's cache key goes out as `prompt_cache_key` to OpenAI's API
//!   (`cache = "auto"`, the default), to any server (`cache = "on"`) or nowhere (`"off"`).

mod full;
mod request;
mod stream;

use crate::http::{self, HttpCore, Wire};
use crate::retry::RetryPolicy;
use crate::{
    CacheMode, ModelRequest, ModelStream, Provider, ProviderConfig, ProviderError, StreamEvent,
};
use reqwest::header::{AUTHORIZATION, HeaderMap};
use std::sync::Arc;
use std::time::Duration;

/// Default base URL of the `openai` provider.
pub const OPENAI_DEFAULT_BASE: &str = "https://api.openai.com/v1";
/// The host of OpenAI's own API, which takes `prompt_cache_key`.
pub const OPENAI_API_HOST: &str = "api.openai.com";
/// Default base URL of the `ollama` provider.
pub const OLLAMA_DEFAULT_BASE: &str = "http://127.0.0.1:11434/v1";

/// The base URL of provider `name` (see the module documentation); `None` when a provider
/// other than `openai` and `ollama` sets none.
pub(crate) fn base_url(name: &str, cfg: &ProviderConfig) -> Option<String> {
    match (&cfg.base_url, name) {
        (Some(base), _) => Some(base.clone()),
        (None, "openai") => {
            Some(http::env_value("OPENAI_BASE_URL").unwrap_or_else(|| OPENAI_DEFAULT_BASE.into()))
        }
        (None, "ollama") => Some(OLLAMA_DEFAULT_BASE.into()),
        (None, _) => None,
    }
}

/// A provider speaking the OpenAI Chat Completions protocol.
pub struct OpenAiProvider {
    core: Arc<HttpCore>,
    wire: Arc<OpenAiWire>,
    /// Send `prompt_cache_key`.
    cache_key: bool,
    /// Send the images of tool results.
    images: bool,
    /// What to set when a key is expected and absent (see [`Provider::missing_key`]).
    missing_key: Option<String>,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("name", &self.core.name)
            .field("url", &self.core.url.as_str())
            .field("stream", &self.core.stream)
            .finish()
    }
}

impl OpenAiProvider {
    /// Build from a provider table (see the module documentation for defaults). Fails on
    /// a missing or bad base URL or a header that references an unset variable.
    pub fn from_config(name: &str, cfg: &ProviderConfig) -> Result<Self, ProviderError> {
        let base = base_url(name, cfg).ok_or_else(|| {
            ProviderError::Config(format!(
                "provider {name} needs a base_url (e.g. https://host/v1)"
            ))
        })?;
        let key_env = cfg
            .api_key_env
            .clone()
            .or_else(|| (name == "openai").then(|| "OPENAI_API_KEY".to_string()));
        let auth_hint = key_env
            .clone()
            .unwrap_or_else(|| format!("the api_key_env setting of [providers.{name}]"));
        let mut headers = HeaderMap::new();
        if let Some(key) = key_env.as_deref().and_then(http::env_value) {
            http::insert_header(
                &mut headers,
                name,
                AUTHORIZATION.as_str(),
                &format!("Bearer {key}"),
            )?;
        }
        let url = format!("{}/chat/completions", base.trim_end_matches('/'));
        let core = HttpCore::new(name, cfg, &url, headers, auth_hint)?;
        // A key is expected where one is named, and by OpenAI's own API; a local server
        // reached through `base_url` needs none.
        let expects_key = cfg.api_key_env.is_some() || core.url.host_str() == Some(OPENAI_API_HOST);
        let missing_key = (expects_key && !core.headers.contains_key(AUTHORIZATION))
            .then(|| core.auth_hint.clone());
        let wire = Arc::new(OpenAiWire {
            provider: name.to_string(),
            auth_hint: core.auth_hint.clone(),
        });
        // Unknown fields make some compatible servers refuse the request: by default the key
        // goes to OpenAI's own API only.
        let cache_key = match cfg.cache.unwrap_or_default() {
            CacheMode::On => true,
            CacheMode::Off => false,
            CacheMode::Auto => core.url.host_str() == Some(OPENAI_API_HOST),
        };
        // A text-only model behind a compatible server refuses image parts: by default
        // images go to OpenAI's own API only.
        let images = cfg
            .images
            .unwrap_or(core.url.host_str() == Some(OPENAI_API_HOST));
        Ok(Self {
            core: Arc::new(core),
            wire,
            cache_key,
            images,
            missing_key,
        })
    }

    /// Replace the retry policy (e.g. short backoff delays in tests). Other settings stay.
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> Self {
        Arc::make_mut(&mut self.core).retry = policy;
        self
    }

    /// The endpoint requests go to (`{base}/chat/completions`).
    pub fn endpoint(&self) -> &str {
        self.core.url.as_str()
    }

    /// The retry policy in force.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.core.retry
    }
}

impl Provider for OpenAiProvider {
    fn server_address(&self) -> Option<&str> {
        self.core.url.host_str()
    }

    fn name(&self) -> &str {
        &self.core.name
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = request::build_body(&request, self.core.stream, self.cache_key, self.images);
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

/// Decoding and error mapping for the OpenAI protocol.
pub(crate) struct OpenAiWire {
    pub(crate) provider: String,
    pub(crate) auth_hint: String,
}

impl Wire for OpenAiWire {
    fn decoder(&self) -> Box<dyn http::SseDecoder> {
        Box::new(stream::Decoder::new(&self.provider))
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
        map_error(
            &self.provider,
            &self.auth_hint,
            status,
            body,
            retry_after,
            model,
        )
    }
}

/// Map an OpenAI-style error reply to a [`ProviderError`].
fn map_error(
    provider: &str,
    auth_hint: &str,
    status: u16,
    body: &str,
    retry_after: Option<Duration>,
    model: &str,
) -> ProviderError {
    let (message, code) = http::error_message(status, body);
    let lower = message.to_lowercase();
    let code = code.unwrap_or_default();
    if status == 401 || status == 403 {
        return ProviderError::Auth {
            provider: provider.to_string(),
            hint: auth_hint.to_string(),
        };
    }
    if code == "context_length_exceeded"
        || lower.contains("context_length_exceeded")
        || lower.contains("maximum context length")
        || lower.contains("context length")
        || lower.contains("context window")
    {
        return ProviderError::ContextTooLong {
            provider: provider.to_string(),
            message,
        };
    }
    let model_missing = code == "model_not_found"
        || (lower.contains("model")
            && (lower.contains("does not exist") || lower.contains("not found")));
    if status == 404 || (model_missing && status < 500) {
        return ProviderError::UnknownModel {
            provider: provider.to_string(),
            model: model.to_string(),
            message,
        };
    }
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
        map_error("openai", "OPENAI_API_KEY", status, body, None, "gpt-x")
    }

    #[test]
    fn errors_are_classified() {
        let e = map(401, r#"{"error":{"message":"Incorrect API key"}}"#);
        assert_eq!(
            e.to_string(),
            "authentication failed for openai: check OPENAI_API_KEY"
        );
        assert!(matches!(
            map(
                404,
                r#"{"error":{"message":"The model `gpt-x` does not exist"}}"#
            ),
            ProviderError::UnknownModel { .. }
        ));
        assert!(matches!(
            map(
                400,
                r#"{"error":"model \"gpt-x\" not found, try pulling it first"}"#
            ),
            ProviderError::UnknownModel { .. }
        ));
        let e = map(
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#,
        );
        assert!(matches!(e, ProviderError::ContextTooLong { .. }), "{e}");
        let e = map(503, r#"{"error":{"message":"busy"}}"#);
        assert_eq!(e.to_string(), "openai returned HTTP 503: busy");
        assert!(e.is_retryable());
    }

    #[test]
    fn a_key_is_missing_only_where_one_is_expected() {
        let unset = "CADRE_TEST_SURELY_UNSET_KEY_1";
        let cfg = |base: &str, key_env: Option<&str>| ProviderConfig {
            base_url: Some(base.into()),
            api_key_env: key_env.map(str::to_string),
            ..Default::default()
        };
        let missing = |name: &str, cfg: ProviderConfig| {
            OpenAiProvider::from_config(name, &cfg)
                .unwrap()
                .missing_key()
        };
        // A local server without a key setting needs none.
        assert_eq!(missing("vllm", cfg("http://127.0.0.1:8000/v1", None)), None);
        // A named variable that is not set is missing, wherever the server is.
        assert_eq!(
            missing("vllm", cfg("http://127.0.0.1:8000/v1", Some(unset))),
            Some(unset.to_string())
        );
        // OpenAI's own API always needs one.
        assert_eq!(
            missing("mine", cfg(OPENAI_DEFAULT_BASE, None)),
            Some("the api_key_env setting of [providers.mine]".to_string())
        );
        // A configured Authorization header is a key.
        let with_header = ProviderConfig {
            headers: [("Authorization".to_string(), "Bearer k".to_string())]
                .into_iter()
                .collect(),
            ..cfg(OPENAI_DEFAULT_BASE, Some(unset))
        };
        assert_eq!(missing("mine", with_header), None);
    }

    #[test]
    fn base_urls_and_keys_follow_the_name() {
        let p = OpenAiProvider::from_config("ollama", &ProviderConfig::default()).unwrap();
        assert_eq!(p.endpoint(), "http://127.0.0.1:11434/v1/chat/completions");
        let cfg = ProviderConfig {
            base_url: Some("http://localhost:8000/v1/".into()),
            ..Default::default()
        };
        let p = OpenAiProvider::from_config("vllm", &cfg).unwrap();
        assert_eq!(p.endpoint(), "http://localhost:8000/v1/chat/completions");
        assert!(!p.core.headers.contains_key(AUTHORIZATION));
        assert!(!p.cache_key, "auto: no prompt_cache_key to other servers");
        let on = ProviderConfig {
            cache: Some(CacheMode::On),
            ..cfg
        };
        assert!(OpenAiProvider::from_config("vllm", &on).unwrap().cache_key);
        let official = ProviderConfig {
            base_url: Some(OPENAI_DEFAULT_BASE.into()),
            ..Default::default()
        };
        assert!(
            OpenAiProvider::from_config("openai", &official)
                .unwrap()
                .cache_key
        );
        let off = ProviderConfig {
            cache: Some(CacheMode::Off),
            ..official
        };
        assert!(
            !OpenAiProvider::from_config("openai", &off)
                .unwrap()
                .cache_key
        );
        let err = OpenAiProvider::from_config("custom", &ProviderConfig::default()).unwrap_err();
        assert!(err.to_string().contains("base_url"), "{err}");
        let cfg = ProviderConfig {
            base_url: Some("http://x/v1".into()),
            headers: [(
                "X-Title".to_string(),
                "${CADRE_SURELY_UNSET_VAR_1}".to_string(),
            )]
            .into_iter()
            .collect(),
            ..Default::default()
        };
        let err = OpenAiProvider::from_config("custom", &cfg).unwrap_err();
        assert!(
            err.to_string().contains("CADRE_SURELY_UNSET_VAR_1"),
            "{err}"
        );
    }
}
