//! Git worktree isolation: a child runs in a fresh `git worktree` on its own branch, made from
//! its parent's HEAD, and its changes come back as a commit on that branch. The parent's
//! working tree and index are never touched: every command that changes something runs on
//! the child's worktree (its own index) or on refs.
//!
//! cadre runs `git` itself, outside any sandbox, on a tree a model wrote: every run is
//! hardened ([`git`](mod@git)), and the worktree's commands name its git directory from
//! cadre's records after checking its links ([`link`]), never following a `.git` file the
//! child could have replaced.

mod git;
mod link;
mod report;

pub use git::{Repo, Target, git};
pub use link::{check, commit_all};
pub use report::WorktreeReport;

use git::failed;
use std::path::{Path, PathBuf};

/// Where worktrees go, under the main workspace.
pub const WORKTREES_DIR: &str = ".cadre/worktrees";
/// The prefix of worktree branches: `cadre/<agent>/<short id>`.
pub const BRANCH_PREFIX: &str = "cadre/";
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
    /// The worktree's links are not those cadre made: a child rewrote its `.git` file (or
    /// git's record of it). cadre runs nothing in it.
    #[error(
        "the worktree {path} no longer links to the git directory cadre made for it ({why}); \
         cadre refuses to commit, diff or remove it and ran nothing in it"
    )]
    Tampered {
        /// The worktree.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
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
    /// The repository, as the main workspace names it.
    pub repo: Repo,
    /// The git directory the parent's HEAD is read from (a worktree's admin directory for
    /// a nested child).
    pub parent_git_dir: PathBuf,
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
        let not_git = || WorktreeError::NotGit(parent_root.to_path_buf());
        let repo = Repo::of_workspace(main).await.map_err(|_| not_git())?;
        let root = parent_root.canonicalize().map_err(|_| not_git())?;
        let (toplevel, parent_git_dir) = match in_worktree(main, &root) {
            // A nested child: its parent works in a worktree cadre made, whose links are
            // checked (the parent could have rewritten its `.git`).
            Some((toplevel, name)) => {
                let admin = repo.admin_dir(&name);
                check(&repo, &toplevel, &admin).await?;
                (toplevel, admin)
            }
            None => {
                let top = git(
                    main,
                    &["rev-parse", "--show-toplevel", "--absolute-git-dir"],
                )
                .await
                .map_err(|_| not_git())?;
                let mut lines = top.lines();
                let toplevel = lines.next().map(|l| PathBuf::from(l.trim()));
                let git_dir = lines.next().map(|l| PathBuf::from(l.trim()));
                match (toplevel.and_then(|t| t.canonicalize().ok()), git_dir) {
                    (Some(t), Some(g)) => (t, g),
                    _ => return Err(not_git()),
                }
            }
        };
        let head = Target {
            git_dir: &parent_git_dir,
            work_tree: None,
        };
        let base = repo
            .run_on(head, &["rev-parse", "--verify", "HEAD^{commit}"])
            .await
            .map_err(|_| WorktreeError::NoCommit(toplevel.clone()))?
            .trim()
            .to_string();
        let rel = root
            .strip_prefix(&toplevel)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Ok(Self {
            repo,
            parent_git_dir,
            toplevel,
            base,
            rel,
            main: main.to_path_buf(),
        })
    }
}

/// The worktree cadre made that `root` lies in (its top level and name), if any.
fn in_worktree(main: &Path, root: &Path) -> Option<(PathBuf, String)> {
    let dir = main.join(WORKTREES_DIR).canonicalize().ok()?;
    let name = root.strip_prefix(&dir).ok()?.components().next()?;
    let name = name.as_os_str().to_str()?.to_string();
    Some((dir.join(&name), name))
}

