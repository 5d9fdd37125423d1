//! Git worktree isolation: a child runs in a fresh `git worktree` on its own branch, made from
//! its parent's HEAD, and its changes come back as a commit on that branch. The parent's
//! working tree and index are never touched: every command that changes something runs on
//! the child's worktree (its own index) or on refs.
//!
//! cadre runs `git` itself, outside any sandbox, on a tree a model wrote: hooks and the
//! file-system monitor are turned off, and the worktree's own commands name its git
//! directory explicitly instead of following the `.git` file the child could have replaced.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::io::AsyncReadExt;

/// Where worktrees go, under the main workspace.
pub const WORKTREES_DIR: &str = ".cadre/worktrees";
/// The prefix of worktree branches: `cadre/<agent>/<short id>`.
pub const BRANCH_PREFIX: &str = "cadre/";
/// Bytes of `git` output kept (a diffstat of a huge change is cut here).
const MAX_OUTPUT: usize = 16 * 1024;
/// Files a diffstat lists before summarising.
const STAT_FILES: &str = "--stat-count=40";

/// How a child is isolated from its parent's files. As a tool argument it is the string
/// `worktree`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum Isolation {
    /// A git worktree on a new branch.
    Worktree,
}

impl Isolation {
    /// Every isolation, by name.
    const NAMES: [(&'static str, Isolation); 1] = [("worktree", Isolation::Worktree)];
}

/// An isolation name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown isolation `{0}` (the only one is `worktree`)")]
pub struct UnknownIsolation(pub String);

impl std::str::FromStr for Isolation {
    type Err = UnknownIsolation;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Self::NAMES
            .into_iter()
            .find_map(|(name, isolation)| (name == s).then_some(isolation))
            .ok_or_else(|| UnknownIsolation(s.to_string()))
    }
}

impl TryFrom<String> for Isolation {
    type Error = UnknownIsolation;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl schemars::JsonSchema for Isolation {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Isolation".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = Self::NAMES.iter().map(|(name, _)| *name).collect();
        schemars::json_schema!({"type": "string", "enum": names})
    }
}

/// Why a worktree could not be made or finished.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorktreeError {
    /// The parent does not work in a git repository.
    #[error(
        "isolation: worktree needs a git repository, and {0} is not inside one (run `git init` \
         and commit, or leave isolation off)"
    )]
    NotGit(PathBuf),
    /// The repository has no commit to branch from.
    #[error("isolation: worktree needs a commit to branch from; {0} has none yet")]
    NoCommit(PathBuf),
    /// A git command failed.
    #[error("git {command} failed: {message}")]
    Git {
        /// The command (without paths).
        command: String,
        /// What git said.
        message: String,
    },
}

/// Where a child's worktree will come from: checked when the task is started, so a caller
/// outside git gets its error at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeSpec {
    /// The top level of the parent's checkout (a worktree itself for a nested child).
    pub toplevel: PathBuf,
    /// The parent's HEAD commit.
    pub base: String,
    /// The parent's root relative to `toplevel`: the child's root is the same place in its
    /// worktree.
    pub rel: PathBuf,
    /// The main workspace, under which worktrees are made.
    pub main: PathBuf,
}

impl WorktreeSpec {
    /// The spec for a child of a parent working in `parent_root`, with worktrees under
    /// `main` (the main workspace).
    pub async fn prepare(parent_root: &Path, main: &Path) -> Result<Self, WorktreeError> {
        let toplevel = git(parent_root, &["rev-parse", "--show-toplevel"])
            .await
            .map_err(|_| WorktreeError::NotGit(parent_root.to_path_buf()))?;
        let toplevel = PathBuf::from(toplevel.trim())
            .canonicalize()
            .map_err(|_| WorktreeError::NotGit(parent_root.to_path_buf()))?;
        let base = git(&toplevel, &["rev-parse", "--verify", "HEAD^{commit}"])
            .await
            .map_err(|_| WorktreeError::NoCommit(toplevel.clone()))?
            .trim()
            .to_string();
        let rel = parent_root
            .strip_prefix(&toplevel)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Ok(Self {
            toplevel,
            base,
            rel,
            main: main.to_path_buf(),
        })
    }
}

