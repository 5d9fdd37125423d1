//! Context windows of models: how many tokens a request may hold. A built-in table covers
//! the common OpenAI and Anthropic models; `[models.context_windows]` entries
//! (`"provider:model" = TOKENS`) override it or add models it does not know.

use std::collections::HashMap;

/// Built-in windows by model-name prefix; the longest matching prefix wins, so `gpt-4o`
/// is not taken for `gpt-4`.
const BUILT_IN: &[(&str, u64)] = &[
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o1-mini", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude-", 200_000),
];

/// The window a scripted model counts as having: a replay has no real limit, so it is taken
/// as large (automatic compaction triggers only where a smaller window is configured) rather
/// than unknown, which would warn at every offline run.
const SCRIPTED: u64 = 1_000_000;

/// The context window of each model: configured entries first, then the built-in table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextWindows {
    configured: HashMap<String, u64>,
}

impl ContextWindows {
    /// The built-in table only.
    pub fn new() -> Self {
        Self::default()
    }

    /// The window of `spec` (`provider:model`) is `tokens`, whatever the table says.
    pub fn with(mut self, spec: impl Into<String>, tokens: u64) -> Self {
        self.configured.insert(spec.into(), tokens);
        self
    }

    /// The window of the model `spec` (`provider:model`), whose name at its provider is
    /// `model`; `None` when neither the configuration nor the table knows it.
    pub fn window(&self, spec: &str, model: &str) -> Option<u64> {
        if let Some(&t) = self.configured.get(spec) {
            return Some(t);
        }
        if spec.starts_with("scripted:") {
            return Some(SCRIPTED);
        }
        // A model routed through a gateway may carry a vendor prefix (`openai/gpt-4o`).
        let name = model.rsplit('/').next().unwrap_or(model);
        BUILT_IN
            .iter()
            .filter(|(prefix, _)| name.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|&(_, t)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins_and_configuration_overrides_the_table() {
        let w = ContextWindows::new().with("openai:gpt-4o", 5_000);
        assert_eq!(w.window("openai:gpt-4o", "gpt-4o"), Some(5_000));
        assert_eq!(w.window("azure:gpt-4o", "gpt-4o-mini"), Some(128_000));
        assert_eq!(w.window("openai:gpt-4", "gpt-4-0613"), Some(8_192));
        assert_eq!(
            w.window("anthropic:claude-sonnet-4-5", "claude-sonnet-4-5"),
            Some(200_000)
        );
        assert_eq!(
            w.window("openrouter:openai/gpt-4.1", "openai/gpt-4.1"),
            Some(1_047_576)
        );
        assert_eq!(w.window("ollama:qwen3:8b", "qwen3:8b"), None);
        // A replay is known (large), so an offline run does not warn; configuration wins.
        let demo = "scripted:examples/scripts/delegation.toml";
        assert_eq!(
            w.window(demo, "examples/scripts/delegation.toml"),
            Some(SCRIPTED)
        );
        let small = ContextWindows::new().with(demo, 900);
        assert_eq!(
            small.window(demo, "examples/scripts/delegation.toml"),
            Some(900)
        );
    }
}
