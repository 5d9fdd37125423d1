//! The hardened `git` invocation: cadre runs git outside any sandbox on trees a model wrote,
//! so no setting the tree (or a repository planted in it) can name may run a program.
//!
//! Every run gets, whatever the repository's own configuration says:
//! - no system or global configuration (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`)
//!   and none of git's own environment variables from cadre's environment;
//! - hooks off (`core.hooksPath=/dev/null`), no file-system monitor, no pager, editor,
//!   external diff, credential helper, ssh command, signing or automatic maintenance;
//! - no submodule recursion (`submodule.recurse=false`, `diff.ignoreSubmodules=all`), so an
//!   embedded repository's configuration is never read by a git run inside it;
//! - for commands on a repository ([`Repo`]), attributes read from the empty tree
//!   (`--attr-source`) and not from the worktree's `.gitattributes`, no attributes file, and
//!   every filter driver that `info/attributes` names emptied: no clean, smudge or process
//!   filter runs;
//! - `--no-optional-locks`, stdin closed, output bounded.

use super::WorktreeError;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::io::AsyncReadExt;

/// Bytes of `git` output kept (a diffstat of a huge change is cut here).
const MAX_OUTPUT: usize = 16 * 1024;

/// Settings that would run a program, neutralised on every git run.
const HARDENED: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.editor=:",
    "sequence.editor=:",
    "core.askPass=",
    "core.sshCommand=",
    "credential.helper=",
    "diff.external=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    "core.attributesFile=/dev/null",
    "protocol.allow=never",
];

/// The empty tree of each object format: attributes are read from it, so the worktree's
/// `.gitattributes` (which the child wrote) name no filter.
const EMPTY_TREE_SHA1: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
const EMPTY_TREE_SHA256: &str = "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321";

/// A repository as cadre recorded it: its common git directory, learned from the main
/// workspace (never from a worktree a child could have rewritten).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The repository's common git directory (`.git` of the main checkout).
    pub common_dir: PathBuf,
    /// The empty tree of its object format.
    empty_tree: &'static str,
}

/// What one run names explicitly instead of discovering it from `.git` files.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// `--git-dir` (a worktree's admin directory, or the common directory).
    pub git_dir: &'a Path,
    /// `--work-tree`, for commands that read files.
    pub work_tree: Option<&'a Path>,
}

impl Repo {
    /// The repository the main workspace `main` belongs to.
    pub async fn of_workspace(main: &Path) -> Result<Self, WorktreeError> {
        let out = git(
            main,
            &[
                "rev-parse",
                "--path-format=absolute",
                "--git-common-dir",
                "--show-object-format",
            ],
        )
        .await
        .map_err(|_| WorktreeError::NotGit(main.to_path_buf()))?;
        let mut lines = out.lines();
        let common_dir = lines
            .next()
            .map(|l| PathBuf::from(l.trim()))
            .and_then(|p| p.canonicalize().ok())
            .ok_or_else(|| WorktreeError::NotGit(main.to_path_buf()))?;
        let empty_tree = match lines.next().map(str::trim) {
            Some("sha256") => EMPTY_TREE_SHA256,
            _ => EMPTY_TREE_SHA1,
        };
        Ok(Self {
            common_dir,
            empty_tree,
        })
    }

    /// The admin directory git keeps for the worktree named `name`.
    pub fn admin_dir(&self, name: &str) -> PathBuf {
        self.common_dir.join("worktrees").join(name)
    }

    /// Run `git args` on the repository itself (refs, `worktree` commands).
    pub async fn run(&self, args: &[&str]) -> Result<String, WorktreeError> {
        let target = Target {
            git_dir: &self.common_dir,
            work_tree: None,
        };
        self.run_on(target, args).await
    }

    /// Run `git args` on `target`, with its git directory and work tree named explicitly.
    pub async fn run_on(&self, target: Target<'_>, args: &[&str]) -> Result<String, WorktreeError> {
        let mut full: Vec<String> = vec![
            format!("--git-dir={}", target.git_dir.display()),
            format!("--attr-source={}", self.empty_tree),
        ];
        if let Some(tree) = target.work_tree {
            full.push(format!("--work-tree={}", tree.display()));
        }
        for driver in self.attribute_drivers(target.git_dir).await {
            for key in ["clean", "smudge", "process"] {
                full.push("-c".to_string());
                full.push(format!("filter.{driver}.{key}="));
            }
            full.push("-c".to_string());
            full.push(format!("filter.{driver}.required=false"));
        }
        full.extend(args.iter().map(std::string::ToString::to_string));
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let cwd = target.work_tree.unwrap_or(&self.common_dir);
        run(cwd, &refs, UserConfig::Ignored).await
    }

