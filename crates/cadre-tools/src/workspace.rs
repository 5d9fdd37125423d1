//! Workspace path confinement: every path a file tool touches is resolved here, kept inside
//! the workspace root (also through symlinks) and kept away from credential locations, then
//! opened beneath the root by [`files`] so that what is acted on is what was checked.

mod beneath;
mod files;
mod policy;

pub use files::{EditableFile, FileKind, Opened, OpenedDir, OpenedFile, Opener, Written};
pub use policy::{AccessPolicy, PROTECTED_AT_ROOT, PROTECTED_NAMES, protected_roots};

// Credential names, refused wherever they appear in a path (the sandbox owns the list).
use cadre_sandbox::{CREDENTIAL_DIRS, CREDENTIAL_FILES, Sandbox, SandboxError};
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path lies outside the workspace root (lexically, after `.`/`..` are resolved).
    #[error("path {path} escapes the workspace {root}")]
    Escapes {
        /// The path as given.
        path: String,
        /// The workspace root.
        root: String,
    },
    /// The path leads outside the workspace through a symlink.
    #[error("path {path} resolves through a symlink to {target}, outside the workspace {root}")]
    SymlinkEscape {
        /// The path as given.
        path: String,
        /// Where it really leads.
        target: String,
        /// The workspace root.
        root: String,
    },
    /// The path names a credential location (`~/.ssh`, `.aws`, `.netrc`, ...).
    #[error("access to credential path {0} is refused")]
    Credential(String),
    /// `~` was used but `$HOME` is not set.
    #[error("cannot expand {0}: HOME is not set")]
    NoHome(String),
    /// The path names a FIFO, socket or device: file tools act only on regular files and
    /// directories (opening the others could block or have side effects).
    #[error(
        "{path} is a {kind}, not a regular file; file tools only act on regular files and directories"
    )]
    NotRegular {
        /// The path as shown.
        path: String,
        /// What it is instead.
        kind: &'static str,
    },
    /// The path names a directory where a file is needed.
    #[error("{path} is a directory; give a file path")]
    IsDirectory {
        /// The path as shown.
        path: String,
    },
    /// The file is larger than the operation allows.
    #[error("{path} is larger than {max} bytes; too large for this tool")]
    TooLarge {
        /// The path as shown.
        path: String,
        /// The limit.
        max: u64,
    },
    /// A symlink appeared on the way to (or at) the path after it was checked.
    #[error("{path} changed while it was being opened (a symlink appeared on the way); refused")]
    Changed {
        /// The path as shown.
        path: String,
    },
    /// A file with several hard links may be the same file as one outside the workspace.
    #[error(
        "{path} has {links} hard links, so it may also be a file outside the workspace; {hint}"
    )]
    Hardlinked {
        /// The path as shown.
        path: String,
        /// Its link count.
        links: u64,
        /// What the user can do about it.
        hint: &'static str,
    },
    /// The path is protected from writing by file tools.
    #[error(
        "{path} is protected: file tools do not write cadre's or other agents' configuration, \
         git metadata or the paths in `protected_paths` (only `bypass` mode does)"
    )]
    Protected {
        /// The path as shown.
        path: String,
    },
    /// The path is never read by file tools.
    #[error("{path} is {what}; file tools do not read it")]
    ReadRefused {
        /// The path as shown.
        path: String,
        /// What it is.
        what: &'static str,
    },
    /// The path could not be opened, read or written.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done (`read`, `write`, `list`, ...).
        action: &'static str,
        /// The path as shown.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The path exists but could not be resolved (a dangling symlink, a permission error).
    #[error("cannot resolve path {path}: {source}")]
    Unresolvable {
        /// The path as given.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// The root a run's file tools are confined to, the [`AccessPolicy`] they follow in it, and
/// the [`Sandbox`] of the processes its tools start.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    policy: AccessPolicy,
    sandbox: Option<Arc<Sandbox>>,
}

