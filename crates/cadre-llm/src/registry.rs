//! Provider configuration and the registry that builds each provider once and routes
//! `provider:model` names to it, after checking (without any request) that the provider is
//! known and has what it needs: see [`ProviderRegistry::preflight`].

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
    /// Send images that tools return to the model. Default: on for Anthropic and for
    /// OpenAI's own API, off for other OpenAI-compatible servers (a text-only model there
    /// refuses image parts).
    pub images: Option<bool>,
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

/// Providers that work without a `[providers.NAME]` table.
pub const BUILTIN_PROVIDERS: [&str; 4] = ["openai", "anthropic", "ollama", "scripted"];

/// Why a model spec cannot be used here, found before any request is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// The part before the first `:` names no provider.
    #[error("unknown provider `{prefix}` in model `{spec}`; known providers: {}", .known.join(", "))]
    UnknownProvider {
        /// The spec as written.
        spec: String,
        /// Its prefix.
        prefix: String,
        /// The providers that exist here, sorted.
        known: Vec<String>,
    },
    /// The provider needs an API key and its variable is unset or empty.
    #[error("no API key for provider {provider}: set {env}")]
    MissingKey {
        /// The provider.
        provider: String,
        /// The variable to set.
        env: String,
    },
    /// The provider's table cannot be built (a bad URL, a header naming an unset variable).
    #[error("provider {provider} cannot be used: {reason}")]
    Unusable {
        /// The provider.
        provider: String,
        /// Why.
        reason: String,
    },
    /// An OpenAI-compatible provider other than `openai` and `ollama` without `base_url`.
    #[error(
        "provider {provider} needs a base_url (e.g. https://host/v1) in [providers.{provider}]"
    )]
    MissingBaseUrl {
        /// The provider.
        provider: String,
    },
}

