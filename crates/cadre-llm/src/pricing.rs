//! Model prices in dollars per million tokens and the cost of a model call. Built-in
//! entries cover the common OpenAI and Anthropic models (standard rates: no batch discount,
//! no long-context surcharge); `[models.prices."provider:model"]` in the configuration adds
//! models and overrides entries. A model without a price has no cost — shown as "cost
//! unknown", never as 0.

use crate::CacheTtl;
use cadre_types::Usage;
use serde::Deserialize;
use std::collections::BTreeMap;

/// What a model costs, in dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Input tokens that are neither read from nor written to the cache.
    pub input: f64,
    /// Input tokens read from the cache (default: `input`).
    pub cached_input: Option<f64>,
    /// Input tokens written to the cache with the 5-minute lifetime (default: `input`).
    pub cache_write: Option<f64>,
    /// Input tokens written to the cache with the 1-hour lifetime (default: `cache_write`).
    pub cache_write_1h: Option<f64>,
    /// Output tokens.
    pub output: f64,
}

impl ModelPrice {
    /// A price with the same cache-read and cache-write rates as `input` (a provider that
    /// reports no cache) until set otherwise.
    pub const fn new(input: f64, output: f64) -> Self {
        Self {
            input,
            cached_input: None,
            cache_write: None,
            cache_write_1h: None,
            output,
        }
    }

    /// OpenAI's shape: cached input at its own rate, cache writes free (at the input rate).
    const fn openai(input: f64, cached: f64, output: f64) -> Self {
        Self {
            cached_input: Some(cached),
            ..Self::new(input, output)
        }
    }

    /// Anthropic's shape: reads at 0.1×, 5-minute writes at 1.25×, 1-hour writes at 2×
    /// the input rate.
    const fn anthropic(input: f64, output: f64) -> Self {
        Self {
            cached_input: Some(input * 0.1),
            cache_write: Some(input * 1.25),
            cache_write_1h: Some(input * 2.0),
            ..Self::new(input, output)
        }
    }

    /// The price of cache writes for a provider whose cache lives `ttl`.
    pub fn write_rate(&self, ttl: CacheTtl) -> f64 {
        let five_minutes = self.cache_write.unwrap_or(self.input);
        match ttl {
            CacheTtl::FiveMinutes => five_minutes,
            CacheTtl::OneHour => self.cache_write_1h.unwrap_or(five_minutes),
        }
    }

    /// This price with cache writes charged at the `ttl` rate.
    pub fn for_ttl(mut self, ttl: CacheTtl) -> Self {
        self.cache_write = Some(self.write_rate(ttl));
        self
    }

    /// Dollars of a call that used `usage`.
    pub fn cost_usd(&self, usage: &Usage) -> f64 {
        let per_token = |rate: f64| rate / 1e6;
        usage.uncached_input_tokens() as f64 * per_token(self.input)
            + usage.cached_input_tokens as f64 * per_token(self.cached_input.unwrap_or(self.input))
            + usage.cache_write_tokens as f64 * per_token(self.write_rate(CacheTtl::FiveMinutes))
            + usage.output_tokens as f64 * per_token(self.output)
    }
}

