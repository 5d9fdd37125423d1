//! Tools for cadre agents: the [`Tool`] trait every tool implements (built-in, MCP or
//! delegation), the [`ToolContext`] passed to each call, the [`ToolRegistry`], the
//! built-in tools, and [`Workspace`] path confinement.

mod budget;
pub mod builtin;
mod context;
mod grant;
mod read_capped;
mod registry;
#[cfg(test)]
mod testutil;
mod tool;
mod workspace;

pub use budget::{Budget, BudgetLimits, Spend};
pub use context::{ApprovalHandler, RunContext, ToolContext};
pub use grant::ToolGrant;
pub use read_capped::{CappedReadError, read_capped, read_to_string_capped};
pub use registry::ToolRegistry;
pub use tool::{Tool, ToolError, ToolOutput, parse_args};
pub use workspace::{
    AccessPolicy, EditableFile, FileKind, Opened, OpenedDir, OpenedFile, Opener, PathError,
    Workspace, Written,
};