/// A child's worktree. A one-off child's lasts for its task ([`finish`](Self::finish)); a
/// live child's for the child's whole life: each task's changes are
/// [recorded](Self::record) on the branch, and [`close`](Self::close) removes it.
#[derive(Debug)]
pub struct Worktree {
    spec: WorktreeSpec,
    /// `<main>/.cadre/worktrees/<name>`.
    path: PathBuf,
    /// Its admin directory (`.git/worktrees/<name>` of the repository), from cadre's
    /// records: never read from the worktree's `.git` file.
    git_dir: PathBuf,
    /// `cadre/<agent>/<short id>`.
    branch: String,
    /// Set once the worktree is closed: no task may run in it any more.
    closed: std::sync::atomic::AtomicBool,
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
        spec.repo
            .run(&[
                "worktree", "add", "--quiet", "-b", &branch, &path_arg, &spec.base,
            ])
            .await?;
        let path = path
            .canonicalize()
            .map_err(|e| failed("worktree add", e.to_string()))?;
        let worktree = Self {
            spec: spec.clone(),
            path,
            git_dir: spec.repo.admin_dir(name),
            branch,
            closed: Default::default(),
        };
        // git names the admin directory after the worktree's directory; one of another
        // name (a stale entry in the way) is not the record cadre keeps.
        worktree.check().await?;
        Ok(worktree)
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
            && spec
                .repo
                .run(&["rev-parse", "--verify", "--quiet", &reference])
                .await
                .is_err()
        {
            return Ok(None);
        }
        let worktree = Self {
            spec: spec.clone(),
            git_dir: spec.repo.admin_dir(name),
            path,
            branch,
            closed: Default::default(),
        };
        worktree.ensure().await.map(Some)
    }

    /// Make sure the worktree's directory exists (it is added back on its branch when
    /// `cadre worktrees prune` or a person removed it), and that its links are still the
    /// ones git made: a worktree whose `.git` a child rewrote is refused, not followed.
    async fn ensure(mut self) -> Result<Self, WorktreeError> {
        if !self.path.is_dir() {
            // A removed worktree is still registered until git prunes it.
            self.spec.repo.run(&["worktree", "prune"]).await?;
            let path_arg = self.path.to_string_lossy().into_owned();
            self.spec
                .repo
                .run(&["worktree", "add", "--quiet", &path_arg, &self.branch])
                .await?;
        }
        self.path = self
            .path
            .canonicalize()
            .map_err(|e| failed("worktree add", e.to_string()))?;
        self.check().await?;
        Ok(self)
    }

    /// Refuse a worktree whose links are not the ones cadre made.
    async fn check(&self) -> Result<(), WorktreeError> {
        check(&self.spec.repo, &self.path, &self.git_dir).await
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
            self.check().await?;
            let commit = commit_all(&self.spec.repo, &self.git_dir, &self.path, message).await?;
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
        self.check().await?;
        let commit = commit_all(&self.spec.repo, &self.git_dir, &self.path, message).await?;
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
        let diffstat = self
            .spec
            .repo
            .run(&[
                "diff",
                "--stat",
                STAT_FILES,
                "--no-ext-diff",
                "--no-textconv",
                "--ignore-submodules=all",
                base,
                &commit,
            ])
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
            // A tampered worktree is refused by prune too: a person has to look at it.
            let next = match e {
                WorktreeError::Tampered { .. } => "review it before removing it by hand",
                _ => "`cadre worktrees prune` removes it",
            };
            WorktreeReport::Failed(format!(
                "{e}; the worktree is left at {} on branch {} ({next})",
                self.path.display(),
                self.branch
            ))
        })
    }

    async fn drop_branch(&self) -> Result<(), WorktreeError> {
        self.spec
            .repo
            .run(&["branch", "-D", "--quiet", &self.branch])
            .await
            .map(drop)
    }

    async fn close_now(&self) -> Result<(), WorktreeError> {
        self.mark_closed();
        self.check().await?;
        let path = self.path.to_string_lossy().into_owned();
        // `--force` also skips git's own check that the worktree is clean, which would run
        // `git status` in it with the worktree's attributes.
        self.spec
            .repo
            .run(&["worktree", "remove", "--force", &path])
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Makes `path` a repository with one empty commit, `base`.
    pub(super) async fn init_repo(path: &Path) {
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
            git(path, args).await.unwrap();
        }
    }

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
        init_repo(repo).await;
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
