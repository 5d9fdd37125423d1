//! Finding and loading definition files: the directories cadre reads (user dir, then the
//! compatibility directories, then `.cadre/agents`), their order, and per-file errors that
//! never stop the other files from loading.

use crate::AgentDefinition;
use crate::WorkspaceMode;
use crate::definition_file::{ParseContext, parse_definition};
use crate::frontmatter::MAX_FILE_BYTES;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A directory of definition files, by the tool whose format it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DirKind {
    /// `~/.config/cadre/agents` (lowest precedence).
    User,
    /// `<ws>/.harness9/agents` (the Go seed).
    Harness9,
    /// `<ws>/subagents` (the Java seed; the id is the file name).
    Subagents,
    /// `<ws>/.claude/agents` (Claude Code).
    Claude,
    /// `<ws>/.cadre/agents` (highest precedence).
    Cadre,
}

impl DirKind {
    /// Project directory kinds, from low to high precedence.
    pub const PROJECT: [DirKind; 4] = [
        DirKind::Harness9,
        DirKind::Subagents,
        DirKind::Claude,
        DirKind::Cadre,
    ];

    /// The workspace mode of a file that does not say: isolated in `subagents/` (as the Java
    /// seed does), shared everywhere else (Claude Code and harness9 agents work on the project).
    pub fn default_mode(self) -> WorkspaceMode {
        match self {
            DirKind::Subagents => WorkspaceMode::Isolated,
            _ => WorkspaceMode::Shared,
        }
    }

    /// The directory relative to the workspace (`None` for the user dir).
    pub fn project_dir(self) -> Option<&'static str> {
        match self {
            DirKind::User => None,
            DirKind::Harness9 => Some(".harness9/agents"),
            DirKind::Subagents => Some("subagents"),
            DirKind::Claude => Some(".claude/agents"),
            DirKind::Cadre => Some(".cadre/agents"),
        }
    }
}

/// A definition file that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct LoadError {
    /// The file (for a bad programmatic declaration, `<code:NAME>`).
    pub path: PathBuf,
    /// Why it was refused.
    pub reason: String,
}

/// `$XDG_CONFIG_HOME/cadre/agents`, or `~/.config/cadre/agents`.
pub fn default_user_agents_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".config"),
    };
    Some(base.join("cadre").join("agents"))
}

/// The directories to read, from low to high precedence.
pub fn agent_dirs(workspace: Option<&Path>, user_dir: Option<&Path>) -> Vec<(DirKind, PathBuf)> {
    let mut dirs = Vec::with_capacity(5);
    if let Some(u) = user_dir {
        dirs.push((DirKind::User, u.to_path_buf()));
    }
    if let Some(ws) = workspace {
        for kind in DirKind::PROJECT {
            if let Some(rel) = kind.project_dir() {
                dirs.push((kind, ws.join(rel)));
            }
        }
    }
    dirs
}

/// The `*.md` files directly in `dir`, sorted by name. A missing directory has none.
pub fn markdown_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Ok(Vec::new()),
        Err(e) => {
            return Err(LoadError {
                path: dir.to_path_buf(),
                reason: format!("cannot read the directory: {e}"),
            });
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

/// Read a text file for parsing, refusing huge and non-UTF-8 files.
pub fn read_text(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(format!(
            "file too large ({} bytes, at most {MAX_FILE_BYTES})",
            bytes.len()
        ));
    }
    String::from_utf8(bytes).map_err(|_| "not valid UTF-8".to_string())
}

/// Options shared by every file of one load.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions<'a> {
    /// The main workspace.
    pub workspace: Option<&'a Path>,
    /// Model aliases.
    pub aliases: &'a HashMap<String, String>,
    /// Tool names known besides the built-in, delegation and MCP ones.
    pub extra_tools: &'a [String],
}

/// Load one file.
pub fn load_file(
    path: &Path,
    kind: DirKind,
    opts: &LoadOptions<'_>,
) -> Result<AgentDefinition, LoadError> {
    let fail = |reason: String| LoadError {
        path: path.to_path_buf(),
        reason,
    };
    let text = read_text(path).map_err(fail)?;
    let cx = ParseContext {
        kind,
        workspace: opts.workspace,
        aliases: opts.aliases,
        extra_tools: opts.extra_tools,
    };
    parse_definition(path, &text, &cx).map_err(fail)
}

/// Load every `*.md` file of `dir` (sorted). Broken files become errors; the others load.
pub fn load_dir(
    dir: &Path,
    kind: DirKind,
    opts: &LoadOptions<'_>,
) -> (Vec<AgentDefinition>, Vec<LoadError>) {
    let mut defs = Vec::new();
    let mut errors = Vec::new();
    match markdown_files(dir) {
        Ok(files) => {
            for f in files {
                match load_file(&f, kind, opts) {
                    Ok(d) => defs.push(d),
                    Err(e) => {
                        tracing::info!(path = %e.path.display(), reason = %e.reason, "agent definition not loaded");
                        errors.push(e);
                    }
                }
            }
        }
        Err(e) => errors.push(e),
    }
    (defs, errors)
}