/// A child's worktree. A one-off child's lasts for its task ([`finish`](Self::finish)); a
/// live child's for the child's whole life: each task's changes are
/// [recorded](Self::record) on the branch, and [`close`](Self::close) removes it.
#[derive(Debug)]
pub struct Worktree {
    spec: WorktreeSpec,
    /// `<main>/.cadre/worktrees/<name>`.
    path: PathBuf,
    /// Its git directory (`.git/worktrees/<name>` of the repository).
    git_dir: PathBuf,
    /// `cadre/<agent>/<short id>`.
    branch: String,
    /// Set once the worktree is closed: no task may run in it any more.
    closed: std::sync::atomic::AtomicBool,
}

/// What became of a worktree when its child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorktreeReport {
    /// The child changed files: they are committed on `branch`, and the worktree is gone.
    Committed {
        /// The branch.
        branch: String,
        /// Its new tip.
        commit: String,
        /// The parent's HEAD it started from.
        base: String,
        /// `git diff --stat base commit`.
        diffstat: String,
    },
    /// Nothing changed: worktree and branch are removed.
    Unchanged,
    /// A live child's task changed nothing, and neither did any before it: the worktree
    /// stays for its next message, the branch is still its base.
    NothingYet {
        /// The branch.
        branch: String,
    },
    /// A live child was closed: its worktree is removed, and its commits stay on `branch`.
    Closed {
        /// The branch.
        branch: String,
        /// Its tip.
        commit: String,
        /// The parent's HEAD it started from.
        base: String,
    },
    /// The child was cancelled or failed: its work (committed if there was any) stays on
    /// `branch`.
    Kept {
        /// The branch.
        branch: String,
        /// Its tip.
        commit: String,
        /// The parent's HEAD it started from.
        base: String,
        /// Why it ended.
        reason: String,
    },
    /// Cleaning up failed; what is left is where it says.
    Failed(String),
}

impl WorktreeReport {
    /// The report as the parent reads it, appended to the child's result (plain text: the
    /// result is escaped into the task envelope).
    pub fn render(&self) -> String {
        match self {
            Self::Committed {
                branch,
                commit,
                base,
                diffstat,
            } => format!(
                "Worktree: the changes are committed on branch `{branch}` (commit {commit}, based \
                 on {base}); your files are untouched.\n{}",
                diffstat.trim_end()
            ),
            Self::Unchanged => {
                "Worktree: no files changed; the worktree and its branch were removed.".to_string()
            }
            Self::NothingYet { branch } => format!(
                "Worktree: no files changed yet; the sub-agent keeps working in its worktree on \
                 branch `{branch}`."
            ),
            Self::Closed {
                branch,
                commit,
                base,
            } => format!(
                "Worktree: removed; the sub-agent's commits stay on branch `{branch}` (commit \
                 {commit}, based on {base}); your files are untouched."
            ),
            Self::Kept {
                branch,
                commit,
                base,
                reason,
            } => format!(
                "Worktree: the sub-agent {reason}; its work is kept on branch `{branch}` (commit \
                 {commit}, based on {base})."
            ),
            Self::Failed(why) => format!("Worktree: cleaning up failed: {why}"),
        }
    }
}