impl Workspace {
    /// A workspace rooted at `root` (which must exist), with the default policy: protected
    /// paths enforced, hard-linked files not read.
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Self {
            root: root.canonicalize()?,
            policy: AccessPolicy::default(),
            sandbox: None,
        })
    }

    /// The same workspace whose processes run in `sandbox` (none: unconfined).
    pub fn with_sandbox(mut self, sandbox: Option<Arc<Sandbox>>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The sandbox of the processes started here, if any.
    pub fn sandbox(&self) -> Option<&Arc<Sandbox>> {
        self.sandbox.as_ref()
    }

    /// A command that runs `program` in the root, inside the workspace's sandbox: the one
    /// way tools start processes.
    pub fn command(
        &self,
        program: impl AsRef<OsStr>,
    ) -> Result<std::process::Command, SandboxError> {
        let mut cmd = match &self.sandbox {
            Some(s) => s.command(program)?,
            None => std::process::Command::new(program),
        };
        cmd.current_dir(&self.root);
        Ok(cmd)
    }

    /// The same workspace following `policy`.
    pub fn with_policy(mut self, policy: AccessPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The policy file tools follow here.
    pub fn policy(&self) -> &AccessPolicy {
        &self.policy
    }

    /// Resolve a path given by the model to an absolute path inside the workspace.
    ///
    /// Relative paths are taken from the root, `~` and `~/...` from `$HOME`; `.` and `..`
    /// are resolved lexically. The deepest existing ancestor is then canonicalised (symlinks
    /// followed), so the result is a real path inside the root whose missing tail (for a
    /// file about to be written) contains no symlinks. Paths escaping the root, directly or
    /// through a symlink, and credential locations are refused. An empty path is the root.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        let expanded = expand_tilde(path)?;
        let relative = !expanded.is_absolute();
        let joined = if relative {
            self.root.join(expanded)
        } else {
            expanded
        };
        let lexical = normalize(&joined);
        if self.is_credential(&lexical) {
            return Err(PathError::Credential(path.to_string()));
        }
        let lexically_inside = lexical.starts_with(&self.root);
        // Absolute paths may still name the root through another spelling (a symlinked
        // parent), so only their canonical form decides; relative ones must stay inside.
        if relative && !lexically_inside {
            return Err(self.escapes(path));
        }
        let real = match self.canonical_target(path, &lexical) {
            Ok(real) => real,
            Err(_) if !lexically_inside => return Err(self.escapes(path)),
            Err(e) => return Err(e),
        };
        if !real.starts_with(&self.root) {
            // A symlink (or a non-canonical spelling of the root) was involved: say which.
            return Err(if lexically_inside {
                PathError::SymlinkEscape {
                    path: path.to_string(),
                    target: real.display().to_string(),
                    root: self.root.display().to_string(),
                }
            } else {
                self.escapes(path)
            });
        }
        if self.is_credential(&real) {
            return Err(PathError::Credential(path.to_string()));
        }
        Ok(real)
    }

    /// True when a component below the root (or anywhere, for paths outside it) names a
    /// credential directory or file, or the path lies under a credential location in
    /// `$HOME`. The root's own components are not judged: the user chose it.
    fn is_credential(&self, path: &Path) -> bool {
        let below = path.strip_prefix(&self.root).unwrap_or(path);
        let named = below.components().any(|c| match c {
            Component::Normal(name) => is_credential_name(name),
            _ => false,
        });
        named || under_home_credentials(path)
    }

    /// `abs` (a path from [`Workspace::resolve`]) relative to the root, `.` for the root
    /// itself; paths outside the root are returned unchanged.
    pub fn relative(&self, abs: &Path) -> PathBuf {
        match abs.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => PathBuf::from("."),
            Ok(rel) => rel.to_path_buf(),
            Err(_) => abs.to_path_buf(),
        }
    }

    /// `abs` relative to the root for messages (`.` for the root itself); paths outside the
    /// root are shown in full.
    pub fn display(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => abs.display().to_string(),
        }
    }

    fn escapes(&self, path: &str) -> PathError {
        PathError::Escapes {
            path: path.to_string(),
            root: self.root.display().to_string(),
        }
    }

    /// Canonicalise the deepest existing ancestor of `lexical` (an absolute, normalised
    /// path) and append the components that do not exist yet.
    fn canonical_target(&self, given: &str, lexical: &Path) -> Result<PathBuf, PathError> {
        let mut existing = lexical.to_path_buf();
        let mut missing: Vec<std::ffi::OsString> = Vec::new();
        // `symlink_metadata` so that a dangling symlink counts as existing and is refused
        // below instead of being written through.
        while std::fs::symlink_metadata(&existing).is_err() {
            match (existing.file_name(), existing.parent()) {
                (Some(name), Some(parent)) => {
                    missing.push(name.to_os_string());
                    existing = parent.to_path_buf();
                }
                _ => break,
            }
        }
        let mut real = existing
            .canonicalize()
            .map_err(|source| PathError::Unresolvable {
                path: given.to_string(),
                source,
            })?;
        for name in missing.iter().rev() {
            real.push(name);
        }
        Ok(real)
    }
}

