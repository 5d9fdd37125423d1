//! What file tools may do to paths inside the workspace: which paths are protected from
//! writing (cadre's own and other agents' configuration, git metadata), which are never read
//! (the task store, other sessions' transcripts), and whether hard-linked files may be read.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// Names protected from writing wherever they appear in a path: agent-harness configuration
/// and state (every hidden directory cadre reads agent definitions, skills or settings
/// from), MCP server lists and git metadata (hooks and config run code).
pub const PROTECTED_NAMES: &[&str] = &[
    ".cadre",
    ".mcp.json",
    ".git",
    ".claude",
    ".harness9",
    ".opencode",
    ".codex",
    ".gemini",
];

/// Paths protected from writing only directly below the workspace root: files and folders
/// cadre reads (definitions, skills, injected instructions) whose names are too ordinary to
/// refuse at any depth (`src/skills/` or `docs/AGENTS.md` are plain project files).
pub const PROTECTED_AT_ROOT: &[&str] = &["subagents", "skills", "AGENTS.md", "CLAUDE.md"];

/// The protected paths of `workspace`, as absolute paths: every name of [`PROTECTED_NAMES`]
/// and [`PROTECTED_AT_ROOT`] directly below the root, and cadre's user configuration
/// directory. Whether they exist or not; deeper occurrences of [`PROTECTED_NAMES`]
/// (`sub/.git`) are not listed, since they can only be found by walking the tree. This is
/// the set a sandbox mounts read-only over the agent's writable roots.
pub fn protected_roots(workspace: &Path) -> Vec<PathBuf> {
    AccessPolicy::default().protected_roots(workspace)
}

/// File names of the task store under `.cadre/` that are never read (SQLite and its journals).
const STORE_FILES: &[&str] = &[
    "cadre.db",
    "cadre.db-wal",
    "cadre.db-shm",
    "cadre.db-journal",
];

/// Why a policy refuses to read a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The task store.
    Store,
    /// Another session's transcript: file tools may not read it.
    OtherSession,
}

impl Refusal {
    /// What the refused path is, for messages.
    pub(crate) fn what(self) -> &'static str {
        match self {
            Self::Store => "cadre's task store",
            Self::OtherSession => "another session's transcript",
        }
    }
}

/// The access rules file tools follow beneath a [`Workspace`](crate::Workspace) root, besides
/// staying inside it and away from credentials (which always hold).
///
/// The default protects the built-in list and refuses hard-linked reads; `bypass` mode turns
/// the protection off with [`unprotected`](Self::unprotected).
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    protect: bool,
    extra: Vec<PathBuf>,
    user_config: Option<PathBuf>,
    allow_hardlink_reads: bool,
}

impl Default for AccessPolicy {
    fn default() -> Self {
        Self {
            protect: true,
            extra: Vec::new(),
            user_config: user_config_dir(),
            allow_hardlink_reads: false,
        }
    }
}

impl AccessPolicy {
    /// No protected paths and no refused reads (only confinement and credentials remain):
    /// what `bypass` mode means for file tools.
    pub fn unprotected(mut self) -> Self {
        self.protect = false;
        self
    }

    /// Whether protected paths are enforced.
    pub fn is_protecting(&self) -> bool {
        self.protect
    }

