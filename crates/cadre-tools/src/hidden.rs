//! Paths that reading tools must not show: the subtrees path deny rules cover. The engine
//! builds the set from the agent's policy and hands it to every call in the
//! [`ToolContext`](crate::ToolContext); `grep`, `glob` and `list_dir` leave these paths out
//! of what they print.

use globset::{Glob, GlobSet, GlobSetBuilder};
use std::path::Path;

/// A file name no specific pattern matches, used to ask whether a pattern covers everything
/// below a directory.
const PROBE: &str = "\u{1}";

/// The glob a path pattern of a permission rule compiles to: `*` matches any characters
/// including `/`, `**` works as usual, and a leading `./` is ignored, since subjects are
/// relative to the workspace root.
pub fn path_pattern(pattern: &str) -> Result<Glob, globset::Error> {
    let trimmed = pattern.trim();
    let relative = trimmed.strip_prefix("./").unwrap_or(trimmed);
    Glob::new(if relative.is_empty() { "." } else { relative })
}

/// Workspace-relative paths hidden from reading tools.
#[derive(Debug, Clone)]
pub struct HiddenPaths {
    set: GlobSet,
    patterns: Vec<String>,
}

impl Default for HiddenPaths {
    fn default() -> Self {
        Self {
            set: GlobSet::empty(),
            patterns: Vec::new(),
        }
    }
}

impl HiddenPaths {
    /// Hide the paths matching any of `patterns` (path patterns of permission rules).
    pub fn new(patterns: &[String]) -> Result<Self, globset::Error> {
        let mut builder = GlobSetBuilder::new();
        for p in patterns {
            builder.add(path_pattern(p)?);
        }
        Ok(Self {
            set: builder.build()?,
            patterns: patterns.to_vec(),
        })
    }

    /// True when nothing is hidden.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The patterns, as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// True when the workspace-relative path `rel` is hidden.
    pub fn hides(&self, rel: &Path) -> bool {
        !self.is_empty() && self.set.is_match(rel)
    }

    /// True when the directory `rel` and everything below it is hidden (`secrets/**`
    /// hides `secrets`; `secrets/*.key` does not).
    pub fn hides_tree(&self, rel: &Path) -> bool {
        if self.is_empty() {
            return false;
        }
        let probe = if rel == Path::new(".") || rel.as_os_str().is_empty() {
            Path::new(PROBE).to_path_buf()
        } else {
            rel.join(PROBE)
        };
        self.set.is_match(rel) || self.set.is_match(probe)
    }

    /// True when a walked entry is hidden: a file matching a pattern, or a directory whose
    /// whole tree is hidden.
    pub fn hides_entry(&self, rel: &Path, is_dir: bool) -> bool {
        if is_dir {
            self.hides_tree(rel)
        } else {
            self.hides(rel)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hidden(patterns: &[&str]) -> HiddenPaths {
        HiddenPaths::new(
            &patterns
                .iter()
                .map(std::string::ToString::to_string)
                .collect::<Vec<_>>(),
        )
        .unwrap()
    }

    #[test]
    fn subtrees_and_files() {
        let h = hidden(&["secrets/**", "./keys/*.pem", "*.env"]);
        assert!(h.hides(Path::new("secrets/key")));
        assert!(h.hides(Path::new("secrets/a/b")));
        assert!(h.hides_tree(Path::new("secrets")));
        assert!(h.hides_tree(Path::new("secrets/a")));
        assert!(!h.hides_tree(Path::new(".")));
        assert!(!h.hides_tree(Path::new("keys")));
        assert!(h.hides(Path::new("keys/a.pem")));
        assert!(!h.hides(Path::new("keys/a.pub")));
        assert!(h.hides(Path::new("deep/dir/prod.env")));
        assert!(!h.hides(Path::new("src/main.rs")));
        assert!(hidden(&["**"]).hides_tree(Path::new(".")));
        assert!(!HiddenPaths::default().hides_tree(Path::new(".")));
        assert!(HiddenPaths::new(&["a[".into()]).is_err());
    }
}
