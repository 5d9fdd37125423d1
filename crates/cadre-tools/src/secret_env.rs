//! cadre's own secrets in the environment (the serve token, the providers' API keys), which
//! processes the model controls must not inherit: `bash` and stdio MCP servers start without
//! them.

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

    /// Remove the secrets from the environment `cmd` passes to its child (a tokio command's
    /// `as_std_mut()` works too).
    pub fn apply(&self, cmd: &mut std::process::Command) {
        for name in self.removed() {
            cmd.env_remove(name);
        }
    }
}