impl Worktree {
    /// Make the worktree `<main>/.cadre/worktrees/<name>` on a new branch
    /// `cadre/<agent>/<short id>` at the parent's HEAD.
    pub async fn create(
        spec: &WorktreeSpec,
        name: &str,
        agent: &str,
    ) -> Result<Self, WorktreeError> {
        let dir = spec.main.join(WORKTREES_DIR);
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| failed("worktree add", e.to_string()))?;
        // Keep the worktrees out of the parent's `git status`.
        let ignore = dir.join(".gitignore");
        if tokio::fs::metadata(&ignore).await.is_err() {
            tokio::fs::write(&ignore, "*\n")
                .await
                .map_err(|e| failed("worktree add", e.to_string()))?;
        }
        let path = dir.join(name);
        let branch = branch_of(name, agent);
        let path_arg = path.to_string_lossy().into_owned();
        git(
            &spec.toplevel,
            &[
                "worktree", "add", "--quiet", "-b", &branch, &path_arg, &spec.base,
            ],
        )
        .await?;
        let git_dir = git(&path, &["rev-parse", "--absolute-git-dir"]).await?;
        let path = path
            .canonicalize()
            .map_err(|e| failed("worktree add", e.to_string()))?;
        Ok(Self {
            spec: spec.clone(),
            path,
            git_dir: PathBuf::from(git_dir.trim()),
            branch,
            closed: Default::default(),
        })
    }

    /// The worktree `name` of a live child, made by [`create`](Self::create) in an earlier
    /// process (or removed meanwhile by `cadre worktrees prune`): its directory again, added
    /// back on its branch when it is gone. `None` when neither the directory nor the branch
    /// exists.
    pub async fn reopen(
        spec: &WorktreeSpec,
        name: &str,
        agent: &str,
    ) -> Result<Option<Self>, WorktreeError> {
        let path = spec.main.join(WORKTREES_DIR).join(name);
        let branch = branch_of(name, agent);
        let reference = format!("refs/heads/{branch}");
        if !path.is_dir()
            && git(
                &spec.toplevel,
                &["rev-parse", "--verify", "--quiet", &reference],
            )
            .await
            .is_err()
        {
            return Ok(None);
        }
        let worktree = Self {
            spec: spec.clone(),
            git_dir: spec.toplevel.join(".git"),
            path,
            branch,
            closed: Default::default(),
        };
        worktree.ensure().await.map(Some)
    }

    /// Make sure the worktree's directory exists (it is added back on its branch when
    /// `cadre worktrees prune` or a person removed it), and learn its git directory.
    async fn ensure(mut self) -> Result<Self, WorktreeError> {
        if !self.path.is_dir() {
            // A removed worktree is still registered until git prunes it.
            git(&self.spec.toplevel, &["worktree", "prune"]).await?;
            let path_arg = self.path.to_string_lossy().into_owned();
            git(
                &self.spec.toplevel,
                &["worktree", "add", "--quiet", &path_arg, &self.branch],
            )
            .await?;
        }
        let git_dir = git(&self.path, &["rev-parse", "--absolute-git-dir"]).await?;
        self.git_dir = PathBuf::from(git_dir.trim());
        self.path = self
            .path
            .canonicalize()
            .map_err(|e| failed("worktree add", e.to_string()))?;
        Ok(self)
    }

    /// Where the child works: the parent's root's place in the worktree.
    pub fn root(&self) -> PathBuf {
        self.path.join(&self.spec.rel)
    }

    /// The worktree's top level.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The branch.
    pub fn branch(&self) -> &str {
        &self.branch
    }

    /// Tear a one-off child's worktree down after its task ended: commit what changed (on
    /// success) or keep it on the branch (cancelled or failed, `failure` says how), remove
    /// the worktree, and drop the branch when nothing changed.
    pub async fn finish(&self, failure: Option<&str>, message: &str) -> WorktreeReport {
        let settled = async {
            let report = self.commit(failure, message).await?;
            self.close_now().await?;
            if report == WorktreeReport::Unchanged {
                self.drop_branch().await?;
            }
            Ok(report)
        };
        self.or_left(settled.await)
    }

    /// After a live child's task: commit what it changed on the branch (`message` names the
    /// task) and report the branch against the base; the worktree stays for the next task.
    pub async fn record(&self, failure: Option<&str>, message: &str) -> WorktreeReport {
        match self.commit(failure, message).await {
            Ok(WorktreeReport::Unchanged) => WorktreeReport::NothingYet {
                branch: self.branch.clone(),
            },
            Ok(report) => report,
            Err(e) => WorktreeReport::Failed(format!(
                "{e}; the changes stay uncommitted in {} on branch {}",
                self.path.display(),
                self.branch
            )),
        }
    }

    /// End a live child's worktree: commit anything left (`message`), remove it, and drop
    /// the branch when it has no commits of its own. Later tasks of the child are refused
    /// ([`is_closed`](Self::is_closed)).
    pub async fn close(&self, message: &str) -> WorktreeReport {
        self.mark_closed();
        let closed = async {
            let commit = commit_all(&self.git_dir, &self.path, message).await?;
            self.close_now().await?;
            if commit == self.spec.base {
                self.drop_branch().await?;
                return Ok(WorktreeReport::Unchanged);
            }
            Ok(WorktreeReport::Closed {
                branch: self.branch.clone(),
                commit,
                base: self.spec.base.clone(),
            })
        };
        self.or_left(closed.await)
    }

    /// Refuse further tasks in the worktree (before [`close`](Self::close) removes it).
    pub fn mark_closed(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// True once [`mark_closed`](Self::mark_closed) or [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Commit what changed and say what the branch holds: kept (after a failure), unchanged
    /// (still at the base) or committed, with the diffstat against the base.
    async fn commit(
        &self,
        failure: Option<&str>,
        message: &str,
    ) -> Result<WorktreeReport, WorktreeError> {
        let commit = commit_all(&self.git_dir, &self.path, message).await?;
        let base = &self.spec.base;
        if let Some(reason) = failure {
            return Ok(WorktreeReport::Kept {
                branch: self.branch.clone(),
                commit,
                base: base.clone(),
                reason: reason.to_string(),
            });
        }
        if commit == *base {
            return Ok(WorktreeReport::Unchanged);
        }
        let diffstat = git(
            &self.spec.toplevel,
            &["diff", "--stat", STAT_FILES, base, &commit],
        )
        .await?;
        Ok(WorktreeReport::Committed {
            branch: self.branch.clone(),
            commit,
            base: base.clone(),
            diffstat,
        })
    }

    /// A report, or where a failed clean-up left things.
    fn or_left(&self, done: Result<WorktreeReport, WorktreeError>) -> WorktreeReport {
        done.unwrap_or_else(|e| {
            WorktreeReport::Failed(format!(
                "{e}; the worktree is left at {} on branch {} (`cadre worktrees prune` removes it)",
                self.path.display(),
                self.branch
            ))
        })
    }

    async fn drop_branch(&self) -> Result<(), WorktreeError> {
        git(
            &self.spec.toplevel,
            &["branch", "-D", "--quiet", &self.branch],
        )
        .await
        .map(drop)
    }

    async fn close_now(&self) -> Result<(), WorktreeError> {
        self.mark_closed();
        let path = self.path.to_string_lossy().into_owned();
        git(
            &self.spec.toplevel,
            &["worktree", "remove", "--force", &path],
        )
        .await?;
        Ok(())
    }
}

