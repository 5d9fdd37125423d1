//! Which tools a run may call. Whoever starts a run fixes its grant (a delegating parent
//! grants its child a subset of what it may call itself); the engine checks it on every
//! call, independently of the registry the agent was built with, so a registry built wrongly
//! cannot widen what a run may do.

use std::collections::BTreeSet;
use std::sync::Arc;

/// The tools a run may call: everything its registry offers (a top-level run), or only the
/// named ones. Cheap to clone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolGrant {
    only: Option<Arc<BTreeSet<String>>>,
}

impl ToolGrant {
    /// No restriction beyond the agent's own registry.
    pub fn unrestricted() -> Self {
        Self::default()
    }

    /// Only the tools named.
    pub fn only<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        Self {
            only: Some(Arc::new(names.into_iter().map(Into::into).collect())),
        }
    }

    /// True when the run may call `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        self.only.as_ref().is_none_or(|names| names.contains(tool))
    }

    /// The names granted, sorted; `None` when unrestricted.
    pub fn names(&self) -> Option<Vec<&str>> {
        self.only
            .as_ref()
            .map(|names| names.iter().map(String::as_str).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unrestricted_allows_everything_and_only_allows_the_named() {
        assert!(ToolGrant::unrestricted().allows("bash"));
        assert_eq!(ToolGrant::unrestricted().names(), None);
        let g = ToolGrant::only(["read_file", "grep"]);
        assert!(g.allows("read_file"));
        assert!(!g.allows("bash"));
        assert_eq!(g.names(), Some(vec!["grep", "read_file"]));
        assert!(!ToolGrant::only(Vec::<String>::new()).allows("read_file"));
    }
}
