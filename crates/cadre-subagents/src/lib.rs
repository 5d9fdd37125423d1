//! cadre's sub-agent system: definitions merged from code, files and factories into one
//! registry; tool narrowing; the runtime that runs children on the same engine with fresh
//! sessions, foreground or background; and the delegation tools (`task`, and the lifecycle
//! tools) that expose it to a parent model as ordinary tools.

pub mod definitions;
mod harness;
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
    BUILTIN_ALIASES, FALLBACK_NOTE, ModelChoice, ModelDialect, resolve_model,
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
pub use tools::task::{TaskTool, render_result, xml_escape};

/// Names of the delegation tools; children that may not delegate never get them.
pub const DELEGATION_TOOLS: &[&str] = &[
    "task",
    "agent_spawn",
    "agent_send",
    "agent_list",
    "agent_close",
    "task_output",
    "task_cancel",
    "task_list",
];

/// A short title from the first line of a prompt.
pub fn short_title(prompt: &str) -> String {
    let line = prompt.lines().next().unwrap_or("").trim();
    let mut t: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        t.push('…');
    }
    t
}
