//! Task states and the one transition rule.
//!
//! The rule is written twice on purpose: once here, for callers that want to ask before
//! writing, and once as the `WHERE` clause of the store's conditional `UPDATE` (see
//! `sql::tasks`), which is what actually decides. The exhaustive table test checks that both
//! agree.

use serde::{Deserialize, Serialize};

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// Accepted, waiting for a concurrency slot.
    Pending,
    /// The child is running.
    Running,
    /// The child finished its job.
    Completed,
    /// The child failed, hit a limit, or its executor was lost.
    Failed,
    /// The child was cancelled.
    Cancelled,
}

impl TaskStatus {
    /// All states, for exhaustive tests and filters.
    pub const ALL: [TaskStatus; 5] = [
        TaskStatus::Pending,
        TaskStatus::Running,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];

    /// The terminal states.
    pub const TERMINAL: [TaskStatus; 3] = [
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];

    /// Lower-case name, as stored (`pending`, `running`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Parse a lower-case name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// True for completed, failed and cancelled.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// The transition rule. `cancel_requested` is the record's cancel flag.
    ///
    /// Terminal states never change; once cancellation is requested only terminal states may
    /// be written; `pending → running`; `pending | running →` any terminal state.
    pub fn can_become(self, to: TaskStatus, cancel_requested: bool) -> bool {
        if self.is_terminal() {
            return false;
        }
        if cancel_requested && !to.is_terminal() {
            return false;
        }
        match (self, to) {
            (TaskStatus::Pending, TaskStatus::Running) => true,
            (TaskStatus::Pending | TaskStatus::Running, t) => t.is_terminal(),
            _ => false,
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in TaskStatus::ALL {
            assert_eq!(TaskStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(TaskStatus::parse("Running"), None);
    }

    #[test]
    fn terminal_never_changes_and_cancel_blocks_running() {
        for from in TaskStatus::TERMINAL {
            for to in TaskStatus::ALL {
                assert!(!from.can_become(to, false));
            }
        }
        assert!(TaskStatus::Pending.can_become(TaskStatus::Running, false));
        assert!(!TaskStatus::Pending.can_become(TaskStatus::Running, true));
        assert!(TaskStatus::Running.can_become(TaskStatus::Cancelled, true));
        assert!(!TaskStatus::Running.can_become(TaskStatus::Pending, false));
    }
}