    /// Also protect `paths` (a file, or a directory with everything below it). Relative
    /// paths are taken from `base`, `~/` from `$HOME`; existing paths are canonicalised so
    /// that another spelling of them is protected too.
    pub fn protect_paths<S: AsRef<str>>(mut self, base: &Path, paths: &[S]) -> Self {
        for p in paths {
            let p = p.as_ref().trim();
            if p.is_empty() {
                continue;
            }
            let expanded = match p.strip_prefix("~/") {
                Some(rest) => match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
                    Some(home) => PathBuf::from(home).join(rest),
                    None => continue,
                },
                None => base.join(p),
            };
            let expanded = super::normalize(&expanded);
            let canonical = expanded.canonicalize().unwrap_or(expanded);
            if !self.extra.contains(&canonical) {
                self.extra.push(canonical);
            }
        }
        self
    }

    /// Let file tools read files with more than one hard link (default: refused, since such
    /// a file may be the same file as one outside the workspace).
    pub fn allow_hardlink_reads(mut self, allow: bool) -> Self {
        self.allow_hardlink_reads = allow;
        self
    }

    /// Whether hard-linked files may be read.
    pub fn hardlink_reads_allowed(&self) -> bool {
        self.allow_hardlink_reads
    }

    /// Whether file tools may not write `abs` (a canonical path, `rel` below the root).
    pub fn is_protected(&self, abs: &Path, rel: &Path) -> bool {
        self.protect
            && (rel.components().any(|c| is_one_of(c, PROTECTED_NAMES))
                || rel
                    .components()
                    .find(|c| matches!(c, Component::Normal(_)))
                    .is_some_and(|c| is_one_of(c, PROTECTED_AT_ROOT))
                || self
                    .extra
                    .iter()
                    .chain(&self.user_config)
                    .any(|p| abs.starts_with(p)))
    }

    /// The protected locations an OS sandbox must keep read-only for processes working in
    /// `root` (absolute): each protected name directly under `root`, the extra protected
    /// paths and the user configuration, whether or not they exist yet. The one list both
    /// the file tools and the sandbox follow; names deeper in the tree are the file tools'
    /// alone. Empty when nothing is protected (`bypass`).
    pub fn protected_roots(&self, root: &Path) -> Vec<PathBuf> {
        if !self.protect {
            return Vec::new();
        }
        (PROTECTED_NAMES.iter().chain(PROTECTED_AT_ROOT))
            .map(|n| root.join(n))
            .chain(self.extra.iter().cloned())
            .chain(self.user_config.iter().cloned())
            .collect()
    }

    /// Why reading `rel` (canonical, below the root) by session `session` is refused, if it is.
    pub(crate) fn refuse_read(&self, rel: &Path, session: &str) -> Option<Refusal> {
        if !self.protect {
            return None;
        }
        let names: Vec<&OsStr> = rel.components().map(Component::as_os_str).collect();
        let own = format!("{session}.jsonl");
        for (i, name) in names.iter().enumerate() {
            if !name.eq_ignore_ascii_case(".cadre") {
                continue;
            }
            match &names[i + 1..] {
                [file] if STORE_FILES.iter().any(|s| file.eq_ignore_ascii_case(s)) => {
                    return Some(Refusal::Store);
                }
                [dir, file] if dir.eq_ignore_ascii_case("sessions") && *file != own.as_str() => {
                    return Some(Refusal::OtherSession);
                }
                [dir, _, _, ..] if dir.eq_ignore_ascii_case("sessions") => {
                    return Some(Refusal::OtherSession);
                }
                _ => {}
            }
        }
        None
    }
}

fn is_one_of(c: Component<'_>, names: &[&str]) -> bool {
    match c {
        Component::Normal(n) => names.iter().any(|p| n.eq_ignore_ascii_case(p)),
        _ => false,
    }
}