/// Expand `~` and `~/...` against `$HOME`; other paths are returned as they are.
fn expand_tilde(path: &str) -> Result<PathBuf, PathError> {
    let rest = match path.strip_prefix('~') {
        Some("") => "",
        Some(rest) if rest.starts_with('/') => rest.trim_start_matches('/'),
        _ => return Ok(PathBuf::from(path)),
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or_else(|| PathError::NoHome(path.to_string()))?;
    Ok(PathBuf::from(home).join(rest))
}

/// Resolve `.` and `..` without touching the file system. `..` at `/` stays at `/`.
fn normalize(path: &Path) -> PathBuf {
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

fn is_credential_name(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    CREDENTIAL_DIRS
        .iter()
        .chain(CREDENTIAL_FILES)
        .any(|c| c.eq_ignore_ascii_case(name))
}

fn under_home_credentials(path: &Path) -> bool {
    let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else {
        return false;
    };
    let home = PathBuf::from(home);
    let canonical_home = home.canonicalize().ok();
    [Some(home), canonical_home].into_iter().flatten().any(|h| {
        CREDENTIAL_DIRS
            .iter()
            .chain(CREDENTIAL_FILES)
            .any(|c| path.starts_with(h.join(c)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct Fixture {
        _ws_dir: tempfile::TempDir,
        _outside: tempfile::TempDir,
        ws: Workspace,
    }

    fn fixture() -> Fixture {
        let ws_dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = ws_dir.path();
        fs::create_dir_all(root.join("src/a")).unwrap();
        fs::write(root.join("src/a/b.rs"), "fn main() {}").unwrap();
        fs::write(root.join("x"), "x").unwrap();
        fs::write(outside.path().join("file"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("src"), root.join("inner")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("nope"), root.join("dangling")).unwrap();
        fs::create_dir_all(root.join(".ssh")).unwrap();
        fs::write(root.join(".ssh/config"), "Host *").unwrap();
        std::os::unix::fs::symlink(root.join(".ssh"), root.join("keys")).unwrap();
        let ws = Workspace::new(root).unwrap();
        Fixture {
            _ws_dir: ws_dir,
            _outside: outside,
            ws,
        }
    }

    #[test]
    fn refuses_paths_leaving_the_workspace_or_naming_credentials() {
        let f = fixture();
        let root = f.ws.root().display().to_string();
        // (path, expected message fragment)
        let cases: &[(&str, String)] = &[
            ("../x", format!("path ../x escapes the workspace {root}")),
            ("a/../../x", "escapes the workspace".into()),
            (
                "/etc/passwd",
                "path /etc/passwd escapes the workspace".into(),
            ),
            ("link/file", "resolves through a symlink".into()),
            ("link/new", "resolves through a symlink".into()),
            (
                "link/new/deeper/file.txt",
                "resolves through a symlink".into(),
            ),
            ("link", "resolves through a symlink".into()),
            ("dangling", "cannot resolve path dangling".into()),
            (
                "~/.ssh/id_rsa",
                "access to credential path ~/.ssh/id_rsa is refused".into(),
            ),
            ("~", "escapes the workspace".into()),
            (
                ".ssh/config",
                "access to credential path .ssh/config".into(),
            ),
            ("deep/.aws/credentials", "credential path".into()),
            ("sub/.netrc", "credential path".into()),
            ("x/.GnuPG/key", "credential path".into()),
            ("keys/config", "credential path keys/config".into()),
        ];
        for (path, want) in cases {
            match f.ws.resolve(path) {
                Ok(p) => panic!("{path} resolved to {} but should be refused", p.display()),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(
                        msg.contains(want.as_str()),
                        "{path}: got {msg:?}, want {want:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn resolves_legitimate_paths_inside_the_workspace() {
        let f = fixture();
        let root = f.ws.root().to_path_buf();
        let abs_inside = root.join("src/a/b.rs").display().to_string();
        let cases: Vec<(&str, PathBuf)> = vec![
            ("src/a/b.rs", root.join("src/a/b.rs")),
            ("./x", root.join("x")),
            ("src/./a/../a/b.rs", root.join("src/a/b.rs")),
            (abs_inside.as_str(), root.join("src/a/b.rs")),
            ("new/dir/file.txt", root.join("new/dir/file.txt")),
            (".", root.clone()),
            ("", root.clone()),
            ("inner/a/b.rs", root.join("src/a/b.rs")),
            ("inner/new.rs", root.join("src/new.rs")),
        ];
        for (path, want) in cases {
            let got = f.ws.resolve(path).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert_eq!(got, want, "{path}");
        }
    }

    #[test]
    fn display_is_relative_to_the_root() {
        let f = fixture();
        let root = f.ws.root();
        assert_eq!(f.ws.display(&root.join("src/a/b.rs")), "src/a/b.rs");
        assert_eq!(f.ws.display(root), ".");
        assert_eq!(f.ws.display(Path::new("/etc/passwd")), "/etc/passwd");
    }

    #[test]
    fn normalize_resolves_dots_lexically() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
    }
}
