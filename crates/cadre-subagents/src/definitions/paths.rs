//! Paths of definitions: resolving `workspace.path` against the main workspace (refusing
//! anything that leads out of it) and the runtime workspace root of each workspace mode.

use crate::{AgentDefinition, DefinitionSource, WorkspaceMode};
use std::path::{Component, Path, PathBuf};

/// Resolve `path` (relative to `workspace`, or absolute) lexically, refusing a result outside
/// `workspace`. When the path exists it is also resolved through symlinks and must still be
/// inside the (resolved) workspace.
pub fn resolve_workspace_path(
    workspace: &Path,
    path: &Path,
) -> Result<PathBuf, WorkspacePathError> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        workspace.join(path)
    };
    let mut out = PathBuf::new();
    for comp in joined.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err(WorkspacePathError::Escapes(path.to_path_buf()));
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    let root = normalise(workspace);
    if !out.starts_with(&root) {
        return Err(WorkspacePathError::Escapes(path.to_path_buf()));
    }
    if let (Ok(real), Ok(real_root)) = (out.canonicalize(), root.canonicalize())
        && !real.starts_with(&real_root)
    {
        return Err(WorkspacePathError::ThroughSymlink(path.to_path_buf()));
    }
    Ok(out)
}

/// Why a definition's `workspace.path` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspacePathError {
    /// It climbs out of the main workspace.
    #[error("`workspace.path` {} escapes the main workspace", .0.display())]
    Escapes(PathBuf),
    /// It exists and a symlink on the way leads out of the main workspace.
    #[error("`workspace.path` {} leads outside the main workspace through a symlink", .0.display())]
    ThroughSymlink(PathBuf),
    /// It is absolute, and there is no main workspace to check it against.
    #[error("`workspace.path` {} is absolute but no main workspace is known", .0.display())]
    AbsoluteWithoutWorkspace(PathBuf),
}

fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Check a `workspace.path` when no main workspace is known: it must be relative and must
/// not climb out with `..`.
pub fn check_relative_path(path: &Path) -> Result<(), WorkspacePathError> {
    if path.is_absolute() {
        return Err(WorkspacePathError::AbsoluteWithoutWorkspace(
            path.to_path_buf(),
        ));
    }
    let mut depth: usize = 0;
    for comp in path.components() {
        match comp {
            Component::ParentDir => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| WorkspacePathError::Escapes(path.to_path_buf()))?;
            }
            Component::Normal(_) => depth += 1,
            _ => {}
        }
    }
    Ok(())
}

/// Where the child of `def` works, for the main workspace `main`:
/// shared → `main`; isolated with a path → that path; isolated without one →
/// `<main>/.cadre/agents/<name>/workspace`. Built-in entries always share.
pub fn runtime_root(def: &AgentDefinition, main: &Path) -> PathBuf {
    if def.source == DefinitionSource::Builtin {
        return main.to_path_buf();
    }
    match (def.workspace.mode, &def.workspace.path) {
        (WorkspaceMode::Shared, _) => main.to_path_buf(),
        (WorkspaceMode::Isolated, Some(p)) => main.join(p),
        (WorkspaceMode::Isolated, None) => main
            .join(".cadre")
            .join("agents")
            .join(&def.name)
            .join("workspace"),
    }
}

/// Where the system prompt base of `def` is read from when it has a `workspace.path`:
/// `<path>/AGENTS.md`. `None` when the base is the definition's own body.
pub fn prompt_file(def: &AgentDefinition, main: &Path) -> Option<PathBuf> {
    def.workspace
        .path
        .as_ref()
        .map(|p| main.join(p).join("AGENTS.md"))
}

/// A path for people: relative to `workspace` when inside it, `~/…` when under the home
/// directory, otherwise as is.
pub fn display_path(path: &Path, workspace: Option<&Path>) -> String {
    if let Some(ws) = workspace
        && let Ok(rel) = path.strip_prefix(ws)
    {
        return rel.display().to_string();
    }
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty())
        && let Ok(rel) = path.strip_prefix(Path::new(&home))
    {
        return format!("~/{}", rel.display());
    }
    path.display().to_string()
}

/// A definition source for people (file paths shortened with [`display_path`]).
pub fn display_source(source: &DefinitionSource, workspace: Option<&Path>) -> String {
    match source {
        DefinitionSource::File(p) => display_path(p, workspace),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn resolves_inside_and_refuses_escapes() {
        let ws = Path::new("/w/main");
        assert_eq!(
            resolve_workspace_path(ws, Path::new("./defs/../defs/rev")).unwrap(),
            PathBuf::from("/w/main/defs/rev")
        );
        assert_eq!(
            resolve_workspace_path(ws, Path::new("/w/main/x")).unwrap(),
            PathBuf::from("/w/main/x")
        );
        for bad in [
            "../other",
            "defs/../../x",
            "/etc",
            "/w/mainx",
            "/w/main/../x",
        ] {
            assert!(resolve_workspace_path(ws, Path::new(bad)).is_err(), "{bad}");
        }
        assert!(check_relative_path(Path::new("a/../b")).is_ok());
        assert!(check_relative_path(Path::new("a/../../b")).is_err());
        assert!(check_relative_path(Path::new("/abs")).is_err());
    }

    #[test]
    fn runtime_roots_follow_the_table() {
        let main = Path::new("/w");
        let mut def = AgentDefinition::new("rev", "d");
        assert_eq!(
            runtime_root(&def, main),
            PathBuf::from("/w/.cadre/agents/rev/workspace")
        );
        def.workspace.path = Some("defs/rev".into());
        assert_eq!(runtime_root(&def, main), PathBuf::from("/w/defs/rev"));
        assert_eq!(
            prompt_file(&def, main),
            Some(PathBuf::from("/w/defs/rev/AGENTS.md"))
        );
        def.workspace.mode = WorkspaceMode::Shared;
        assert_eq!(runtime_root(&def, main), PathBuf::from("/w"));
        let mut gp = AgentDefinition::new("general-purpose", "d");
        gp.source = DefinitionSource::Builtin;
        assert_eq!(runtime_root(&gp, main), PathBuf::from("/w"));
    }
}
