//! Tools for cadre agents: the [`Tool`] trait every tool implements (built-in, MCP or
//! delegation) and [`TypedTool`], its typed form for tools whose arguments are a Rust type;
//! the [`ToolContext`] passed to each call, the [`ToolRegistry`], the built-in tools, and
//! [`Workspace`] path confinement.

mod budget;
pub mod builtin;
mod command_line;
mod context;
mod grant;
mod hidden;
mod identity;
pub mod otel;
mod read_capped;
mod registry;
mod replaced;
mod schema;
mod secret_env;
mod subject;
#[cfg(test)]
mod testutil;
mod tool;
mod typed;
mod workspace;

pub use budget::{Budget, BudgetLimits, Spend};
pub use command_line::{CommandLine, MAX_LINE_BYTES, SimpleCommand, Spelling, Word, WordKind};
pub use context::{ApprovalHandler, RunContext, ToolContext};
pub use grant::ToolGrant;
pub use hidden::{HiddenPaths, path_pattern};
pub use identity::{EditArgs, PromptArgs, ToolInfo, ToolKind, find as find_info, names_of};
pub use read_capped::{CappedReadError, read_capped, read_to_string_capped};
pub use registry::{ToolRegistry, network_refusal};
pub use replaced::{MAX_REPLACED_BYTES, replaced_text};
pub use schema::arguments_schema;
pub use secret_env::{DEFAULT_SECRET_VARS, SecretEnv};
pub use subject::PermissionSubject;
pub use tool::{ArgumentsError, Tool, ToolError, ToolOutput, decode_arguments, parse_args};
pub use typed::TypedTool;
pub use workspace::{
    AccessPolicy, EditableFile, FileKind, Opened, OpenedDir, OpenedFile, Opener, PROTECTED_AT_ROOT,
    PROTECTED_NAMES, PathError, Workspace, Written, protected_roots,
};
