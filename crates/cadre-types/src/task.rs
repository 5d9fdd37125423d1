//! Task states, the one transition rule, and how a run's end becomes a task's end.
//!
//! The rule is written twice on purpose: once here, for callers that want to ask before
//! writing, and once as the `WHERE` clause of the task store's conditional `UPDATE`, which is
//! what actually decides. The store's exhaustive table test checks that both agree.

use crate::event::{EndState, LimitKind};
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

/// How a task ends when its run ends in `EndState`: the one mapping, used by the local
/// runtime and by adopted remote tasks alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutcome {
    /// The terminal status (a limit is a failure whose output is partial).
    pub status: TaskStatus,
    /// Why it failed, for failures and limits.
    pub error: Option<String>,
    /// The stored end state ([`end_state_text`]).
    pub end_state: String,
}

impl From<&EndState> for TaskOutcome {
    fn from(end: &EndState) -> Self {
        let (status, error) = match end {
            EndState::Completed => (TaskStatus::Completed, None),
            EndState::Cancelled => (TaskStatus::Cancelled, None),
            EndState::Failed { error } => (TaskStatus::Failed, Some(error.clone())),
            EndState::LimitReached { limit } => (
                TaskStatus::Failed,
                Some(format!("limit reached ({limit}); the result is partial")),
            ),
        };
        TaskOutcome {
            status,
            error,
            end_state: end_state_text(end),
        }
    }
}

/// The stored form of a run's end: `completed`, `failed`, `cancelled`, or
/// `limit_reached:<limit>` with the limit in snake case (`limit_reached:max_turns`).
pub fn end_state_text(end: &EndState) -> String {
    match end {
        EndState::LimitReached { limit } => format!("limit_reached:{}", limit_name(*limit)),
        other => other.name().to_string(),
    }
}

/// The inverse of [`end_state_text`]; a failure takes `error` as its reason. `None` for text
/// that names no end state.
pub fn parse_end_state(text: &str, error: Option<&str>) -> Option<EndState> {
    Some(match text {
        "completed" => EndState::Completed,
        "cancelled" => EndState::Cancelled,
        "failed" => EndState::Failed {
            error: error.unwrap_or_default().to_string(),
        },
        other => {
            let name = other.strip_prefix("limit_reached:")?;
            let limit = serde_json::from_value(serde_json::Value::String(name.into())).ok()?;
            EndState::LimitReached { limit }
        }
    })
}

/// A limit's snake-case name, as serde writes it (so a new limit needs no edit here).
fn limit_name(limit: LimitKind) -> String {
    serde_json::to_value(limit)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskStatus::*;

    #[test]
    fn names_round_trip() {
        for s in TaskStatus::ALL {
            assert_eq!(TaskStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(TaskStatus::parse("Running"), None);
    }

    #[test]
    fn transition_table_is_exhaustive() {
        for from in TaskStatus::ALL {
            for to in TaskStatus::ALL {
                for cancel in [false, true] {
                    let expected = match (from, to) {
                        _ if from.is_terminal() => false,
                        (_, t) if cancel && !t.is_terminal() => false,
                        (Pending, Running) => true,
                        (Pending | Running, t) => t.is_terminal(),
                        _ => false,
                    };
                    assert_eq!(
                        from.can_become(to, cancel),
                        expected,
                        "{from} -> {to} (cancel={cancel})"
                    );
                }
            }
        }
        assert!(!Completed.can_become(Failed, false));
        assert!(!Running.can_become(Running, false));
        assert!(
            Running.can_become(Completed, true),
            "a racing terminal state may land"
        );
    }

    #[test]
    fn end_states_map_to_outcomes_and_round_trip() {
        let limit = EndState::LimitReached {
            limit: LimitKind::MaxTurns,
        };
        let o = TaskOutcome::from(&limit);
        assert_eq!(o.status, Failed);
        assert_eq!(o.end_state, "limit_reached:max_turns");
        assert!(o.error.unwrap().contains("partial"));
        assert_eq!(TaskOutcome::from(&EndState::Cancelled).status, Cancelled);
        let failed = EndState::Failed { error: "x".into() };
        assert_eq!(TaskOutcome::from(&failed).error.as_deref(), Some("x"));
        for end in [
            EndState::Completed,
            EndState::Cancelled,
            failed,
            limit,
            EndState::LimitReached {
                limit: LimitKind::Tokens,
            },
            EndState::LimitReached {
                limit: LimitKind::WallClock,
            },
            EndState::LimitReached {
                limit: LimitKind::Cost,
            },
        ] {
            let text = end_state_text(&end);
            assert_eq!(parse_end_state(&text, Some("x")), Some(end), "{text}");
        }
        let reply = EndState::LimitReached {
            limit: LimitKind::ReplyTooLong,
        };
        assert_eq!(end_state_text(&reply), "limit_reached:reply_too_long");
        assert_eq!(
            parse_end_state("limit_reached:reply_too_long", None),
            Some(reply)
        );
        assert_eq!(parse_end_state("limit_reached:sideways", None), None);
    }
}
