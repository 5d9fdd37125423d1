//! The sub-agent definition model: what an entry of the registry says about a child agent,
//! and where it came from.

use cadre_engine::Agent;
use cadre_llm::ResolvedModel;
use cadre_tools::ToolRegistry;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The longest description, in characters, offered to a parent model (in the `task` tool and
/// the sub-agents prompt section). Longer ones are cut there, with a load warning; `agents
/// show` prints them whole.
pub const MAX_OFFERED_DESCRIPTION: usize = 1000;

/// Where a child's runtime workspace root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkspaceMode {
    /// The child gets its own root: `workspace.path`, or `<main>/.cadre/agents/<name>/workspace`.
    #[default]
    Isolated,
    /// The child works in the main workspace.
    Shared,
}

/// The `workspace: {mode, path}` of a definition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkspaceSpec {
    /// Isolated or shared.
    pub mode: WorkspaceMode,
    /// A definition directory (holding `AGENTS.md`), relative to the main workspace or absolute
    /// inside it.
    pub path: Option<PathBuf>,
}

/// Which protocol a remote sub-agent speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RemoteProtocol {
    /// Read the agent card; fall back to the task protocol.
    #[default]
    Auto,
    /// Agent2Agent JSON-RPC.
    A2a,
    /// The task protocol (`POST /tasks`, ...).
    Tasks,
}

/// A sub-agent that runs on another node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSpec {
    /// Base URL of the remote server.
    pub url: String,
    /// Headers sent with every request; values may reference env vars as `${VAR}` and are
    /// expanded only when sent (never stored).
    pub headers: BTreeMap<String, String>,
    /// Protocol.
    pub protocol: RemoteProtocol,
}

/// Claude Code's `permissionMode` (and Codex's `sandbox_mode = "read-only"`): the approval
/// mode an agent asks for. It can only narrow its parent's mode, never widen it (see
/// docs/agents.md for the mapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestedMode {
    /// `default`: mutating calls ask.
    Default,
    /// `acceptEdits`: file edits run, other mutating calls ask.
    AcceptEdits,
    /// `plan`: read-only.
    Plan,
    /// `bypassPermissions`: asks for no checks, which a child never gets beyond its parent's.
    BypassPermissions,
}

/// Permission rules a definition adds for its own agent, on top of its parent's policy.
/// They are ordinary permission rules (`bash(git *)`, `write_file(docs/**)`), so they match
/// what a call acts on exactly as configured rules do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentPermissions {
    /// Confining rules: a tool named by one of these may only make calls that one of them
    /// allows; its other calls are refused (from `tools: Bash(git *)`).
    pub only: Vec<String>,
    /// Extra deny rules (from `disallowedTools: Bash(rm *)` or OpenCode's `permission:`).
    pub deny: Vec<String>,
    /// Extra ask rules (from OpenCode's `permission:`).
    pub ask: Vec<String>,
    /// The approval mode the definition asks for.
    pub mode: Option<RequestedMode>,
}

impl AgentPermissions {
    /// True when the definition adds nothing to its parent's policy.
    pub fn is_empty(&self) -> bool {
        self.only.is_empty() && self.deny.is_empty() && self.ask.is_empty() && self.mode.is_none()
    }
}

/// One entry of a definition's `mcpServers`, in Claude Code's form: the name of a configured
/// server, or a server of its own.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentMcpServer {
    /// A server of the configuration (`.mcp.json`, `[mcp_servers.NAME]`), by name.
    Named(String),
    /// A server declared in the definition: its name and its entry as written (the keys of
    /// a `.mcp.json` entry; checked when a child of the definition starts).
    Inline {
        /// The server's name (its tools are `mcp__<name>__<tool>`).
        name: String,
        /// The entry, as JSON.
        entry: serde_json::Value,
    },
}

impl AgentMcpServer {
    /// The server's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Named(n) | Self::Inline { name: n, .. } => n,
        }
    }
}

/// Where a definition came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefinitionSource {
    /// Built into cadre (`general-purpose`).
    Builtin,
    /// Declared in code with the builder API.
    Code,
    /// Loaded from this file.
    File(PathBuf),
    /// A custom factory.
    Factory,
}

impl std::fmt::Display for DefinitionSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DefinitionSource::Builtin => f.write_str("builtin"),
            DefinitionSource::Code => f.write_str("code"),
            DefinitionSource::File(p) => write!(f, "{}", p.display()),
            DefinitionSource::Factory => f.write_str("factory"),
        }
    }
}

/// What a factory receives to build a child agent.
pub struct FactoryInput {
    /// The model the child would inherit.
    pub model: ResolvedModel,
    /// The tools the child may have (already narrowed, without delegation tools).
    pub tools: ToolRegistry,
    /// The child's runtime workspace root.
    pub workspace: PathBuf,
    /// The system prompt the runtime built for the child (context section, environment).
    pub system_prompt: String,
}

/// A custom factory: builds the child agent itself.
pub type AgentFactory = Arc<dyn Fn(&FactoryInput) -> Result<Agent, FactoryError> + Send + Sync>;

/// Why a factory could not build its agent, in its own words (the task fails with
/// `agent NAME: factory failed: <this>`). Made from a `String` or `&str`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FactoryError(pub String);

impl From<String> for FactoryError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for FactoryError {
    fn from(message: &str) -> Self {
        Self(message.to_string())
    }
}

