//! Finding and loading definition files: the directories cadre reads (the user dirs, then
//! the compatibility directories, then `.cadre/agents`), their order and formats, and
//! per-file errors that never stop the other files from loading.

use crate::AgentDefinition;
use crate::WorkspaceMode;
use crate::definitions::definition_file::{ParseContext, parse_definition};
use crate::definitions::error::DefinitionError;
use crate::definitions::frontmatter::MAX_FILE_BYTES;
use cadre_llm::ProviderRegistry;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Which harness's format a directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileFormat {
    /// cadre's own.
    Cadre,
    /// harness9.
    Harness9,
    /// The Java harness: the id is the file name.
    Java,
    /// Claude Code.
    Claude,
    /// OpenCode: the id is the file name; `tools` and `permission` are mappings.
    OpenCode,
    /// Gemini CLI.
    Gemini,
    /// Codex roles (TOML).
    Codex,
}

/// A directory (or file) of definitions, by where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DirKind {
    /// `~/.config/opencode/agent(s)/` (lowest precedence).
    UserOpenCode,
    /// `~/.config/cadre/agents`.
    User,
    /// `<ws>/.harness9/agents` (harness9).
    Harness9,
    /// `<ws>/subagents` (the Java harness; the id is the file name).
    Subagents,
    /// `<ws>/.opencode/agent` and `<ws>/.opencode/agents` (OpenCode).
    OpenCode,
    /// `<ws>/.gemini/agents` (Gemini CLI).
    Gemini,
    /// `<ws>/.codex/config.toml` `[agents.NAME]` and `<ws>/.codex/agents/*.toml` (Codex).
    Codex,
    /// `<ws>/.claude/agents` (Claude Code).
    Claude,
    /// `<ws>/.cadre/agents` (highest precedence).
    Cadre,
}

impl DirKind {
    /// Project directory kinds, from low to high precedence.
    pub const PROJECT: [DirKind; 7] = [
        DirKind::Harness9,
        DirKind::Subagents,
        DirKind::OpenCode,
        DirKind::Gemini,
        DirKind::Codex,
        DirKind::Claude,
        DirKind::Cadre,
    ];

    /// The format of the files found here.
    pub fn format(self) -> FileFormat {
        match self {
            DirKind::User | DirKind::Cadre => FileFormat::Cadre,
            DirKind::Harness9 => FileFormat::Harness9,
            DirKind::Subagents => FileFormat::Java,
            DirKind::Claude => FileFormat::Claude,
            DirKind::UserOpenCode | DirKind::OpenCode => FileFormat::OpenCode,
            DirKind::Gemini => FileFormat::Gemini,
            DirKind::Codex => FileFormat::Codex,
        }
    }

    /// A short name for messages (`subagents/`, `OpenCode files`).
    pub fn label(self) -> &'static str {
        match self.format() {
            FileFormat::Java => "subagents/",
            FileFormat::OpenCode => "OpenCode files",
            _ => "this directory",
        }
    }

    /// The workspace mode of a file that does not say: isolated in `subagents/` (as the Java
    /// seed does), shared everywhere else (the other harnesses' agents work on the project).
    pub fn default_mode(self) -> WorkspaceMode {
        match self {
            DirKind::Subagents => WorkspaceMode::Isolated,
            _ => WorkspaceMode::Shared,
        }
    }

    /// The directories relative to the workspace, in the order read (none for user dirs).
    /// Codex's `.codex/config.toml` is read as well; see [`CODEX_CONFIG`].
    pub fn project_dirs(self) -> &'static [&'static str] {
        match self {
            DirKind::User | DirKind::UserOpenCode => &[],
            DirKind::Harness9 => &[".harness9/agents"],
            DirKind::Subagents => &["subagents"],
            DirKind::OpenCode => &[".opencode/agent", ".opencode/agents"],
            DirKind::Gemini => &[".gemini/agents"],
            DirKind::Codex => &[".codex/agents"],
            DirKind::Claude => &[".claude/agents"],
            DirKind::Cadre => &[".cadre/agents"],
        }
    }

    /// Whether the model may be able to write this directory, so its files may only narrow
    /// (see docs/agents.md, "Definitions the model can write"): `subagents/` is a plain
    /// project folder, and `.gemini/agents/` and `subagents/` were writable by file tools
    /// in earlier versions, so a file planted there then is not trusted now.
    pub fn model_writable(self) -> bool {
        matches!(self, DirKind::Subagents | DirKind::Gemini)
    }

    /// The file extension of its definitions.
    pub fn extension(self) -> &'static str {
        match self {
            DirKind::Codex => "toml",
            _ => "md",
        }
    }
}

/// Codex's project configuration, whose `[agents.NAME]` tables are roles.
pub const CODEX_CONFIG: &str = ".codex/config.toml";

/// A definition file that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct LoadError {
    /// The file (for a bad programmatic declaration, `<code:NAME>`).
    pub path: PathBuf,
    /// Why it was refused.
    pub reason: String,
}

fn config_home() -> Option<PathBuf> {
    match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(x) => Some(PathBuf::from(x)),
        None => {
            Some(PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".config"))
        }
    }
}

/// `$XDG_CONFIG_HOME/cadre/agents`, or `~/.config/cadre/agents`.
pub fn default_user_agents_dir() -> Option<PathBuf> {
    Some(config_home()?.join("cadre").join("agents"))
}

