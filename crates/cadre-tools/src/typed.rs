//! Tools with typed arguments: a [`TypedTool`] names its arguments as a Rust type, and
//! the schema the model is offered, the decoding of a call and its permission subject all
//! come from that type. Every `TypedTool` is a [`Tool`] through the blanket implementation
//! here; tools whose schema is only known at run time (MCP tools) implement [`Tool`] directly.

use crate::schema::arguments_schema;
use crate::{
    PermissionSubject, Tool, ToolContext, ToolError, ToolInfo, ToolKind, ToolOutput, Workspace,
};
use async_trait::async_trait;
use cadre_types::{Event, Message, ToolDefinition};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use std::borrow::Cow;

/// A tool whose arguments are the Rust type [`Args`](Self::Args).
///
/// The default of an optional argument lives in `Args` (a `#[serde(default)]` and, for the
/// model, a doc comment or `#[schemars(default)]`), nowhere else. A call whose arguments do
/// not decode into `Args` is answered with [`ToolError::InvalidArgs`] naming what was wrong,
/// before any rule or approval is consulted.
///
/// The methods mirror [`Tool`]'s, with typed arguments; a method added to [`Tool`] with a
/// default gets its mirror here, forwarded by the blanket implementation.
pub trait TypedTool: Send + Sync + 'static {
    /// What the tool is: its name, kind, whether it only reads, the paths it reads, its
    /// foreign names. Known without an instance, so lists of tools by property are derived
    /// from it.
    const INFO: ToolInfo;

    /// The arguments of a call: their doc comments are the descriptions the model reads.
    type Args: DeserializeOwned + JsonSchema + Send + 'static;

    /// What the tool does, for the model.
    fn description(&self) -> Cow<'_, str>;

    /// Adjust the derived schema of [`Args`](Self::Args) with what only this instance knows
    /// (the `task` tool's agent names). The default changes nothing.
    fn refine_schema(&self, _schema: &mut serde_json::Value) {}

    /// See [`Tool::is_idempotent`].
    fn is_idempotent(&self) -> bool {
        false
    }

    /// See [`Tool::parallel_safe`].
    fn parallel_safe(&self) -> bool {
        Self::INFO.read_only
    }

    /// See [`Tool::uses_network`].
    fn uses_network(&self) -> bool {
        false
    }

    /// See [`Tool::timeout_exempt`].
    fn timeout_exempt(&self) -> bool {
        false
    }

    /// What a call with `args` acts on (see [`Tool::permission_subject`]). The default is
    /// [`PermissionSubject::None`].
    fn permission_subject(
        &self,
        _args: &Self::Args,
        _workspace: &Workspace,
    ) -> Result<PermissionSubject, ToolError> {
        Ok(PermissionSubject::None)
    }

    /// See [`Tool::resumed_state`].
    fn resumed_state(&self, _history: &[Message]) -> Option<Event> {
        None
    }

    /// Run the tool with decoded arguments.
    fn run(
        &self,
        args: Self::Args,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;
}

/// Decode a call's arguments into `A`; what was wrong goes back to the model.
fn decode<A: DeserializeOwned>(args: &serde_json::Value) -> Result<A, ToolError> {
    A::deserialize(args).map_err(|e| ToolError::InvalidArgs(e.to_string()))
}

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::INFO.name
    }

    fn definition(&self) -> ToolDefinition {
        let mut parameters = arguments_schema::<T::Args>();
        self.refine_schema(&mut parameters);
        ToolDefinition {
            name: T::INFO.name.to_string(),
            description: self.description().into_owned(),
            parameters,
        }
    }

    fn is_read_only(&self) -> bool {
        T::INFO.read_only
    }

    fn kind(&self) -> ToolKind {
        T::INFO.kind
    }

    fn reads_paths(&self) -> &'static [&'static str] {
        T::INFO.reads_paths
    }

    fn has_subject(&self) -> bool {
        T::INFO.has_subject
    }

    fn foreign_names(&self) -> &'static [&'static str] {
        T::INFO.foreign_names
    }

    fn is_idempotent(&self) -> bool {
        TypedTool::is_idempotent(self)
    }

    fn parallel_safe(&self) -> bool {
        TypedTool::parallel_safe(self)
    }

    fn uses_network(&self) -> bool {
        TypedTool::uses_network(self)
    }

    fn timeout_exempt(&self) -> bool {
        TypedTool::timeout_exempt(self)
    }

    fn permission_subject(
        &self,
        args: &serde_json::Value,
        workspace: &Workspace,
    ) -> Result<PermissionSubject, ToolError> {
        TypedTool::permission_subject(self, &decode(args)?, workspace)
    }

    fn resumed_state(&self, history: &[Message]) -> Option<Event> {
        TypedTool::resumed_state(self, history)
    }

    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        // Owned decoding: large arguments (a file's content) are moved, not copied.
        let args = crate::parse_args(args)?;
        self.run(args, ctx).await
    }
}