/// One sub-agent definition.
#[derive(Clone)]
pub struct AgentDefinition {
    /// The id: lower-case, without `:`, `/`, `\` or whitespace (see [`is_valid_name`]).
    ///
    /// [`is_valid_name`]: crate::is_valid_name
    pub name: String,
    /// What the parent model reads to decide whether to delegate here (required).
    pub description: String,
    /// System prompt base: the inline or Markdown body (empty with `workspace.path` or `url`).
    pub prompt: String,
    /// Tool allowlist; `None` inherits the parent's tools. `Some(empty)` means no tools.
    pub tools: Option<Vec<String>>,
    /// Tools removed from whatever the child would get.
    pub disallowed_tools: Vec<String>,
    /// Model spec; `None` inherits the parent's model.
    pub model: Option<String>,
    /// Max turns (declared sub-agents default to 10).
    pub max_turns: Option<u32>,
    /// Wall-clock budget in seconds.
    pub wall_clock_secs: Option<u64>,
    /// Token budget.
    pub max_tokens: Option<u64>,
    /// Skills whose bodies are preloaded into the child's prompt.
    pub skills: Vec<String>,
    /// Workspace mode and path.
    pub workspace: WorkspaceSpec,
    /// Remote execution, when set.
    pub remote: Option<RemoteSpec>,
    /// May this agent delegate further (up to the depth cap)?
    pub can_delegate: bool,
    /// Paths its file tools may not write, besides the built-in list (relative to its
    /// workspace root, or absolute).
    pub protected_paths: Vec<String>,
    /// The OS sandbox its processes ask for (none: the runtime's default for sub-agents);
    /// always narrowed to its parent's.
    pub sandbox: Option<cadre_sandbox::SandboxSpec>,
    /// Rules and approval mode it adds to its parent's policy.
    pub permissions: AgentPermissions,
    /// An OpenCode `mode: primary` agent: listed by `cadre agents`, never offered for
    /// delegation (the registry keeps it apart).
    pub primary: bool,
    /// Run every child of it in its own git worktree (`isolation: worktree`).
    pub isolation: Option<crate::Isolation>,
    /// What happens to its children's tasks when their node is lost (`on_orphan:`); none:
    /// `[subagents] on_orphan` decides.
    pub on_orphan: Option<cadre_store::OrphanPolicy>,
    /// MCP servers of its own (`mcpServers`): started for its children, offered to them only.
    pub mcp_servers: Vec<AgentMcpServer>,
    /// The team of its parent its children join when the spawning call names none
    /// (`team:`).
    pub team: Option<String>,
    /// The labels (and `lead`) its children may message in their team (`can_message:`);
    /// none: anyone in the team.
    pub can_message: Option<Vec<String>>,
    /// Its `hooks:`: handlers of its own for its children, or the inherited ones off.
    pub hooks: crate::definitions::agent_hooks::AgentHooks,
    /// Where it came from.
    pub source: DefinitionSource,
    /// It came from a directory the model can write (`subagents/`, `.gemini/agents/`): it
    /// may only narrow, and its children's sandbox stays within the default for sub-agents.
    pub model_writable: bool,
    /// The factory, for `DefinitionSource::Factory` entries.
    pub factory: Option<AgentFactory>,
    /// Non-fatal problems found while loading (unknown keys, dropped tools, missing skills).
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for AgentDefinition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentDefinition")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("tools", &self.tools)
            .field("disallowed_tools", &self.disallowed_tools)
            .field("model", &self.model)
            .field("max_turns", &self.max_turns)
            .field("workspace", &self.workspace)
            .field("remote", &self.remote)
            .field("can_delegate", &self.can_delegate)
            .field("sandbox", &self.sandbox)
            .field("permissions", &self.permissions)
            .field("isolation", &self.isolation)
            .field("on_orphan", &self.on_orphan)
            .field("mcp_servers", &self.mcp_servers)
            .field("team", &self.team)
            .field("can_message", &self.can_message)
            .field("hooks", &self.hooks)
            .field("source", &self.source)
            .field("model_writable", &self.model_writable)
            .finish_non_exhaustive()
    }
}

impl AgentDefinition {
    /// The description as offered to a parent model: trimmed, and cut after
    /// [`MAX_OFFERED_DESCRIPTION`] characters (with `…`) so one huge file cannot fill every
    /// turn's prompt.
    pub fn offered_description(&self) -> std::borrow::Cow<'_, str> {
        let text = self.description.trim();
        match text.char_indices().nth(MAX_OFFERED_DESCRIPTION) {
            None => std::borrow::Cow::Borrowed(text),
            Some((cut, _)) => std::borrow::Cow::Owned(format!("{}…", &text[..cut])),
        }
    }

    /// A definition with a name and description and everything else at its default
    /// (isolated workspace, inherited tools and model, a leaf).
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            prompt: String::new(),
            tools: None,
            disallowed_tools: Vec::new(),
            model: None,
            max_turns: None,
            wall_clock_secs: None,
            max_tokens: None,
            skills: Vec::new(),
            workspace: WorkspaceSpec::default(),
            remote: None,
            can_delegate: false,
            protected_paths: Vec::new(),
            sandbox: None,
            permissions: AgentPermissions::default(),
            primary: false,
            isolation: None,
            on_orphan: None,
            mcp_servers: Vec::new(),
            team: None,
            can_message: None,
            hooks: Default::default(),
            source: DefinitionSource::Code,
            model_writable: false,
            factory: None,
            warnings: Vec::new(),
        }
    }
}