/// cadre's user configuration directory: `$XDG_CONFIG_HOME/cadre`, else `~/.config/cadre`.
fn user_config_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    let dir = base.join("cadre");
    Some(dir.canonicalize().unwrap_or(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_names_are_refused_for_writing_at_any_depth_unless_unprotected() {
        let p = AccessPolicy::default();
        let root = Path::new("/w");
        let refused = |rel: &str| p.is_protected(&root.join(rel), Path::new(rel));
        for rel in [
            ".cadre/config.toml",
            ".cadre/agents/x.md",
            ".mcp.json",
            ".git/hooks/pre-commit",
            ".git/config",
            ".claude/settings.json",
            ".harness9/x",
            ".opencode/x",
            ".codex/config.toml",
            ".gemini/agents/general-purpose.md",
            "subagents/general-purpose.md",
            "./subagents/x.md",
            "skills/x/SKILL.md",
            "AGENTS.md",
            "CLAUDE.md",
            "sub/.git/hooks/post-checkout",
            ".GIT/config",
            ".Gemini/agents/x.md",
        ] {
            assert!(refused(rel), "{rel}");
        }
        for rel in [
            "src/main.rs",
            ".gitignore",
            ".github/workflows/ci.yml",
            "cadre/x",
            "src/subagents/x.md",
            "src/skills/x.md",
            "docs/AGENTS.md",
            "subagents.md",
        ] {
            assert!(!refused(rel), "{rel}");
        }
        let open = AccessPolicy::default().unprotected();
        assert!(!open.is_protected(Path::new("/w/.git/config"), Path::new(".git/config")));
    }

    #[test]
    fn protected_roots_list_every_protected_name_below_the_root() {
        let roots = protected_roots(Path::new("/w"));
        for rel in [
            ".cadre",
            ".git",
            ".mcp.json",
            ".gemini",
            "subagents",
            "CLAUDE.md",
        ] {
            assert!(roots.contains(&Path::new("/w").join(rel)), "{rel}");
        }
        // Each listed root is one `is_protected` refuses.
        let p = AccessPolicy::default();
        for r in roots.iter().filter(|r| r.starts_with("/w")) {
            let rel = r.strip_prefix("/w").unwrap_or(r);
            assert!(p.is_protected(r, rel), "{}", r.display());
        }
    }

    #[test]
    fn protected_roots_list_the_names_under_a_root_and_the_extra_paths() {
        let p = AccessPolicy {
            user_config: Some(PathBuf::from("/home/u/.config/cadre")),
            ..AccessPolicy::default()
        }
        .protect_paths(Path::new("/w"), &["deploy/"]);
        let got = p.protected_roots(Path::new("/w"));
        for want in [
            "/w/.cadre",
            "/w/.git",
            "/w/.claude",
            "/w/.mcp.json",
            "/w/deploy",
        ] {
            assert!(got.contains(&PathBuf::from(want)), "{want}: {got:?}");
        }
        assert!(got.contains(&PathBuf::from("/home/u/.config/cadre")));
        // Each of them is what the file tools refuse too.
        for abs in &got {
            if let Ok(rel) = abs.strip_prefix("/w") {
                assert!(p.is_protected(abs, rel), "{abs:?}");
            }
        }
        assert!(p.unprotected().protected_roots(Path::new("/w")).is_empty());
    }

    #[test]
    fn extra_paths_protect_a_file_or_a_subtree() {
        let p = AccessPolicy::default().protect_paths(Path::new("/w"), &["deploy/", "Makefile"]);
        let refused = |rel: &str| p.is_protected(&Path::new("/w").join(rel), Path::new(rel));
        assert!(refused("deploy/prod.yml"));
        assert!(refused("Makefile"));
        assert!(!refused("deployment.txt"));
        assert!(!refused("src/Makefile"));
    }

    #[test]
    fn the_user_config_directory_is_protected_where_the_workspace_holds_it() {
        let p = AccessPolicy {
            user_config: Some(PathBuf::from("/home/u/.config/cadre")),
            ..AccessPolicy::default()
        };
        let home_config = Path::new("/home/u/.config/cadre/agents/a.md");
        assert!(p.is_protected(home_config, Path::new(".config/cadre/agents/a.md")));
        let other = Path::new("/home/u/.config/other/x");
        assert!(!p.is_protected(other, Path::new(".config/other/x")));
    }

    #[test]
    fn reads_of_the_store_and_of_other_sessions_are_refused() {
        let p = AccessPolicy::default();
        let read = |rel: &str| p.refuse_read(Path::new(rel), "s-me");
        assert_eq!(read(".cadre/cadre.db"), Some(Refusal::Store));
        assert_eq!(read(".cadre/cadre.db-wal"), Some(Refusal::Store));
        assert_eq!(
            read(".cadre/sessions/s-other.jsonl"),
            Some(Refusal::OtherSession)
        );
        assert_eq!(read(".cadre/sessions/x/y"), Some(Refusal::OtherSession));
        assert_eq!(read(".cadre/sessions/s-me.jsonl"), None);
        assert_eq!(read(".cadre/tool-outputs/s-other/call_1.txt"), None);
        assert_eq!(read(".cadre/config.toml"), None);
        assert_eq!(read("src/cadre.db"), None);
        let open = AccessPolicy::default().unprotected();
        assert_eq!(open.refuse_read(Path::new(".cadre/cadre.db"), "s"), None);
    }
}