/// OpenCode's user agent directories: `$XDG_CONFIG_HOME/opencode/agent` and `…/agents`.
pub fn default_opencode_user_dirs() -> Vec<PathBuf> {
    config_home()
        .map(|c| {
            vec![
                c.join("opencode").join("agent"),
                c.join("opencode").join("agents"),
            ]
        })
        .unwrap_or_default()
}

/// The directories to read, from low to high precedence.
pub fn agent_dirs(
    workspace: Option<&Path>,
    user_dir: Option<&Path>,
    opencode_user_dirs: &[PathBuf],
) -> Vec<(DirKind, PathBuf)> {
    let mut dirs = Vec::with_capacity(12);
    for d in opencode_user_dirs {
        dirs.push((DirKind::UserOpenCode, d.clone()));
    }
    if let Some(u) = user_dir {
        dirs.push((DirKind::User, u.to_path_buf()));
    }
    if let Some(ws) = workspace {
        for kind in DirKind::PROJECT {
            for rel in kind.project_dirs() {
                dirs.push((kind, ws.join(rel)));
            }
        }
    }
    dirs
}

/// The `*.EXT` files directly in `dir`, sorted by name. A missing directory has none.
pub fn definition_files(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, LoadError> {
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
        // Everything but directories: a FIFO or device named `*.md` is reported, not skipped.
        .filter(|p| p.extension().is_some_and(|x| x == ext) && !p.is_dir())
        .collect();
    files.sort();
    Ok(files)
}

/// The `*.md` files directly in `dir`, sorted by name.
pub fn markdown_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    definition_files(dir, "md")
}

/// Read a file cadre loads itself (a definition, a skill): a regular file of at most
/// [`MAX_FILE_BYTES`], checked from its metadata and never read beyond the cap, in UTF-8.
/// The error is the reason alone (callers add the path).
pub fn read_text(path: &Path) -> Result<String, ReadTextError> {
    cadre_tools::read_to_string_capped(path, MAX_FILE_BYTES).map_err(ReadTextError)
}

/// Why a definition or skill file could not be read as text. Its message leaves the path
/// out: the [`LoadError`] that carries it names the file.
#[derive(Debug, thiserror::Error)]
#[error("{}", reason(.0))]
pub struct ReadTextError(#[source] pub cadre_tools::CappedReadError);

/// The reason of a failed read, without the path.
fn reason(e: &cadre_tools::CappedReadError) -> String {
    use cadre_tools::CappedReadError as E;
    match e {
        E::NotFound { .. } => "cannot read: the file no longer exists".to_string(),
        E::NotRegular { kind, .. } => format!("not a regular file (it is a {kind})"),
        E::TooLarge { max, .. } => format!("file too large (more than {} KiB)", max / 1024),
        E::NotText { .. } => "not valid UTF-8".to_string(),
        E::Io { source, .. } => format!("cannot read: {source}"),
    }
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
    /// The providers, to check that aliases can reach theirs.
    pub providers: Option<&'a ProviderRegistry>,
}

impl<'a> LoadOptions<'a> {
    /// The parse context of a file in a `kind` directory.
    pub fn context(&self, kind: DirKind) -> ParseContext<'a> {
        ParseContext {
            kind,
            workspace: self.workspace,
            aliases: self.aliases,
            extra_tools: self.extra_tools,
            providers: self.providers,
        }
    }
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
    let text = read_text(path).map_err(|e| fail(e.to_string()))?;
    let mut def = parse_text(path, &text, &opts.context(kind)).map_err(|e| fail(e.to_string()))?;
    if kind.model_writable() {
        crate::definitions::writable::narrow_writable(&mut def);
    }
    Ok(def)
}

/// Parse the text of the definition file at `path` in the format of `cx.kind`'s directory:
/// a Codex role file (TOML) or a Markdown file with front matter. On failure, the reason
/// (without the path) is returned.
pub fn parse_text(
    path: &Path,
    text: &str,
    cx: &ParseContext<'_>,
) -> Result<AgentDefinition, DefinitionError> {
    match cx.kind {
        DirKind::Codex => crate::definitions::codex_file::parse_role_file(path, text, cx),
        _ => parse_definition(path, text, cx),
    }
}

/// Most threads one directory is loaded on.
const MAX_LOAD_THREADS: usize = 8;

/// Fewest files a load thread is started for: below that, starting it costs more than it
/// saves.
const FILES_PER_THREAD: usize = 64;

/// Load `files` in order, on up to one thread per core for a large directory: reading and
/// parsing a file needs nothing from the others, and a cloned repository may hold
/// thousands.
fn load_files(
    files: &[PathBuf],
    kind: DirKind,
    opts: &LoadOptions<'_>,
) -> Vec<Result<AgentDefinition, LoadError>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_LOAD_THREADS)
        .min(files.len() / FILES_PER_THREAD)
        .max(1);
    if threads == 1 {
        return files.iter().map(|f| load_file(f, kind, opts)).collect();
    }
    let chunk = files.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let parts: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|f| load_file(f, kind, opts))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|part| {
                part.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// Load every definition file of `dir` (sorted). Broken files become errors; the others
/// load.
pub fn load_dir(
    dir: &Path,
    kind: DirKind,
    opts: &LoadOptions<'_>,
) -> (Vec<AgentDefinition>, Vec<LoadError>) {
    let mut defs = Vec::new();
    let mut errors = Vec::new();
    match definition_files(dir, kind.extension()) {
        Ok(files) => {
            for loaded in load_files(&files, kind, opts) {
                match loaded {
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