/// Built-in prices, `provider:model` → price (checked against the providers' price pages;
/// override in the configuration when they change).
const BUILT_IN: &[(&str, ModelPrice)] = &[
    ("openai:gpt-5", ModelPrice::openai(1.25, 0.125, 10.0)),
    ("openai:gpt-5-mini", ModelPrice::openai(0.25, 0.025, 2.0)),
    ("openai:gpt-5-nano", ModelPrice::openai(0.05, 0.005, 0.40)),
    ("openai:gpt-4.1", ModelPrice::openai(2.0, 0.50, 8.0)),
    ("openai:gpt-4.1-mini", ModelPrice::openai(0.40, 0.10, 1.60)),
    ("openai:gpt-4.1-nano", ModelPrice::openai(0.10, 0.025, 0.40)),
    ("openai:gpt-4o", ModelPrice::openai(2.50, 1.25, 10.0)),
    ("openai:gpt-4o-mini", ModelPrice::openai(0.15, 0.075, 0.60)),
    ("openai:o1", ModelPrice::openai(15.0, 7.50, 60.0)),
    ("openai:o3", ModelPrice::openai(2.0, 0.50, 8.0)),
    ("openai:o3-mini", ModelPrice::openai(1.10, 0.55, 4.40)),
    ("openai:o4-mini", ModelPrice::openai(1.10, 0.275, 4.40)),
    (
        "anthropic:claude-opus-4-5",
        ModelPrice::anthropic(5.0, 25.0),
    ),
    (
        "anthropic:claude-opus-4-1",
        ModelPrice::anthropic(15.0, 75.0),
    ),
    ("anthropic:claude-opus-4", ModelPrice::anthropic(15.0, 75.0)),
    (
        "anthropic:claude-opus-4-0",
        ModelPrice::anthropic(15.0, 75.0),
    ),
    (
        "anthropic:claude-sonnet-4-5",
        ModelPrice::anthropic(3.0, 15.0),
    ),
    (
        "anthropic:claude-sonnet-4",
        ModelPrice::anthropic(3.0, 15.0),
    ),
    (
        "anthropic:claude-sonnet-4-0",
        ModelPrice::anthropic(3.0, 15.0),
    ),
    (
        "anthropic:claude-3-7-sonnet",
        ModelPrice::anthropic(3.0, 15.0),
    ),
    (
        "anthropic:claude-haiku-4-5",
        ModelPrice::anthropic(1.0, 5.0),
    ),
    (
        "anthropic:claude-3-5-haiku",
        ModelPrice::anthropic(0.80, 4.0),
    ),
    (
        "anthropic:claude-3-haiku",
        ModelPrice::anthropic(0.25, 1.25),
    ),
];

/// A model's name may carry a version after the priced name: a date (`-20250929`,
/// `-2024-08-06`) or `-latest`.
fn is_version_suffix(rest: &str) -> bool {
    let Some(v) = rest.strip_prefix('-') else {
        return rest.is_empty();
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if v == "latest" || digits(v, 8) {
        return true;
    }
    let parts: Vec<&str> = v.split('-').collect();
    matches!(parts.as_slice(), [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2))
}

/// Prices by `provider:model`.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    entries: BTreeMap<String, ModelPrice>,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self::built_in()
    }
}

/// Why a price was not added to a [`PriceTable`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    /// The key is not `provider:model`.
    #[error("price key {0:?} must be provider:model, e.g. \"anthropic:claude-sonnet-4-5\"")]
    BadKey(String),
    /// A rate is negative or not a number.
    #[error("price of {0}: rates must be 0 or more")]
    BadRate(String),
}

impl PriceTable {
    /// The built-in prices.
    pub fn built_in() -> Self {
        Self {
            entries: BUILT_IN.iter().map(|(k, p)| (k.to_string(), *p)).collect(),
        }
    }

    /// A table with no prices at all.
    pub fn empty() -> Self {
        Self {
            entries: BTreeMap::new(),
        }
    }

    /// Add or replace the price of `key` (`provider:model`); a key without a provider is
    /// refused, since the same model name costs differently through different providers.
    pub fn set(&mut self, key: &str, price: ModelPrice) -> Result<(), PriceError> {
        match key.split_once(':') {
            Some((p, m)) if !p.is_empty() && !m.is_empty() => {
                let bad = |v: f64| !v.is_finite() || v < 0.0;
                let rates = [
                    Some(price.input),
                    price.cached_input,
                    price.cache_write,
                    price.cache_write_1h,
                    Some(price.output),
                ];
                if rates.into_iter().flatten().any(bad) {
                    return Err(PriceError::BadRate(key.to_string()));
                }
                self.entries.insert(key.to_string(), price);
                Ok(())
            }
            _ => Err(PriceError::BadKey(key.to_string())),
        }
    }

