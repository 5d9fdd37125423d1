//! The `model` value of a definition file: `inherit`, an alias (`[models.aliases]`, then the
//! built-in Claude Code names `sonnet`, `opus`, `haiku`), a vendor's bare model id (`claude-…`,
//! `gemini-…`, a Codex role's `gpt-…`), OpenCode's `provider/model`, or cadre's own
//! `provider:model`.
//!
//! Everything but an explicit `provider:model` is cadre's guess at a provider. A guess whose
//! provider cannot be used here (no key, no such provider: [`ProviderRegistry::preflight`])
//! makes the agent inherit its parent's model, with a warning, so a child never sends a name
//! to a provider it does not belong to.

use cadre_llm::{NotReady, ProviderRegistry};
use std::collections::HashMap;

/// Claude Code's model aliases and the Anthropic models they mean here. `[models.aliases]`
/// entries of the same name replace them.
pub const BUILTIN_ALIASES: &[(&str, &str)] = &[
    ("sonnet", "anthropic:claude-sonnet-4-5"),
    ("opus", "anthropic:claude-opus-4-5"),
    ("haiku", "anthropic:claude-haiku-4-5"),
];

/// How the warning of an agent that falls back to its parent's model ends, so front ends
/// can show these at start-up (they change which model runs).
pub const FALLBACK_NOTE: &str = "the agent inherits its parent's model";

/// Which harness wrote the file: decides how bare and slashed model names are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelDialect {
    /// cadre, Claude Code, harness9, the Java harness: `provider:model`; a slash is part of
    /// the model name (`openai/gpt-4o` goes to the default provider).
    Cadre,
    /// OpenCode: `provider/model`.
    OpenCode,
    /// Codex: bare names are OpenAI models.
    Codex,
}

/// What a `model` value resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    /// The spec to run with; `None` inherits the parent's model.
    pub spec: Option<String>,
    /// A warning to show with the definition (at most one).
    pub warning: Option<String>,
}

fn alias<'a>(raw: &str, aliases: &'a HashMap<String, String>) -> Option<&'a str> {
    aliases
        .get(raw)
        .or_else(|| {
            aliases
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(raw))
                .map(|(_, v)| v)
        })
        .map(String::as_str)
        .or_else(|| {
            BUILTIN_ALIASES
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(raw))
                .map(|(_, v)| *v)
        })
}

/// The main agent's model as a user names it (`--model`, `CADRE_MODEL`, `/model`): an alias
/// (`[models.aliases]` first, then `sonnet`, `opus`, `haiku`) becomes the spec it stands for,
/// as in definition files; anything else is kept as written.
pub fn main_model_spec(raw: &str, aliases: &HashMap<String, String>) -> String {
    let raw = raw.trim();
    match alias(raw, aliases) {
        Some(spec) if !raw.contains(':') => spec.to_string(),
        _ => raw.to_string(),
    }
}

/// The provider cadre guesses for a bare or slashed name, if any.
fn implied(raw: &str, dialect: ModelDialect) -> Option<String> {
    if raw.contains(':') {
        return None;
    }
    if let (ModelDialect::OpenCode, Some((provider, model))) = (dialect, raw.split_once('/')) {
        return Some(format!("{provider}:{model}"));
    }
    if raw.contains('/') {
        return None;
    }
    let lower = raw.to_ascii_lowercase();
    if lower.starts_with("claude-") {
        Some(format!("anthropic:{raw}"))
    } else if lower.starts_with("gemini-") {
        Some(format!("gemini:{raw}"))
    } else if dialect == ModelDialect::Codex {
        Some(format!("openai:{raw}"))
    } else {
        None
    }
}