    /// The filter drivers the `info/attributes` files name (the common one and the
    /// worktree's): attributes still come from there with `--attr-source`, so each of their
    /// drivers is emptied by name. A macro line names its drivers the same way.
    async fn attribute_drivers(&self, git_dir: &Path) -> Vec<String> {
        let mut drivers = Vec::new();
        for dir in [self.common_dir.as_path(), git_dir] {
            let Ok(text) = tokio::fs::read_to_string(dir.join("info/attributes")).await else {
                continue;
            };
            for word in text.split_whitespace() {
                if let Some(name) = word.strip_prefix("filter=")
                    && !name.is_empty()
                    && !drivers.iter().any(|d| d == name)
                {
                    drivers.push(name.to_string());
                }
            }
        }
        drivers
    }

    /// The user's identity (`user.name`, `user.email`) as the repository and the user's
    /// configuration give it; reading configuration runs nothing. `None` for a part unset.
    pub async fn identity(&self) -> (Option<String>, Option<String>) {
        let gd = format!("--git-dir={}", self.common_dir.display());
        let get = |key: &'static str| {
            let gd = gd.clone();
            async move {
                run(
                    &self.common_dir,
                    &[&gd, "config", "--get", key],
                    UserConfig::Read,
                )
                .await
                .ok()
                .map(|v| v.trim_end_matches('\n').to_string())
                .filter(|v| !v.is_empty())
            }
        };
        (get("user.name").await, get("user.email").await)
    }
}

/// Whether a run reads the user's own git configuration (only to learn the identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UserConfig {
    Ignored,
    Read,
}

/// Held while a `git worktree` command runs: `worktree add`, `remove` and `prune` read
/// every worktree's entry under `.git/worktrees/`, and two at once in one repository race
/// (one reads the other's half-written entry and fails: "failed to read .../commondir").
static WORKTREE_LIST: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Run `git args` in `dir`, hardened (see the module), without attributes overrides: for
/// commands that read no file contents of a worktree (`rev-parse`, `init`, refs).
pub async fn git(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    run(dir, args, UserConfig::Ignored).await
}

/// Run hardened `git args` in `dir`; stdout (bounded) on success. `git worktree` commands of
/// this process run one at a time.
async fn run(dir: &Path, args: &[&str], user: UserConfig) -> Result<String, WorktreeError> {
    let command = args
        .iter()
        .find(|a| !a.starts_with('-') && !a.contains('='))
        .copied()
        .unwrap_or("")
        .to_string();
    let _one_at_a_time = match command.as_str() {
        "worktree" => Some(WORKTREE_LIST.lock().await),
        _ => None,
    };
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("-C").arg(dir).arg("--no-optional-locks");
    for setting in HARDENED {
        cmd.arg("-c").arg(setting);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // git's own variables could name another git directory, config or program; the
    // identity variables only name a person.
    for (var, _) in std::env::vars_os() {
        let Some(name) = var.to_str() else { continue };
        let identity = matches!(
            name,
            "GIT_AUTHOR_NAME" | "GIT_AUTHOR_EMAIL" | "GIT_COMMITTER_NAME" | "GIT_COMMITTER_EMAIL"
        );
        if name.starts_with("GIT_") && !identity {
            cmd.env_remove(&var);
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0");
    if user == UserConfig::Ignored {
        cmd.env("GIT_CONFIG_GLOBAL", "/dev/null");
    }
    let mut child = cmd.spawn().map_err(|e| failed(&command, e.to_string()))?;
    let (out, err) = tokio::join!(bounded(child.stdout.take()), bounded(child.stderr.take()));
    let status = child
        .wait()
        .await
        .map_err(|e| failed(&command, e.to_string()))?;
    if status.success() {
        Ok(String::from_utf8_lossy(&out).into_owned())
    } else {
        Err(failed(
            &command,
            String::from_utf8_lossy(&err).trim().to_string(),
        ))
    }
}

/// Everything `pipe` yields, of which the first [`MAX_OUTPUT`] bytes are kept (reading on,
/// so git never blocks on a full pipe).
async fn bounded<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else {
        return kept;
    };
    // On the heap: a buffer in the future would be held by every future that may run git,
    // twice (stdout and stderr), as a `task` call waiting for its record (17 KB of its
    // 18 KB; 10 000 waiting calls held 155 MB).
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = MAX_OUTPUT.saturating_sub(kept.len()).min(n);
        kept.extend_from_slice(&buf[..room]);
    }
    kept
}

pub(super) fn failed(command: &str, message: String) -> WorktreeError {
    WorktreeError::Git {
        command: command.to_string(),
        message,
    }
}
