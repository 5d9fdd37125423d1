//! The trait every tool implements, and what a call returns.

use crate::{PathError, PermissionSubject, ToolContext, ToolKind, Workspace};
use async_trait::async_trait;
use cadre_types::{Event, Message, ToolDefinition};

/// What a tool call produced. `is_error` results still reach the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text the model sees.
    pub content: String,
    /// True when the call failed in a way the model should know about.
    pub is_error: bool,
    /// Images for models that accept them with a tool result; `content` names them too.
    pub images: Vec<cadre_types::Image>,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    /// A failed result the model sees as an error.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            images: Vec::new(),
        }
    }
}

/// Why a tool call failed. Every variant is reported to the model as an error result.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments did not match the schema.
    #[error("invalid arguments: {0}")]
    InvalidArgs(String),
    /// A path was refused by workspace confinement.
    #[error(transparent)]
    Path(#[from] PathError),
    /// An I/O error, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What the tool was doing.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// Any other failure, with a message for the model.
    #[error("{0}")]
    Failed(String),
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl ToolError {
    /// An I/O error with context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        ToolError::Io {
            context: context.into(),
            source,
        }
    }
}

/// A tool an agent can call.
///
/// Implementations are shared between runs (`Arc<dyn Tool>`), so per-call state lives in
/// the [`ToolContext`].
#[async_trait]
pub trait Tool: Send + Sync {
    /// The tool's unique name.
    fn name(&self) -> &str;

    /// The definition offered to the model.
    fn definition(&self) -> ToolDefinition;

    /// True for tools that only read (they run without approval in the default mode).
    fn is_read_only(&self) -> bool {
        false
    }

    /// Where the tool comes from; a child that may not delegate is never given a
    /// [`ToolKind::Delegation`] tool. The default is [`ToolKind::Builtin`].
    fn kind(&self) -> ToolKind {
        ToolKind::Builtin
    }

    /// The argument keys that are paths the tool reads (see
    /// [`ToolInfo::reads_paths`](crate::ToolInfo::reads_paths)).
    fn reads_paths(&self) -> &'static [&'static str] {
        &[]
    }

    /// True when a `tool(glob)` permission rule can match the tool's calls (see
    /// [`permission_subject`](Self::permission_subject)).
    fn has_subject(&self) -> bool {
        false
    }

    /// The names other harnesses use for this tool.
    fn foreign_names(&self) -> &'static [&'static str] {
        &[]
    }

    /// True when running a call again with the same arguments changes nothing more than
    /// running it once. A call that was in flight when the node running it was lost is run
    /// again on resume only when its tool reads only or is idempotent; any other is reported
    /// to the model as interrupted with an unknown outcome.
    fn is_idempotent(&self) -> bool {
        false
    }

    /// True when calls may run concurrently with other calls; others run exclusively.
    fn parallel_safe(&self) -> bool {
        self.is_read_only()
    }

    /// True for tools that reach the network (`web_fetch`, `web_search`): a sandbox that
    /// denies network access withholds them. Independent of [`is_read_only`](Self::is_read_only),
    /// which is about approvals.
    fn uses_network(&self) -> bool {
        false
    }

    /// The sandbox of the separate process this tool's calls act through, when the calling
    /// agent's own sandbox does not cover it (a sub-agent definition's MCP server). An agent
    /// whose sandbox is narrower than that is not offered the tool: a read-only agent must
    /// not write through a server started for a wider one. `None` (the default): the tool
    /// acts in cadre or in the agent's own sandboxed processes.
    fn process_sandbox(&self) -> Option<cadre_sandbox::SandboxPolicy> {
        None
    }

    /// True for tools exempt from the per-tool timeout (delegation tools). Cancellation
    /// still reaches them.
    fn timeout_exempt(&self) -> bool {
        false
    }

    /// What a call with `args` acts on, matched by `tool(glob)` permission rules: the
    /// parsed command line for `bash`, the path resolved inside `workspace` for file tools.
    /// An error (arguments that do not parse, a path outside the workspace) refuses the
    /// call before any rule is consulted. The default is [`PermissionSubject::None`].
    fn permission_subject(
        &self,
        _args: &serde_json::Value,
        _workspace: &Workspace,
    ) -> Result<PermissionSubject, ToolError> {
        Ok(PermissionSubject::None)
    }

    /// The event that restates what this tool's earlier calls in `history` left in force
    /// (the plan of `todo_write`). The engine emits it when the first run of a reopened
    /// session starts, so a resumed session shows its state again.
    fn resumed_state(&self, _history: &[Message]) -> Option<Event> {
        None
    }

    /// Run the tool.
    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError>;
}

/// Why the raw arguments of a call are not a JSON object; the message tells the model.
#[derive(Debug, thiserror::Error)]
pub enum ArgumentsError {
    /// Valid JSON, but not an object.
    #[error("invalid arguments for {tool}: expected a JSON object")]
    NotAnObject {
        /// The tool called.
        tool: String,
    },
    /// Not valid JSON.
    #[error(
        "invalid JSON in the arguments for {tool}: {source}. Send the arguments as one JSON object."
    )]
    Json {
        /// The tool called.
        tool: String,
        /// What the parser found.
        source: serde_json::Error,
    },
}

/// The arguments of a call to `tool` from their raw text as the model sent it: a JSON
/// object (blank text means `{}`), or what was wrong with them.
pub fn decode_arguments(tool: &str, raw: &str) -> Result<serde_json::Value, ArgumentsError> {
    let raw = if raw.trim().is_empty() { "{}" } else { raw };
    match serde_json::from_str(raw) {
        Ok(v @ serde_json::Value::Object(_)) => Ok(v),
        Ok(_) => Err(ArgumentsError::NotAnObject { tool: tool.into() }),
        Err(source) => Err(ArgumentsError::Json {
            tool: tool.into(),
            source,
        }),
    }
}

/// Parse tool arguments into a typed struct, mapping failures to [`ToolError::InvalidArgs`].
pub fn parse_args<T: serde::de::DeserializeOwned>(args: serde_json::Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs(e.to_string()))
}
