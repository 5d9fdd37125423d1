//! Helpers shared by the built-in tools: path globs, hidden-path checks, directory walks
//! (which leave out the paths deny rules hide) and output caps.

use crate::{HiddenPaths, ToolError, Workspace};
use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;
use std::path::Path;
use std::sync::Arc;

/// Refuse to read or search what was opened at the canonical path `abs` when deny rules
/// hide it (checked on what was opened, so a path swapped after the permission check is
/// caught too).
pub(crate) fn refuse_hidden(
    workspace: &Workspace,
    hidden: &HiddenPaths,
    abs: &Path,
    is_dir: bool,
) -> Result<(), ToolError> {
    let rel = workspace.relative(abs);
    if hidden.hides_entry(&rel, is_dir) {
        return Err(ToolError::Failed(format!(
            "{} is hidden by a permission deny rule",
            rel.display()
        )));
    }
    Ok(())
}

/// A matcher for a path glob with ripgrep's `--glob` conventions: a pattern without `/`
/// matches a file name at any depth, one with `/` matches the whole path relative to the
/// search root; `*` never crosses `/`, `**` does.
pub(crate) struct PathGlob {
    matcher: GlobMatcher,
    name_only: bool,
}

impl PathGlob {
    /// Compile `pattern`; a bad pattern is an [`ToolError::InvalidArgs`].
    pub(crate) fn new(pattern: &str) -> Result<Self, ToolError> {
        let trimmed = pattern.trim().trim_start_matches("./");
        if trimmed.is_empty() {
            return Err(ToolError::InvalidArgs("glob pattern is empty".into()));
        }
        if trimmed.starts_with('/') {
            return Err(ToolError::InvalidArgs(format!(
                "glob pattern {pattern} must be relative to the search directory; \
                 choose the directory with `path`"
            )));
        }
        let matcher = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::InvalidArgs(format!("invalid glob {pattern}: {e}")))?
            .compile_matcher();
        Ok(Self {
            matcher,
            name_only: !trimmed.contains('/'),
        })
    }

    /// Whether `rel` (relative to the search root) matches.
    pub(crate) fn is_match(&self, rel: &Path) -> bool {
        if self.name_only {
            rel.file_name()
                .is_some_and(|name| self.matcher.is_match(Path::new(name)))
        } else {
            self.matcher.is_match(rel)
        }
    }
}

/// True when `path` is a symlink leading to a path that `hidden` hides (listing the link
/// would show the hidden path's name).
pub(crate) fn link_to_hidden(workspace: &Workspace, hidden: &HiddenPaths, path: &Path) -> bool {
    if hidden.is_empty() || !path.is_symlink() {
        return false;
    }
    let Some(given) = path.to_str() else {
        return false;
    };
    match workspace.resolve(given) {
        Ok(real) => hidden.hides_entry(&workspace.relative(&real), real.is_dir()),
        Err(_) => false,
    }
}

/// A deterministic walker over `root` that honours `.gitignore` (even outside a git
/// repository), `.ignore` and skips hidden files, like ripgrep, and never enters or yields
/// what `hidden` hides.
pub(crate) fn walker(root: &Path, workspace: &Workspace, hidden: &Arc<HiddenPaths>) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .require_git(false)
        .hidden(true)
        .follow_links(false)
        .sort_by_file_name(std::cmp::Ord::cmp);
    if !hidden.is_empty() {
        let hidden = hidden.clone();
        let base = workspace.root().to_path_buf();
        builder.filter_entry(move |entry| {
            let rel = entry.path().strip_prefix(&base).unwrap_or(entry.path());
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            !hidden.hides_entry(rel, is_dir)
        });
    }
    builder
}

/// `line` cut to at most `max` characters, with a marker saying how much was cut.
pub(crate) fn truncate_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        None => line.to_string(),
        Some((cut, _)) => {
            let dropped = line[cut..].chars().count();
            format!("{}[... {dropped} more characters]", &line[..cut])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_without_slash_match_names_at_any_depth() {
        let g = PathGlob::new("*.rs").unwrap();
        assert!(g.is_match(Path::new("a.rs")));
        assert!(g.is_match(Path::new("src/deep/a.rs")));
        assert!(!g.is_match(Path::new("src/a.txt")));
        let g = PathGlob::new("src/*.rs").unwrap();
        assert!(g.is_match(Path::new("src/a.rs")));
        assert!(!g.is_match(Path::new("src/deep/a.rs")));
        let g = PathGlob::new("./src/**/*.rs").unwrap();
        assert!(g.is_match(Path::new("src/deep/a.rs")));
        assert!(PathGlob::new("/abs/*.rs").is_err());
        assert!(PathGlob::new("a[").is_err());
    }

    #[test]
    fn long_lines_are_truncated_with_a_marker() {
        assert_eq!(truncate_line("héllo", 10), "héllo");
        assert_eq!(truncate_line("héllo", 2), "hé[... 3 more characters]");
    }
}