    /// The price of `model` at `provider`: the entry of that exact name, else the longest
    /// entry the name extends by a version (`claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`).
    pub fn lookup(&self, provider: &str, model: &str) -> Option<ModelPrice> {
        let exact = format!("{provider}:{model}");
        if let Some(p) = self.entries.get(&exact) {
            return Some(*p);
        }
        let prefix = format!("{provider}:");
        self.entries
            .iter()
            .filter_map(|(k, p)| {
                let name = k.strip_prefix(&prefix)?;
                let rest = model.strip_prefix(name)?;
                is_version_suffix(rest).then_some((name.len(), *p))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, p)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cached: u64, written: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
            cache_write_tokens: written,
            ..Usage::default()
        }
    }

    #[test]
    fn known_costs() {
        let table = PriceTable::built_in();
        // Sonnet 4.5: 100k input of which 80k read and 10k written, 2k output.
        let sonnet = table.lookup("anthropic", "claude-sonnet-4-5").unwrap();
        let cost = sonnet.cost_usd(&usage(100_000, 80_000, 10_000, 2_000));
        // 10k × $3 + 80k × $0.30 + 10k × $3.75 + 2k × $15, per million.
        let want = 0.03 + 0.024 + 0.0375 + 0.03;
        assert!((cost - want).abs() < 1e-12, "{cost}");
        // The same call with the 1-hour lifetime writes at $6.
        let hour = sonnet
            .for_ttl(CacheTtl::OneHour)
            .cost_usd(&usage(100_000, 80_000, 10_000, 2_000));
        assert!((hour - (want + 0.0225)).abs() < 1e-12, "{hour}");
        // gpt-4o-mini: 1M input of which half cached, 1M output.
        let mini = table.lookup("openai", "gpt-4o-mini").unwrap();
        let cost = mini.cost_usd(&usage(1_000_000, 500_000, 0, 1_000_000));
        assert!((cost - (0.075 + 0.0375 + 0.60)).abs() < 1e-12, "{cost}");
    }

    #[test]
    fn versions_match_their_model_and_nothing_else() {
        let table = PriceTable::built_in();
        let p = |provider: &str, model: &str| table.lookup(provider, model).map(|p| p.input);
        assert_eq!(p("anthropic", "claude-sonnet-4-5-20250929"), Some(3.0));
        assert_eq!(p("anthropic", "claude-opus-4-20250514"), Some(15.0));
        assert_eq!(p("anthropic", "claude-opus-4-5"), Some(5.0));
        assert_eq!(p("anthropic", "claude-3-7-sonnet-latest"), Some(3.0));
        assert_eq!(p("openai", "gpt-4o-2024-08-06"), Some(2.50));
        assert_eq!(p("openai", "gpt-4o-mini-2024-07-18"), Some(0.15));
        // Not a version: another model.
        assert_eq!(p("openai", "gpt-4o-audio-preview"), None);
        assert_eq!(p("openai", "o1-pro"), None);
        // The same name through another provider is not priced.
        assert_eq!(p("openrouter", "gpt-4o"), None);
        assert_eq!(p("ollama", "qwen3:8b"), None);
    }

    #[test]
    fn the_configuration_adds_and_overrides_prices() {
        let mut table = PriceTable::built_in();
        table
            .set("ollama:qwen3:8b", ModelPrice::new(0.0, 0.0))
            .unwrap();
        table
            .set("openai:gpt-4o", ModelPrice::new(1.0, 2.0))
            .unwrap();
        assert_eq!(
            table.lookup("ollama", "qwen3:8b"),
            Some(ModelPrice::new(0.0, 0.0))
        );
        let p = table.lookup("openai", "gpt-4o").unwrap();
        assert_eq!(
            p.cost_usd(&usage(1_000_000, 1_000_000, 0, 0)),
            1.0,
            "cached at input"
        );
        assert!(table.set("gpt-4o", ModelPrice::new(1.0, 1.0)).is_err());
        assert!(table.set("a:b", ModelPrice::new(-1.0, 1.0)).is_err());
        assert!(table.set("a:b", ModelPrice::new(f64::NAN, 1.0)).is_err());
    }
}
