//! cadre's sub-agent system: definitions merged from code, files and factories into one
//! registry; tool narrowing; the runtime that runs children on the same engine with fresh
//! sessions, foreground or background; and the delegation tools (`task`, and the lifecycle
//! tools) that expose it to a parent model as ordinary tools.

pub mod definitions;
mod harness;
pub mod hooks;
pub mod runtime;
pub mod tools;

pub use cadre_store::{BackgroundSummary, TaskRecord};
pub use cadre_types::TaskStatus;
pub use definitions::definition::{
    AgentDefinition, AgentFactory, AgentMcpServer, AgentPermissions, DefinitionSource,
    FactoryError, FactoryInput, MAX_OFFERED_DESCRIPTION, RemoteProtocol, RemoteSpec, RequestedMode,
    WorkspaceMode, WorkspaceSpec,
};
pub use definitions::definition_file::{
    ParseContext, is_valid_name, normalise_name, parse_definition,
};
pub use definitions::error::DefinitionError;
pub use definitions::loader::{DirKind, FileFormat, LoadError, default_user_agents_dir};
pub use definitions::model_spec::{
    BUILTIN_ALIASES, FALLBACK_NOTE, ModelChoice, ModelDialect, main_model_spec, resolve_model,
};
pub use definitions::paths::{
    WorkspacePathError, check_relative_path, display_path, display_source, prompt_file,
    resolve_workspace_path, runtime_root,
};
pub use definitions::registry::{
    AgentRegistry, AgentRegistryBuilder, AgentWarning, DeclarationError, GENERAL_PURPOSE,
    general_purpose, validate_declaration,
};
pub use definitions::skills::{SKILL_DIRS, Skill, SkillSet};
pub use definitions::tool_names::known_tool;
pub use definitions::writable::WRITABLE_NOTE;
pub use harness::{Harness, HarnessBuilder, HarnessError, RunOptions};
pub use runtime::agent_servers::{AgentServers, ServerLease, ServerRequest};
pub use runtime::child_setup::{
    SetupError, WorkspacePlan, child_prompt, child_prompt_with, plan_workspace,
};
pub use runtime::narrowing::{child_grant, entry_matches, narrow, narrow_names};
pub use runtime::remote::{
    OnRemoteId, RemoteApprovals, RemoteExecutor, RemoteOutcome, RemoteRequest,
};
pub use runtime::worktree::{Isolation, UnknownIsolation};
pub use runtime::{
    Adopter, BackgroundApprovals, Child, ChildRunner, ELSEWHERE_LIMIT, Elsewhere, Inherited,
    LiveRequest, Parent, RuntimeConfig, SandboxSettings, SpawnError, SpawnRequest, Started,
    SubagentRuntime, ToolSurface, Waited,
};
pub use tools::context_ext::{SubagentContext, delivery_message, section, status_message};
pub use tools::guard::DelegationGuard;
pub use tools::surface::DELEGATION as DELEGATION_TOOL_INFO;
pub use tools::surface::TEAM as TEAM_TOOL_INFO;
pub use tools::task::{TaskTool, render_result, xml_escape};
pub use tools::title::call_title;

/// Names of the delegation tools, from their descriptors ([`DELEGATION_TOOL_INFO`]);
/// children that may not delegate never get them.
pub const DELEGATION_TOOLS: &[&str] = &cadre_tools::names_of(&DELEGATION_TOOL_INFO);

/// Names of the team tools, from their descriptors ([`TEAM_TOOL_INFO`]).
pub const TEAM_TOOLS: &[&str] = &cadre_tools::names_of(&TEAM_TOOL_INFO);

/// True for a tool a child that may not delegate must never be given: one of the
/// delegation tools, or any tool that says it is of the delegation kind.
pub fn is_delegation(tool: &dyn cadre_tools::Tool) -> bool {
    tool.kind() == cadre_tools::ToolKind::Delegation || DELEGATION_TOOLS.contains(&tool.name())
}

/// A short title from the first line of a prompt.
pub fn short_title(prompt: &str) -> String {
    let line = prompt.lines().next().unwrap_or("").trim();
    let mut t: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        t.push('…');
    }
    t
}
