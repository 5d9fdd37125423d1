//! The Agent2Agent (A2A) protocol as cadre speaks it: protocol versions, task states and
//! their mapping to cadre's task statuses, the JSON shapes of tasks, messages and stream
//! events, and the agent card.
//!
//! Two generations of the JSON-RPC binding are in use. v1.0 (method names `SendMessage`,
//! ...) follows the protobuf JSON mapping: states `TASK_STATE_*`, roles `ROLE_*`, parts
//! without a discriminator, results wrapped by kind (`{"task": …}`, `{"statusUpdate": …}`).
//! v0.3 (`message/send`, ...) uses lowercase states, `user`/`agent` roles and a `kind`
//! discriminator on every object. The server answers in the version the request negotiates
//! with `A2A-Version` (absent: v0.3), whatever the method name; the client follows the version
//! the agent card declares.

pub mod card;
pub mod parse;
pub mod parts;
pub mod render;
pub mod usage;

use cadre_subagents::TaskStatus;

/// The header (and query parameter) naming the protocol version of a request.
pub const VERSION_HEADER: &str = "A2A-Version";

/// The versions the server speaks, as an `A2A-Version` value each.
pub const SUPPORTED_VERSIONS: [&str; 2] = ["1.0", "0.3"];

/// A version of the A2A JSON-RPC binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// v1.0: `SendMessage`, `TASK_STATE_*`, protobuf JSON.
    V1,
    /// v0.3: `message/send`, lowercase states, `kind` discriminators.
    V03,
}

impl Version {
    /// The value of the `A2A-Version` header and of the card's `protocolVersion`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "1.0",
            Version::V03 => "0.3.0",
        }
    }

    /// The version a request asks for with `A2A-Version`: absent or empty means v0.3 (the
    /// spec's rule for clients from before the header); otherwise major and minor must be
    /// `1.0` or `0.3` (any patch). `None`: a version this server does not speak.
    pub fn negotiate(requested: Option<&str>) -> Option<Version> {
        let Some(v) = requested.map(str::trim).filter(|v| !v.is_empty()) else {
            return Some(Version::V03);
        };
        let mut it = v.split('.');
        let major = it.next()?.parse::<u32>().ok()?;
        let minor = it.next().map_or(Some(0), |m| m.parse::<u32>().ok())?;
        if let Some(patch) = it.next() {
            patch.parse::<u32>().ok()?;
        }
        if it.next().is_some() {
            return None;
        }
        match (major, minor) {
            (1, 0) => Some(Version::V1),
            (0, 3) => Some(Version::V03),
            _ => None,
        }
    }

    /// Read a `protocolVersion` (`1.0`, `1.0.0`, `0.3.0`, ...); `None` for other versions.
    pub fn parse(s: &str) -> Option<Version> {
        let mut it = s.trim().split('.');
        let major = it.next()?.parse::<u32>().ok()?;
        let minor = it.next().map_or(Some(0), |m| m.parse::<u32>().ok())?;
        match (major, minor) {
            (0, m) if m >= 3 => Some(Version::V03),
            (1, _) => Some(Version::V1),
            _ => None,
        }
    }
}

/// An A2A task state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum A2aState {
    /// Accepted, not started.
    Submitted,
    /// Being worked on.
    Working,
    /// The agent waits for more input from the caller.
    InputRequired,
    /// The agent waits for authentication.
    AuthRequired,
    /// Finished.
    Completed,
    /// Failed.
    Failed,
    /// Cancelled.
    Canceled,
    /// The agent refused the task.
    Rejected,
    /// Unknown or unspecified.
    Unknown,
}

impl A2aState {
    /// Every state, for tests and parsing.
    pub const ALL: [A2aState; 9] = [
        A2aState::Submitted,
        A2aState::Working,
        A2aState::InputRequired,
        A2aState::AuthRequired,
        A2aState::Completed,
        A2aState::Failed,
        A2aState::Canceled,
        A2aState::Rejected,
        A2aState::Unknown,
    ];

