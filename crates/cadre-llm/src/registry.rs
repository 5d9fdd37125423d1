//! Provider configuration and the registry that builds each provider once and routes
//! `provider:model` names to it.

use crate::{ModelPrice, PriceTable, Provider, ProviderError, anthropic, openai, scripted};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions (OpenAI, Ollama, vLLM, llama.cpp, OpenRouter, ...).
    Openai,
    /// Anthropic Messages API.
    Anthropic,
    /// A scripted model read from a file.
    Scripted,
}

/// One `[providers.NAME]` table of the configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Wire protocol; defaults from the name (`anthropic` → anthropic, else openai).
    pub kind: Option<ProviderKind>,
    /// Base URL, e.g. `https://openrouter.ai/api/v1`.
    pub base_url: Option<String>,
    /// Name of the environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// Extra HTTP headers; values may reference environment variables as `${VAR}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Stream replies over SSE (default true).
    pub stream: Option<bool>,
    /// Attempts per request including the first (default 4).
    pub max_attempts: Option<u32>,
    /// Seconds without stream data before the call fails (default 60).
    pub idle_timeout_secs: Option<u64>,
    /// Longest `Retry-After` honoured, in seconds (default 60).
    pub max_retry_after_secs: Option<u64>,
    /// Requests to this provider in flight at once, from all agents of the process
    /// (default: no cap). Useful for a local server that serves a few requests at a time.
    pub max_concurrent_requests: Option<usize>,
    /// Script file, for `kind = "scripted"`.
    pub path: Option<PathBuf>,
    /// Prompt caching: `auto` (default), `on` or `off` (see [`crate::CacheMode`]).
    pub cache: Option<crate::CacheMode>,
    /// How long Anthropic keeps a cached prefix: `5m` (default) or `1h`.
    pub cache_ttl: Option<crate::CacheTtl>,
}

/// A model name resolved to its provider.
#[derive(Clone)]
pub struct ResolvedModel {
    /// The provider to call.
    pub provider: Arc<dyn Provider>,
    /// The model name to send to it.
    pub model: String,
    /// The full spec as written (`openai:gpt-4o-mini`).
    pub spec: String,
    /// Its price, with cache writes at the provider's `cache_ttl` rate; `None`: unknown.
    pub price: Option<ModelPrice>,
}

impl std::fmt::Debug for ResolvedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedModel")
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .finish()
    }
}

const BUILTIN: [&str; 4] = ["openai", "anthropic", "ollama", "scripted"];

/// Builds providers on first use and shares them; looks models up by name.
pub struct ProviderRegistry {
    configs: HashMap<String, ProviderConfig>,
    built: Mutex<HashMap<String, Arc<dyn Provider>>>,
    default_provider: String,
    prices: PriceTable,
}

impl std::fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderRegistry")
            .field("providers", &self.configs.keys().collect::<Vec<_>>())
            .field("default_provider", &self.default_provider)
            .finish()
    }
}

impl ProviderRegistry {
    /// A registry over the configured provider tables. `default_provider` receives
    /// model names without a known `provider:` prefix.
    pub fn new(configs: HashMap<String, ProviderConfig>, default_provider: &str) -> Self {
        Self {
            configs,
            built: Mutex::new(HashMap::new()),
            default_provider: default_provider.to_string(),
            prices: PriceTable::built_in(),
        }
    }

    /// Price models from `prices` instead of the built-in table.
    pub fn with_prices(mut self, prices: PriceTable) -> Self {
        self.prices = prices;
        self
    }

    /// Register an already-built provider under `name` (library use, tests).
    pub fn insert(&self, name: &str, provider: Arc<dyn Provider>) {
        if let Ok(mut built) = self.built.lock() {
            built.insert(name.to_string(), provider);
        }
    }

    /// The provider that receives model names without a prefix.
    pub fn default_provider(&self) -> &str {
        &self.default_provider
    }