/// Resolve a `model` value. `providers`, when given, decides whether a guessed provider can
/// be used here (without it, guesses are taken as they are).
pub fn resolve_model(
    raw: &str,
    aliases: &HashMap<String, String>,
    dialect: ModelDialect,
    providers: Option<&ProviderRegistry>,
) -> ModelChoice {
    let raw = raw.trim();
    if raw.is_empty() || raw.eq_ignore_ascii_case("inherit") {
        return ModelChoice {
            spec: None,
            warning: None,
        };
    }
    let guess = alias(raw, aliases)
        .map(str::to_string)
        .or_else(|| implied(raw, dialect));
    let Some(spec) = guess else {
        // Written out in full: kept. A missing key is reported when the agent starts; a
        // provider that does not exist at all is worth saying now.
        let warning = match providers.map(|p| p.preflight(raw)) {
            Some(Err(e @ (NotReady::UnknownProvider { .. } | NotReady::MissingBaseUrl { .. }))) => {
                Some(format!("model `{raw}` cannot be used here: {e}"))
            }
            _ if !raw.contains(':') && !raw.contains('/') => Some(format!(
                "model `{raw}` is not a known alias (see [models.aliases]); it is sent as written to the default provider"
            )),
            _ => None,
        };
        return ModelChoice {
            spec: Some(raw.to_string()),
            warning,
        };
    };
    match providers.map(|p| p.preflight(&spec)) {
        Some(Err(e)) => ModelChoice {
            spec: None,
            warning: Some(format!(
                "model `{raw}` means `{spec}`, which cannot be used here ({e}); {FALLBACK_NOTE}"
            )),
        },
        _ => ModelChoice {
            spec: Some(spec),
            warning: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_llm::ProviderConfig;

    fn resolve(raw: &str, dialect: ModelDialect, reg: Option<&ProviderRegistry>) -> ModelChoice {
        let mut aliases = HashMap::new();
        aliases.insert("fast".to_string(), "openai:gpt-4o-mini".to_string());
        aliases.insert("opus".to_string(), "local:big".to_string());
        resolve_model(raw, &aliases, dialect, reg)
    }

    #[test]
    fn the_main_model_takes_the_aliases_of_definition_files() {
        let mut aliases = HashMap::new();
        aliases.insert("fast".to_string(), "openai:gpt-4o-mini".to_string());
        aliases.insert("opus".to_string(), "local:big".to_string());
        assert_eq!(
            main_model_spec("sonnet", &aliases),
            "anthropic:claude-sonnet-4-5"
        );
        assert_eq!(
            main_model_spec(" Haiku ", &aliases),
            "anthropic:claude-haiku-4-5"
        );
        // Configured aliases come first and may replace a built-in one.
        assert_eq!(main_model_spec("fast", &aliases), "openai:gpt-4o-mini");
        assert_eq!(main_model_spec("opus", &aliases), "local:big");
        // A spec or an unknown name is kept as written.
        assert_eq!(main_model_spec("openai:sonnet", &aliases), "openai:sonnet");
        assert_eq!(main_model_spec("gpt-4o", &aliases), "gpt-4o");
    }

    #[test]
    fn aliases_ids_and_specs_without_a_provider_check() {
        let spec = |raw: &str, d: ModelDialect| resolve(raw, d, None).spec;
        let c = ModelDialect::Cadre;
        assert_eq!(spec("inherit", c), None);
        assert_eq!(spec(" Inherit ", c), None);
        assert_eq!(spec("", c), None);
        assert_eq!(
            spec("sonnet", c).as_deref(),
            Some("anthropic:claude-sonnet-4-5")
        );
        assert_eq!(
            spec("HAIKU", c).as_deref(),
            Some("anthropic:claude-haiku-4-5")
        );
        assert_eq!(spec("opus", c).as_deref(), Some("local:big"), "config wins");
        assert_eq!(spec("Fast", c).as_deref(), Some("openai:gpt-4o-mini"));
        assert_eq!(
            spec("claude-sonnet-4-20250514", c).as_deref(),
            Some("anthropic:claude-sonnet-4-20250514")
        );
        assert_eq!(
            spec("gemini-2.5-pro", c).as_deref(),
            Some("gemini:gemini-2.5-pro")
        );
        assert_eq!(spec("openai/gpt-4o", c).as_deref(), Some("openai/gpt-4o"));
        assert_eq!(
            spec("anthropic/claude-sonnet-4", ModelDialect::OpenCode).as_deref(),
            Some("anthropic:claude-sonnet-4")
        );
        assert_eq!(
            spec("gpt-5", ModelDialect::Codex).as_deref(),
            Some("openai:gpt-5")
        );
        assert_eq!(
            spec("ollama:qwen3:8b", c).as_deref(),
            Some("ollama:qwen3:8b")
        );
        let odd = resolve("gpt-5", c, None);
        assert_eq!(odd.spec.as_deref(), Some("gpt-5"));
        assert!(odd.warning.unwrap().contains("not a known alias"));
    }

    #[test]
    fn a_guess_whose_provider_cannot_be_used_inherits() {
        let mut cfgs = HashMap::new();
        cfgs.insert(
            "anthropic".to_string(),
            ProviderConfig {
                api_key_env: Some("CADRE_TEST_UNSET_ANTHROPIC_KEY".into()),
                ..Default::default()
            },
        );
        cfgs.insert(
            "local".to_string(),
            ProviderConfig {
                base_url: Some("http://127.0.0.1:9/v1".into()),
                ..Default::default()
            },
        );
        let reg = ProviderRegistry::new(cfgs, "local");
        let c = resolve("sonnet", ModelDialect::Cadre, Some(&reg));
        assert_eq!(c.spec, None);
        let w = c.warning.unwrap();
        assert!(w.contains("`anthropic:claude-sonnet-4-5`"), "{w}");
        assert!(w.contains("CADRE_TEST_UNSET_ANTHROPIC_KEY"), "{w}");
        assert!(w.contains("inherits its parent's model"), "{w}");
        // No `gemini` provider here.
        assert_eq!(
            resolve("gemini-2.5-pro", ModelDialect::Cadre, Some(&reg)).spec,
            None
        );
        // A guess that can be used is kept.
        let c = resolve("opus", ModelDialect::Cadre, Some(&reg));
        assert_eq!((c.spec.as_deref(), c.warning), (Some("local:big"), None));
        // An explicit spec is kept; a missing key shows when the agent starts, an unknown
        // provider at once.
        let c = resolve("anthropic:claude-x", ModelDialect::Cadre, Some(&reg));
        assert_eq!(
            (c.spec.as_deref(), c.warning),
            (Some("anthropic:claude-x"), None)
        );
        let c = resolve("anthropc:claude-x", ModelDialect::Cadre, Some(&reg));
        assert_eq!(c.spec.as_deref(), Some("anthropc:claude-x"));
        assert!(c.warning.unwrap().contains("unknown provider `anthropc`"));
    }
}
