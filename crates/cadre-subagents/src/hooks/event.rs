//! The hook events cadre fires, by their Claude Code names, and what each may do.

use std::time::Duration;

/// A point in an agent's life where hooks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookEvent {
    /// A session starts (or is resumed).
    SessionStart,
    /// A session ends.
    SessionEnd,
    /// The user's prompt is about to be sent.
    UserPromptSubmit,
    /// A tool call is about to run.
    PreToolUse,
    /// A tool call waits for an approval.
    PermissionRequest,
    /// A tool call succeeded.
    PostToolUse,
    /// A tool call failed.
    PostToolUseFailure,
    /// The model finished answering.
    Stop,
    /// A sub-agent starts.
    SubagentStart,
    /// A sub-agent ended.
    SubagentStop,
    /// The conversation is about to be compacted.
    PreCompact,
    /// cadre tells the user something.
    Notification,
    /// An item is about to be added to a team's board.
    TaskCreated,
    /// A team's board item is about to be marked done.
    TaskCompleted,
    /// A team member finished its task and waits for the next.
    TeammateIdle,
}

impl HookEvent {
    /// Every event, in the order `cadre hooks list` shows them.
    pub const ALL: [HookEvent; 15] = [
        Self::SessionStart,
        Self::SessionEnd,
        Self::UserPromptSubmit,
        Self::PreToolUse,
        Self::PermissionRequest,
        Self::PostToolUse,
        Self::PostToolUseFailure,
        Self::Stop,
        Self::SubagentStart,
        Self::SubagentStop,
        Self::PreCompact,
        Self::Notification,
        Self::TaskCreated,
        Self::TaskCompleted,
        Self::TeammateIdle,
    ];

    /// The event's name in settings files and in `hook_event_name`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionStart => "SessionStart",
            Self::SessionEnd => "SessionEnd",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PreToolUse => "PreToolUse",
            Self::PermissionRequest => "PermissionRequest",
            Self::PostToolUse => "PostToolUse",
            Self::PostToolUseFailure => "PostToolUseFailure",
            Self::Stop => "Stop",
            Self::SubagentStart => "SubagentStart",
            Self::SubagentStop => "SubagentStop",
            Self::PreCompact => "PreCompact",
            Self::Notification => "Notification",
            Self::TaskCreated => "TaskCreated",
            Self::TaskCompleted => "TaskCompleted",
            Self::TeammateIdle => "TeammateIdle",
        }
    }

    /// The event named `name` (exact spelling, as Claude Code requires).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// True for events whose handlers may stop what is about to happen (exit code 2).
    pub fn can_block(self) -> bool {
        matches!(
            self,
            Self::PreToolUse
                | Self::UserPromptSubmit
                | Self::Stop
                | Self::SubagentStop
                | Self::PreCompact
                | Self::TaskCreated
                | Self::TaskCompleted
        )
    }

    /// True for events matched against a tool's name.
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            Self::PreToolUse
                | Self::PermissionRequest
                | Self::PostToolUse
                | Self::PostToolUseFailure
        )
    }

    /// How long a handler of this event may run when its `timeout` is not set.
    pub fn default_timeout(self) -> Duration {
        match self {
            Self::UserPromptSubmit => Duration::from_secs(30),
            _ => Duration::from_secs(60),
        }
    }
}

impl std::fmt::Display for HookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