/// The branch of worktree `name` (`task_<uuid>` or `agent_<uuid>`):
/// `cadre/<agent>/<first 8 characters of the uuid>`.
fn branch_of(name: &str, agent: &str) -> String {
    let short: String = name
        .rsplit('_')
        .next()
        .unwrap_or(name)
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect();
    format!("{BRANCH_PREFIX}{agent}/{short}")
}

/// The worktree name of the live child with agent key `key` (`agent:<id>:<uuid>`):
/// `agent_<uuid>`, the same in every process, so a restored child finds its worktree.
pub fn live_name(key: &str) -> String {
    let uuid = key.rsplit(':').next().unwrap_or(key);
    let safe: String = uuid
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    format!("agent_{safe}")
}

/// Commit everything in the worktree at `work_tree` (if anything changed) and return HEAD.
pub async fn commit_all(
    git_dir: &Path,
    work_tree: &Path,
    message: &str,
) -> Result<String, WorktreeError> {
    let gd = format!("--git-dir={}", git_dir.display());
    let wt = format!("--work-tree={}", work_tree.display());
    let on_tree = |args: &[&str]| -> Vec<String> {
        [gd.as_str(), wt.as_str()]
            .iter()
            .chain(args)
            .map(std::string::ToString::to_string)
            .collect()
    };
    // cadre's own state in the child's root (offloaded tool outputs) is not the child's work.
    git_owned(
        work_tree,
        on_tree(&["add", "--all", "--", ".", ":(exclude,glob)**/.cadre/**"]),
    )
    .await?;
    let status = git_owned(
        work_tree,
        on_tree(&["status", "--porcelain", "--untracked-files=no"]),
    )
    .await?;
    if !status.trim().is_empty() {
        // A repository without an identity still gets the commit, under cadre's name.
        let anonymous = git_owned(work_tree, on_tree(&["config", "user.email"]))
            .await
            .is_err();
        let identity: &[&str] = if anonymous {
            &["-c", "user.name=cadre", "-c", "user.email=cadre@localhost"]
        } else {
            &[]
        };
        let mut args: Vec<&str> = identity.to_vec();
        args.extend(["commit", "--quiet", "--no-verify", "-m", message]);
        git_owned(work_tree, on_tree(&args)).await?;
    }
    Ok(git_owned(work_tree, on_tree(&["rev-parse", "HEAD"]))
        .await?
        .trim()
        .to_string())
}

