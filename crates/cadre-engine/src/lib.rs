//! The cadre engine: the ReAct loop that turns a prompt into model calls and tool calls,
//! with parallel tool execution, per-tool timeouts, hooks, approvals, limits, JSONL
//! sessions and large-output offload. It knows nothing about sub-agents: delegation tools
//! are ordinary tools that happen to run another [`Agent`].

mod agent;
mod approvals;
mod call_ids;
mod compaction;
mod dispatch;
mod extension;
mod grant_seal;
mod hook_points;
mod hooks;
mod observer;
mod offload;
mod permissions;
pub mod prompt;
mod reply_cap;
mod resume;
mod run_loop;
mod run_state;
mod session;
mod settle;
mod spans;
mod stream;
mod transcript;

pub use agent::{
    Agent, AgentBuilder, AgentConfig, DEFAULT_MAX_PARALLEL_TOOLS, DEFAULT_TOOL_TIMEOUT, Limits,
    RunOutcome,
};
pub use approvals::{AutoApprove, DenyAll, NonInteractiveApprovals};
pub use compaction::{
    CompactionError, CompactionPolicy, CompactionReport, DEFAULT_COMPACTION_THRESHOLD,
    DEFAULT_KEEP_RECENT_TURNS, UnknownWindows, estimate_tokens,
};
pub use extension::{Settled, TurnExtension};
pub use hooks::{HookDecision, PromptVerdict, ToolCallInfo, ToolHook};
pub use observer::{Step, TurnBoundary, TurnObserver};
pub use offload::{DEFAULT_OFFLOAD_THRESHOLD, Offloader};
pub use permissions::{ApprovalMode, PermissionPolicy, PermissionRules, PolicyDecision, RuleError};
pub use resume::Resume;
pub use session::{CompactionRecord, Session, SessionError, SessionMeta, flush_open_transcripts};
