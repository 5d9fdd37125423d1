//! What became of a child's worktree, as its parent reads it.

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