async fn git_owned(dir: &Path, args: Vec<String>) -> Result<String, WorktreeError> {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    git(dir, &refs).await
}

/// Held while a `git worktree` command runs: `worktree add`, `remove` and `prune` read
/// every worktree's entry under `.git/worktrees/`, and two at once in one repository race
/// (one reads the other's half-written entry and fails: "failed to read .../commondir").
static WORKTREE_LIST: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Run `git args` in `dir` with hooks and the file-system monitor off and git's own
/// environment variables cleared; stdout (bounded) on success. `git worktree` commands of
/// this process run one at a time.
pub async fn git(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    let _one_at_a_time = match args.first() {
        Some(&"worktree") => Some(WORKTREE_LIST.lock().await),
        _ => None,
    };
    let command = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .copied()
        .unwrap_or("")
        .to_string();
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
        ])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_COMMON_DIR",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
    ] {
        cmd.env_remove(var);
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

fn failed(command: &str, message: String) -> WorktreeError {
    WorktreeError::Git {
        command: command.to_string(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_git_holds_a_small_future() {
        // Every future that may run git holds this one: a fan-out's waiting `task` calls
        // did (18 KB each, with two 8 KB read buffers in it).
        let size = std::mem::size_of_val(&git(Path::new("."), &["status"]));
        assert!(size < 2048, "running git holds {size} bytes");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn many_worktrees_made_and_removed_at_once_in_one_repository_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        for args in [
            &["init", "--quiet"][..],
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "--quiet",
                "--allow-empty",
                "-m",
                "base",
            ],
        ] {
            git(repo, args).await.unwrap();
        }
        let spec = WorktreeSpec::prepare(repo, repo).await.unwrap();
        let made = futures::future::join_all((0..48).map(|i| {
            let spec = spec.clone();
            async move {
                let name = format!("task_{i:08}-0000-0000-0000-000000000000");
                let wt = Worktree::create(&spec, &name, "editor").await?;
                wt.close_now().await?;
                Ok::<_, WorktreeError>(())
            }
        }))
        .await;
        let failures: Vec<String> = made
            .into_iter()
            .filter_map(|r| r.err().map(|e| e.to_string()))
            .collect();
        assert!(failures.is_empty(), "{failures:?}");
    }
}