    /// Split `spec` into (provider, model). A prefix counts only when it names a known
    /// provider, so `openai/gpt-4o` or `gpt-4o` go unchanged to the default provider.
    pub fn split<'a>(&'a self, spec: &'a str) -> (&'a str, &'a str) {
        if let Some((prefix, model)) = spec.split_once(':')
            && self.is_known(prefix)
        {
            return (prefix, model);
        }
        (self.default_provider.as_str(), spec)
    }

    fn is_known(&self, name: &str) -> bool {
        BUILTIN.contains(&name)
            || self.configs.contains_key(name)
            || self
                .built
                .lock()
                .map(|b| b.contains_key(name))
                .unwrap_or(false)
    }

    /// Resolve a model spec to its (shared) provider and the model name to send.
    pub fn resolve(&self, spec: &str) -> Result<ResolvedModel, ProviderError> {
        let (provider_name, model) = self.split(spec);
        let key = if provider_name == "scripted" {
            format!("scripted:{model}")
        } else {
            provider_name.to_string()
        };
        let mut built = self
            .built
            .lock()
            .map_err(|_| ProviderError::Config("provider registry lock poisoned".into()))?;
        let provider = match built.get(&key) {
            Some(p) => p.clone(),
            None => {
                let p = self.build(provider_name, model)?;
                built.insert(key, p.clone());
                p
            }
        };
        let ttl = self
            .configs
            .get(provider_name)
            .and_then(|c| c.cache_ttl)
            .unwrap_or_default();
        Ok(ResolvedModel {
            provider,
            model: model.to_string(),
            spec: spec.to_string(),
            price: self
                .prices
                .lookup(provider_name, model)
                .map(|p| p.for_ttl(ttl)),
        })
    }

    fn build(&self, name: &str, model: &str) -> Result<Arc<dyn Provider>, ProviderError> {
        let cfg = self.configs.get(name).cloned().unwrap_or_default();
        let kind = cfg.kind.unwrap_or(match name {
            "anthropic" => ProviderKind::Anthropic,
            "scripted" => ProviderKind::Scripted,
            _ => ProviderKind::Openai,
        });
        if !BUILTIN.contains(&name) && !self.configs.contains_key(name) {
            return Err(ProviderError::Config(format!("unknown provider {name}")));
        }
        Ok(match kind {
            ProviderKind::Openai => Arc::new(openai::OpenAiProvider::from_config(name, &cfg)?),
            ProviderKind::Anthropic => {
                Arc::new(anthropic::AnthropicProvider::from_config(name, &cfg)?)
            }
            ProviderKind::Scripted => {
                let path = cfg.path.unwrap_or_else(|| PathBuf::from(model));
                Arc::new(scripted::ScriptedProvider::from_file(&path)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_only_honours_known_prefixes() {
        let mut cfgs = HashMap::new();
        cfgs.insert("openrouter".to_string(), ProviderConfig::default());
        let reg = ProviderRegistry::new(cfgs, "openai");
        assert_eq!(reg.split("openai:gpt-4o"), ("openai", "gpt-4o"));
        assert_eq!(reg.split("ollama:qwen3:8b"), ("ollama", "qwen3:8b"));
        assert_eq!(reg.split("openrouter:x/y"), ("openrouter", "x/y"));
        assert_eq!(reg.split("openai/gpt-4o"), ("openai", "openai/gpt-4o"));
        assert_eq!(reg.split("weird:thing"), ("openai", "weird:thing"));
    }

    #[test]
    fn resolved_models_carry_their_price() {
        let mut cfgs = HashMap::new();
        cfgs.insert(
            "anthropic".to_string(),
            ProviderConfig {
                cache_ttl: Some(crate::CacheTtl::OneHour),
                ..Default::default()
            },
        );
        let reg = ProviderRegistry::new(cfgs, "openai");
        let m = reg.resolve("anthropic:claude-sonnet-4-5-20250929").unwrap();
        let price = m.price.unwrap();
        assert_eq!(
            (price.input, price.cache_write),
            (3.0, Some(6.0)),
            "1h writes"
        );
        assert!(reg.resolve("openai:gpt-4o-mini").unwrap().price.is_some());
        assert!(reg.resolve("ollama:qwen3:8b").unwrap().price.is_none());
        let reg = ProviderRegistry::new(HashMap::new(), "openai").with_prices(PriceTable::empty());
        assert!(reg.resolve("openai:gpt-4o-mini").unwrap().price.is_none());
    }

    #[test]
    fn unknown_scripted_file_is_a_clear_error() {
        let reg = ProviderRegistry::new(HashMap::new(), "openai");
        let err = reg.resolve("scripted:/no/such/file.toml").unwrap_err();
        assert!(err.to_string().contains("/no/such/file.toml"), "{err}");
    }
}
