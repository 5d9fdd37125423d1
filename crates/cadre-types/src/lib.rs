//! Plain data shared by every cadre crate: messages, tool definitions and calls,
//! usage, the typed event stream, task states, approval requests, ids and the `${VAR}` reference syntax.
//! No I/O lives here (the environment snapshot of [`process_env`] only reads the process's own
//! environment).

mod approval;
pub mod env_ref;
mod event;
mod ids;
mod message;
pub mod process_env;
mod task;
mod tool;
mod usage;

pub use approval::{ApprovalDecision, ApprovalRequest, RiskLevel};
pub use event::{
    EndState, Event, EventEnvelope, EventSink, IncompleteReason, LimitKind, NullSink,
    SubagentUpdate, TodoItem, TodoStatus, UpdateKind,
};
pub use ids::{new_session_id, new_sub_session_id, new_task_id, unix_millis};
pub use message::{Image, Message, ToolCall};
pub use task::{TaskOutcome, TaskStatus, end_state_text, parse_end_state};
pub use tool::ToolDefinition;
pub use usage::{Usage, format_usd, usd_to_nanos};