/// The wire protocol of provider `name`: its table's `kind`, else from the name.
fn kind_of(name: &str, cfg: &ProviderConfig) -> ProviderKind {
    cfg.kind.unwrap_or(match name {
        "anthropic" => ProviderKind::Anthropic,
        "scripted" => ProviderKind::Scripted,
        _ => ProviderKind::Openai,
    })
}

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

    /// A registry whose default provider is the one `main_spec` names (`openai` when it has
    /// no known prefix): model names without a prefix go where the main model goes.
    pub fn for_model(
        configs: HashMap<String, ProviderConfig>,
        instances: &[&str],
        main_spec: &str,
    ) -> Self {
        let default = match main_spec.split_once(':') {
            Some((p, _))
                if BUILTIN_PROVIDERS.contains(&p)
                    || configs.contains_key(p)
                    || instances.contains(&p) =>
            {
                p.to_string()
            }
            _ => "openai".to_string(),
        };
        Self::new(configs, &default)
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

    /// Split `spec` into (provider, model) at the first `:`. Without a colon (`gpt-4o`,
    /// harness9's `openai/gpt-4o`) the whole spec goes to the default provider; with one, the
    /// prefix must name a provider here, so a misspelled `anthropc:claude-…` is an error
    /// rather than a request (with another provider's key) to the default provider.
    pub fn split<'a>(&'a self, spec: &'a str) -> Result<(&'a str, &'a str), NotReady> {
        match spec.split_once(':') {
            None => Ok((self.default_provider.as_str(), spec)),
            Some((prefix, model)) if self.is_known(prefix) => Ok((prefix, model)),
            Some((prefix, _)) => Err(NotReady::UnknownProvider {
                spec: spec.to_string(),
                prefix: prefix.to_string(),
                known: self.known(),
            }),
        }
    }

    fn is_built(&self, name: &str) -> bool {
        self.built
            .lock()
            .map(|b| b.contains_key(name))
            .unwrap_or(false)
    }

    fn is_known(&self, name: &str) -> bool {
        BUILTIN_PROVIDERS.contains(&name) || self.configs.contains_key(name) || self.is_built(name)
    }

    /// Every provider name that exists here, sorted.
    pub fn known(&self) -> Vec<String> {
        let mut names: Vec<String> = BUILTIN_PROVIDERS
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        names.extend(self.configs.keys().cloned());
        if let Ok(built) = self.built.lock() {
            names.extend(built.keys().filter(|k| !k.contains(':')).cloned());
        }
        names.sort();
        names.dedup();
        names
    }

    /// Is `spec` routable here, and does its provider have what it needs: a key where one is
    /// expected ([`Provider::missing_key`], the one rule for that), a base URL? Nothing is
    /// sent. Front ends call it at start-up, the runtime before a child's first request, and
    /// the agent loader to decide whether an alias such as `sonnet` can reach its provider or
    /// the agent inherits its parent's model. Scripted models need nothing.
    pub fn preflight(&self, spec: &str) -> Result<(), NotReady> {
        let (name, model) = self.split(spec)?;
        let cfg = self.configs.get(name).cloned().unwrap_or_default();
        match kind_of(name, &cfg) {
            ProviderKind::Scripted => return Ok(()),
            ProviderKind::Openai
                if !self.is_built(name) && openai::base_url(name, &cfg).is_none() =>
            {
                return Err(NotReady::MissingBaseUrl {
                    provider: name.to_string(),
                });
            }
            _ => {}
        }
        let provider = self.provider(name, model).map_err(|e| NotReady::Unusable {
            provider: name.to_string(),
            reason: e.to_string(),
        })?;
        match provider.missing_key() {
            Some(env) => Err(NotReady::MissingKey {
                provider: name.to_string(),
                env,
            }),
            None => Ok(()),
        }
    }

    /// Resolve a model spec to its (shared) provider and the model name to send. An unknown
    /// provider is an error; a missing key is not (the model can still be shown, and
    /// [`preflight`](Self::preflight) says what to set).
    pub fn resolve(&self, spec: &str) -> Result<ResolvedModel, ProviderError> {
        let (provider_name, model) = self.split(spec)?;
        let provider = self.provider(provider_name, model)?;
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

    /// The shared provider `name` (scripted: one per script file), built on first use.
    fn provider(&self, name: &str, model: &str) -> Result<Arc<dyn Provider>, ProviderError> {
        let key = if name == "scripted" {
            format!("scripted:{model}")
        } else {
            name.to_string()
        };
        let mut built = self
            .built
            .lock()
            .map_err(|_| ProviderError::Config("provider registry lock poisoned".into()))?;
        if let Some(p) = built.get(&key) {
            return Ok(p.clone());
        }
        let p = self.build(name, model)?;
        built.insert(key, p.clone());
        Ok(p)
    }

    fn build(&self, name: &str, model: &str) -> Result<Arc<dyn Provider>, ProviderError> {
        let cfg = self.configs.get(name).cloned().unwrap_or_default();
        if !BUILTIN_PROVIDERS.contains(&name) && !self.configs.contains_key(name) {
            return Err(ProviderError::Config(format!("unknown provider {name}")));
        }
        Ok(match kind_of(name, &cfg) {
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
    fn unknown_prefixes_are_errors_naming_the_known_providers() {
        let mut cfgs = HashMap::new();
        cfgs.insert("openrouter".to_string(), ProviderConfig::default());
        let reg = ProviderRegistry::new(cfgs, "openai");
        assert_eq!(reg.split("openai:gpt-4o"), Ok(("openai", "gpt-4o")));
        assert_eq!(reg.split("ollama:qwen3:8b"), Ok(("ollama", "qwen3:8b")));
        assert_eq!(reg.split("openrouter:x/y"), Ok(("openrouter", "x/y")));
        assert_eq!(reg.split("openai/gpt-4o"), Ok(("openai", "openai/gpt-4o")));
        assert_eq!(reg.split("gpt-4o"), Ok(("openai", "gpt-4o")));
        let err = reg.split("anthropc:claude-x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown provider `anthropc` in model `anthropc:claude-x`; known providers: anthropic, ollama, openai, openrouter, scripted"
        );
        assert!(matches!(
            reg.resolve("foo:bar"),
            Err(ProviderError::NotReady(NotReady::UnknownProvider { .. }))
        ));
    }

    #[test]
    fn preflight_needs_a_key_only_where_one_is_needed() {
        // Variables that exist in no environment stand for unset keys; PATH for a set one.
        let cfg = |base: Option<&str>, key: Option<&str>| ProviderConfig {
            base_url: base.map(str::to_string),
            api_key_env: key.map(str::to_string),
            ..Default::default()
        };
        let mut cfgs = HashMap::new();
        cfgs.insert("openai".into(), cfg(None, Some("CADRE_TEST_UNSET_KEY_1")));
        cfgs.insert(
            "anthropic".into(),
            cfg(None, Some("CADRE_TEST_UNSET_KEY_2")),
        );
        cfgs.insert("local".into(), cfg(Some("http://127.0.0.1:9/v1"), None));
        cfgs.insert(
            "vllm".into(),
            cfg(
                Some("http://127.0.0.1:9/v1"),
                Some("CADRE_TEST_UNSET_KEY_3"),
            ),
        );
        cfgs.insert(
            "keyed".into(),
            cfg(Some("http://127.0.0.1:9/v1"), Some("PATH")),
        );
        cfgs.insert("nourl".into(), cfg(None, None));
        cfgs.insert(
            "proxy".into(),
            ProviderConfig {
                kind: Some(ProviderKind::Anthropic),
                ..cfg(Some("http://127.0.0.1:9"), None)
            },
        );
        let reg = ProviderRegistry::new(cfgs, "openai");
        let missing = |p: &str, e: &str| {
            Err(NotReady::MissingKey {
                provider: p.into(),
                env: e.into(),
            })
        };
        assert_eq!(
            reg.preflight("openai:gpt-4o"),
            missing("openai", "CADRE_TEST_UNSET_KEY_1")
        );
        assert_eq!(
            reg.preflight("gpt-4o"),
            missing("openai", "CADRE_TEST_UNSET_KEY_1")
        );
        assert_eq!(
            reg.preflight("anthropic:c"),
            missing("anthropic", "CADRE_TEST_UNSET_KEY_2")
        );
        assert_eq!(
            reg.preflight("vllm:m"),
            missing("vllm", "CADRE_TEST_UNSET_KEY_3")
        );
        assert_eq!(reg.preflight("local:m"), Ok(()));
        assert_eq!(reg.preflight("keyed:m"), Ok(()));
        assert_eq!(reg.preflight("proxy:m"), Ok(()));
        assert_eq!(reg.preflight("ollama:qwen3:8b"), Ok(()));
        assert_eq!(reg.preflight("scripted:x.toml"), Ok(()));
        assert_eq!(
            reg.preflight("nourl:m"),
            Err(NotReady::MissingBaseUrl {
                provider: "nourl".into()
            })
        );
        // resolve still gives the model (to show it); the key is preflight's to check.
        assert!(reg.resolve("anthropic:c").is_ok());
    }

    #[test]
    fn the_default_provider_follows_the_main_model() {
        let reg = ProviderRegistry::for_model(HashMap::new(), &["rec"], "rec:m");
        assert_eq!(reg.default_provider(), "rec");
        let reg = ProviderRegistry::for_model(HashMap::new(), &[], "anthropic:c");
        assert_eq!(reg.default_provider(), "anthropic");
        let reg = ProviderRegistry::for_model(HashMap::new(), &[], "gpt-4o");
        assert_eq!(reg.default_provider(), "openai");
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
