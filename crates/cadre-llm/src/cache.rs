//! Prompt-cache settings of a provider table (`cache`, `cache_ttl`): whether requests ask the
//! provider to cache their prefix (Anthropic `cache_control` breakpoints, OpenAI
//! `prompt_cache_key`) and for how long Anthropic keeps it.

use serde::Deserialize;

/// `cache` of a provider table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// Anthropic: breakpoints. OpenAI-compatible: `prompt_cache_key` to OpenAI's own API
    /// only, since some compatible servers reject fields they do not know.
    #[default]
    Auto,
    /// As `auto`, and `prompt_cache_key` to any OpenAI-compatible server.
    On,
    /// Ask for nothing (prefix caching that a server does by itself still works).
    Off,
}

/// `cache_ttl` of a provider table: how long Anthropic keeps a cached prefix.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum CacheTtl {
    /// Five minutes, refreshed on every hit (writes cost 1.25× the input price).
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    /// One hour (writes cost 2× the input price).
    #[serde(rename = "1h")]
    OneHour,
}

impl CacheTtl {
    /// The `ttl` value Anthropic takes, when it is not the default.
    pub fn wire(self) -> Option<&'static str> {
        match self {
            CacheTtl::FiveMinutes => None,
            CacheTtl::OneHour => Some("1h"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct T {
        cache: CacheMode,
        cache_ttl: CacheTtl,
    }

    #[test]
    fn settings_parse_from_toml_words() {
        let t: T = toml::from_str("cache = \"off\"\ncache_ttl = \"1h\"").unwrap();
        assert_eq!((t.cache, t.cache_ttl), (CacheMode::Off, CacheTtl::OneHour));
        assert!(toml::from_str::<T>("cache = \"maybe\"\ncache_ttl = \"5m\"").is_err());
        assert!(toml::from_str::<T>("cache = \"on\"\ncache_ttl = \"2h\"").is_err());
    }
}
