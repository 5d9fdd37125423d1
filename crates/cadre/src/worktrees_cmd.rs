//! `cadre worktrees list | prune`: the worktrees and branches `isolation: worktree` left
//! behind (after a crash, or the branches of finished children), and their clean-up.

use crate::cli::{Cli, WorktreesCommand};
use crate::config;
use crate::setup::{open_store, workspace_root};
use crate::stdout::out;
use anyhow::{Context, Result};
use cadre_store::TaskStatus;
use cadre_subagents::runtime::worktree::{
    BRANCH_PREFIX, Repo, WORKTREES_DIR, check, commit_all, git,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A worktree under `.cadre/worktrees/`.
struct Leftover {
    path: PathBuf,
    /// The task it was made for (its directory name; `agent_<uuid>` for a live child).
    task_id: String,
    branch: Option<String>,
}

impl Leftover {
    /// A live child's worktree (`agent_<uuid>`): it lasts until the child is closed.
    fn is_live_child(&self) -> bool {
        self.task_id.starts_with("agent_")
    }
}

/// Run `cadre worktrees ...`.
pub async fn run(cli: &Cli, cmd: &WorktreesCommand) -> Result<ExitCode> {
    let ws = workspace_root(cli)?;
    git(&ws, &["rev-parse", "--show-toplevel"])
        .await
        .with_context(|| format!("{} is not inside a git repository", ws.display()))?;
    let leftovers = worktrees(&ws).await?;
    let branches = branches(&ws).await?;
    let config = config::load(&ws, cli.config.as_deref())?;
    let store = open_store(&ws, &config.store).await?;
    let mut running = Vec::new();
    for w in &leftovers {
        let live = matches!(
            store.get(&w.task_id).await,
            Ok(Some(r)) if matches!(r.status, TaskStatus::Pending | TaskStatus::Running)
        );
        running.push(live);
    }
    match cmd {
        WorktreesCommand::List => {
            if leftovers.is_empty() && branches.is_empty() {
                out!("no cadre worktrees or branches")?;
            }
            for (w, live) in leftovers.iter().zip(&running) {
                out!(
                    "worktree  {}  {}  {}",
                    display(&ws, &w.path),
                    w.branch.as_deref().unwrap_or("(detached)"),
                    match (*live, w.is_live_child()) {
                        (true, _) => "task running",
                        (false, true) => "live child",
                        (false, false) => "leftover",
                    }
                )?;
            }
            for (b, subject) in &branches {
                out!("branch    {b}  {subject}")?;
            }
        }
        WorktreesCommand::Prune => {
            let repo = Repo::of_workspace(&ws).await?;
            let mut refused = false;
            for (w, live) in leftovers.iter().zip(&running) {
                if *live {
                    progress(format_args!(
                        "kept {} (its task is running)",
                        display(&ws, &w.path)
                    ));
                    continue;
                }
                if w.is_live_child() {
                    progress(format_args!(
                        "kept {} (a live child's: agent_close removes it, or `git worktree remove`)",
                        display(&ws, &w.path)
                    ));
                    continue;
                }
                refused |= !prune_worktree(&ws, &repo, w).await?;
            }
            repo.run(&["worktree", "prune"]).await?;
            for (b, _) in &branches {
                // A branch whose tip is already in HEAD's history holds nothing of its own.
                let merged = repo
                    .run(&["merge-base", "--is-ancestor", b, "HEAD"])
                    .await
                    .is_ok();
                let in_use = leftovers.iter().zip(&running).any(|(w, live)| {
                    (*live || w.is_live_child()) && w.branch.as_deref() == Some(b.as_str())
                });
                if merged && !in_use {
                    repo.run(&["branch", "-D", "--quiet", b]).await?;
                    progress(format_args!("deleted branch {b} (no commits of its own)"));
                }
            }
            if refused {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Commit what a leftover worktree holds onto its branch, then remove it; false (and
/// nothing run in it) when its links are no longer the ones cadre made.
async fn prune_worktree(ws: &Path, repo: &Repo, w: &Leftover) -> Result<bool> {
    // The admin directory from the repository's records, never from the worktree's `.git`.
    let admin = repo.admin_dir(&w.task_id);
    if let Err(e) = check(repo, &w.path, &admin).await {
        eprintln!("kept {}: {e}", display(ws, &w.path));
        return Ok(false);
    }
    if let Some(branch) = &w.branch {
        let message = format!("cadre: work left in the worktree of {} (pruned)", w.task_id);
        let commit = commit_all(repo, &admin, &w.path, &message).await?;
        progress(format_args!(
            "committed what was left in {} on {branch} ({})",
            display(ws, &w.path),
            &commit[..commit.len().min(12)]
        ));
    }
    let path = w.path.to_string_lossy().into_owned();
    repo.run(&["worktree", "remove", "--force", &path]).await?;
    progress(format_args!("removed {}", display(ws, &w.path)));
    Ok(true)
}

/// The worktrees of the repository under `<ws>/.cadre/worktrees/`.
async fn worktrees(ws: &Path) -> Result<Vec<Leftover>> {
    let dir = ws.join(WORKTREES_DIR);
    let dir = dir.canonicalize().unwrap_or(dir);
    let text = git(ws, &["worktree", "list", "--porcelain"]).await?;
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut path = None;
        let mut branch = None;
        for line in block.lines() {
            if let Some(p) = line.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if let Some(b) = line.strip_prefix("branch refs/heads/") {
                branch = Some(b.to_string());
            }
        }
        if let Some(p) = path
            && p.parent() == Some(dir.as_path())
            && let Some(name) = p.file_name().and_then(|n| n.to_str())
        {
            out.push(Leftover {
                task_id: name.to_string(),
                path: p.clone(),
                branch,
            });
        }
    }
    Ok(out)
}

/// The `cadre/*` branches with the subject of their tip.
async fn branches(ws: &Path) -> Result<Vec<(String, String)>> {
    let pattern = format!("refs/heads/{}", BRANCH_PREFIX.trim_end_matches('/'));
    let text = git(
        ws,
        &[
            "for-each-ref",
            "--format=%(refname:short)%09%(subject)",
            &pattern,
        ],
    )
    .await?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(b, s)| (b.to_string(), s.to_string()))
        .collect())
}

fn display(ws: &Path, p: &Path) -> String {
    p.strip_prefix(ws)
        .map(|r| r.display().to_string())
        .unwrap_or_else(|_| p.display().to_string())
}

/// A line of what a prune did. The prune goes on when nobody reads stdout any more
/// (`cadre worktrees prune | head -1`): stopping half-way would leave a worktree committed
/// but not removed.
fn progress(line: std::fmt::Arguments<'_>) {
    let _ = out!("{line}");
}
