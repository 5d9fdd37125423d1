//! A child job's worktree steps: made when its task gets its slot, settled (committed,
//! and for a one-off child removed) after its run, with the report the parent reads.

use crate::runtime::child_job::ChildJob;
use crate::runtime::worktree::Worktree;
use crate::runtime::{Child, JobChild};
use cadre_types::EndState;

impl ChildJob {
    /// After the child's run: commit what it changed in its worktree, naming the task. A
    /// one-off child's worktree is then removed; a live child's stays for its next message.
    /// The report the parent reads, when the child has a worktree.
    pub(super) async fn settle_worktree(&self, child: &Child, state: &EndState) -> Option<String> {
        let w = child.worktree.as_ref()?;
        let failure = match state {
            EndState::Completed => None,
            EndState::Cancelled => Some("was cancelled"),
            EndState::Failed { .. } => Some("failed"),
            EndState::LimitReached { .. } => Some("stopped at a limit"),
        };
        let message = format!(
            "cadre: {} task {}\n\n{}",
            child.name, self.task_id, self.description
        );
        let report = if self.one_off {
            w.finish(failure, &message).await
        } else {
            w.record(failure, &message).await
        };
        Some(report.render())
    }

    /// The worktree of a planned child with `isolation: worktree`, made now that it runs.
    pub(super) async fn make_worktree(&self) -> Result<Option<Worktree>, String> {
        let JobChild::Planned(plan) = &self.child else {
            return Ok(None);
        };
        let Some(spec) = &plan.worktree else {
            return Ok(None);
        };
        Worktree::create(spec, &self.task_id, &plan.agent)
            .await
            .map(Some)
            .map_err(|e| format!("agent {}: {e}", plan.agent))
    }
}