    /// The name in a version's JSON.
    pub fn wire(self, version: Version) -> &'static str {
        match version {
            Version::V1 => match self {
                A2aState::Submitted => "TASK_STATE_SUBMITTED",
                A2aState::Working => "TASK_STATE_WORKING",
                A2aState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
                A2aState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
                A2aState::Completed => "TASK_STATE_COMPLETED",
                A2aState::Failed => "TASK_STATE_FAILED",
                A2aState::Canceled => "TASK_STATE_CANCELED",
                A2aState::Rejected => "TASK_STATE_REJECTED",
                A2aState::Unknown => "TASK_STATE_UNSPECIFIED",
            },
            Version::V03 => match self {
                A2aState::Submitted => "submitted",
                A2aState::Working => "working",
                A2aState::InputRequired => "input-required",
                A2aState::AuthRequired => "auth-required",
                A2aState::Completed => "completed",
                A2aState::Failed => "failed",
                A2aState::Canceled => "canceled",
                A2aState::Rejected => "rejected",
                A2aState::Unknown => "unknown",
            },
        }
    }

    /// Read a state written in either version (also `cancelled` and `input_required`).
    pub fn parse(s: &str) -> A2aState {
        let norm = s
            .trim()
            .trim_start_matches("TASK_STATE_")
            .to_ascii_lowercase()
            .replace('_', "-");
        match norm.as_str() {
            "submitted" => A2aState::Submitted,
            "working" => A2aState::Working,
            "input-required" => A2aState::InputRequired,
            "auth-required" => A2aState::AuthRequired,
            "completed" => A2aState::Completed,
            "failed" => A2aState::Failed,
            "canceled" | "cancelled" => A2aState::Canceled,
            "rejected" => A2aState::Rejected,
            _ => A2aState::Unknown,
        }
    }

    /// True when the task will not change any more.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            A2aState::Completed | A2aState::Failed | A2aState::Canceled | A2aState::Rejected
        )
    }

    /// True when the task stopped to wait for the caller (input or authentication).
    pub fn is_interrupted(self) -> bool {
        matches!(self, A2aState::InputRequired | A2aState::AuthRequired)
    }

    /// The A2A state of a cadre task status.
    pub fn from_status(status: TaskStatus) -> A2aState {
        match status {
            TaskStatus::Pending => A2aState::Submitted,
            TaskStatus::Running => A2aState::Working,
            TaskStatus::Completed => A2aState::Completed,
            TaskStatus::Failed => A2aState::Failed,
            TaskStatus::Cancelled => A2aState::Canceled,
        }
    }

    /// The cadre task statuses an A2A state filter selects (a task waiting for its
    /// caller's approval is running).
    pub fn statuses(self) -> &'static [TaskStatus] {
        match self {
            A2aState::Submitted => &[TaskStatus::Pending],
            A2aState::Working | A2aState::InputRequired => &[TaskStatus::Running],
            A2aState::Completed => &[TaskStatus::Completed],
            A2aState::Failed => &[TaskStatus::Failed],
            A2aState::Canceled => &[TaskStatus::Cancelled],
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_in_both_versions() {
        for s in A2aState::ALL {
            for v in [Version::V1, Version::V03] {
                assert_eq!(A2aState::parse(s.wire(v)), s, "{s:?} in {v:?}");
            }
        }
        assert_eq!(A2aState::parse("cancelled"), A2aState::Canceled);
    }

    #[test]
    fn cadre_statuses_map_to_a2a_and_back() {
        for st in TaskStatus::ALL {
            let a = A2aState::from_status(st);
            assert!(a.statuses().contains(&st), "{st} -> {a:?}");
            assert_eq!(a.is_terminal(), st.is_terminal());
        }
    }

    #[test]
    fn versions_parse() {
        assert_eq!(Version::parse("1.0"), Some(Version::V1));
        assert_eq!(Version::parse("1.0.0"), Some(Version::V1));
        assert_eq!(Version::parse("0.3.0"), Some(Version::V03));
        assert_eq!(Version::parse("0.2.5"), None);
        assert_eq!(Version::parse("x"), None);
    }

    #[test]
    fn requests_negotiate_major_and_minor() {
        assert_eq!(Version::negotiate(None), Some(Version::V03));
        assert_eq!(Version::negotiate(Some(" ")), Some(Version::V03));
        assert_eq!(Version::negotiate(Some("1.0")), Some(Version::V1));
        assert_eq!(Version::negotiate(Some("1")), Some(Version::V1));
        assert_eq!(Version::negotiate(Some("1.0.2")), Some(Version::V1));
        assert_eq!(Version::negotiate(Some("0.3")), Some(Version::V03));
        assert_eq!(Version::negotiate(Some("0.3.0")), Some(Version::V03));
        for bad in ["99.0", "1.1", "0.2", "2", "x", "1.0.0.0", "1.x", "-1.0"] {
            assert_eq!(Version::negotiate(Some(bad)), None, "{bad}");
        }
    }
}
