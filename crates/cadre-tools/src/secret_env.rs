//! cadre's own secrets in the environment (the serve token, the providers' API keys, the
//! variables remote agents' and MCP servers' headers name), which processes the model
//! controls must not inherit: `bash` and stdio MCP servers start without them.
//!
//! The `cadre` binary also takes every credential-like variable out of its own environment
//! at start ([`cadre_types::process_env`]); [`SecretEnv::apply`] gives a child back those
//! that are not cadre's secrets (or are passed), so what a child sees does not change.

use std::collections::BTreeSet;

/// Variables that always count as secrets.
pub const DEFAULT_SECRET_VARS: &[&str] =
    &["CADRE_SERVE_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"];

/// The environment variables removed from model-controlled child processes.
///
/// ```
/// use cadre_tools::SecretEnv;
/// let env = SecretEnv::default().with_secret("OPENROUTER_API_KEY").pass(["OPENAI_API_KEY"]);
/// assert!(env.is_removed("OPENROUTER_API_KEY"));
/// assert!(env.is_removed("CADRE_SERVE_TOKEN"));
/// assert!(!env.is_removed("OPENAI_API_KEY"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretEnv {
    secrets: BTreeSet<String>,
    passed: BTreeSet<String>,
}

impl Default for SecretEnv {
    /// The [`DEFAULT_SECRET_VARS`].
    fn default() -> Self {
        Self {
            secrets: DEFAULT_SECRET_VARS
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
            passed: BTreeSet::new(),
        }
    }
}

impl SecretEnv {
    /// Also remove `name` (a provider's `api_key_env`, a custom serve token variable).
    pub fn with_secret(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        if !name.is_empty() {
            self.secrets.insert(name);
        }
        self
    }

    /// Pass these variables on after all (`[tools] pass_env`): they win over every secret.
    pub fn pass<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.passed.extend(names.into_iter().map(Into::into));
        self
    }

    /// True when `name` is removed.
    pub fn is_removed(&self, name: &str) -> bool {
        self.secrets.contains(name) && !self.passed.contains(name)
    }

    /// The variables removed, sorted.
    pub fn removed(&self) -> impl Iterator<Item = &str> {
        self.secrets
            .iter()
            .filter(|n| !self.passed.contains(*n))
            .map(String::as_str)
    }

    /// Also remove each of `names`.
    pub fn with_secrets<I, S>(self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        names.into_iter().fold(self, Self::with_secret)
    }

    /// Every secret, passed or not, sorted.
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(String::as_str)
    }

    /// Remove the secrets from the environment `cmd` passes to its child (a tokio command's
    /// `as_std_mut()` works too), and give it back the variables cadre took out of its own
    /// environment at start that are not removed here.
    pub fn apply(&self, cmd: &mut std::process::Command) {
        for (name, value) in cadre_types::process_env::scrubbed() {
            if !self.is_removed(name) {
                cmd.env(name, value);
            }
        }
        for name in self.removed() {
            cmd.env_remove(name);
        }
    }
}
