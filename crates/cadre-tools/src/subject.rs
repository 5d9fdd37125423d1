//! What a tool call acts on, as permission rules see it: a path resolved inside the
//! workspace, a parsed shell command line, a normalised text (a URL, a query), or nothing
//! rules can match.

use crate::{CommandLine, PathError, Workspace};
use std::path::{Path, PathBuf};

/// What a call acts on, matched by the part in parentheses of a `tool(glob)` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionSubject {
    /// Nothing a rule can match on: only rules without parentheses apply.
    None,
    /// A path inside the workspace, relative to its root (`.` for the root itself), after
    /// `.`/`..`, symlinks and absolute spellings were resolved.
    Path(PathBuf),
    /// A shell command line.
    Command(CommandLine),
    /// Something else the call acts on, in its normalised form (a URL as parsed, a search
    /// query), matched whole by the rule's glob.
    Text(String),
}

impl PermissionSubject {
    /// The subject of a call acting on the path `given` (as the model spelled it).
    /// A path outside the workspace, or naming a credential location, is refused here,
    /// before any rule is consulted.
    pub fn path(workspace: &Workspace, given: &str) -> Result<Self, PathError> {
        let abs = workspace.resolve(given)?;
        Ok(Self::Path(workspace.relative(&abs)))
    }

    /// The subject of a call writing the path `given`: as [`path`](Self::path), and a
    /// protected path is refused here too, so the call fails before any rule is consulted
    /// or any approval is asked (the write would be refused anyway).
    pub fn written_path(workspace: &Workspace, given: &str) -> Result<Self, PathError> {
        let abs = workspace.resolve(given)?;
        let rel = workspace.relative(&abs);
        if workspace.policy().is_protected(&abs, &rel) {
            return Err(PathError::Protected {
                path: workspace.display(&abs),
            });
        }
        Ok(Self::Path(rel))
    }

    /// The subject of a call running the shell command line `text`.
    pub fn command(text: &str) -> Self {
        Self::Command(CommandLine::parse(text))
    }

    /// The path, if this is a path subject.
    pub fn as_path(&self) -> Option<&Path> {
        match self {
            Self::Path(p) => Some(p),
            _ => None,
        }
    }

    /// A short text for approval prompts: the path or the command; `None` for no subject.
    pub fn display(&self) -> Option<String> {
        match self {
            Self::None => None,
            Self::Path(p) => Some(p.display().to_string()),
            Self::Command(line) => Some(line.text().to_string()),
            Self::Text(t) => Some(t.clone()),
        }
    }
}
