//! Definitions from directories the model can write may only narrow: whatever such a file
//! asks that would give its children more than a definition saying nothing (no sandbox,
//! a wider approval mode, MCP servers or hooks of its own, the inherited hooks off) is dropped with a warning, so one planted
//! file cannot turn the sandbox off for every later run.

use crate::definitions::definition::{AgentMcpServer, RequestedMode};
use crate::{AgentDefinition, DefinitionSource};

/// Ends every warning about a setting dropped from a writable-directory definition, so
/// `cadre run` can print those at start-up.
pub const WRITABLE_NOTE: &str = "dropped: the model can write this directory";

/// Drop what a definition from a model-writable directory may not ask for, with a warning
/// each, and mark it so the runtime keeps its sandbox within the default for sub-agents.
pub(crate) fn narrow_writable(def: &mut AgentDefinition) {
    def.model_writable = true;
    if let Some(spec) = &def.sandbox
        && (spec.mode == cadre_sandbox::SandboxMode::Off
            || spec.network
            || !spec.writable_roots.is_empty())
    {
        def.warnings.push(format!(
            "`sandbox: {}` {WRITABLE_NOTE} (its children run in the default sub-agent sandbox)",
            spec.mode
        ));
        def.sandbox = None;
    }
    if let Some(mode @ (RequestedMode::AcceptEdits | RequestedMode::BypassPermissions)) =
        def.permissions.mode
    {
        def.warnings
            .push(format!("`permissionMode: {mode:?}` {WRITABLE_NOTE}"));
        def.permissions.mode = None;
    }
    if !def.mcp_servers.is_empty() {
        let names: Vec<&str> = def.mcp_servers.iter().map(AgentMcpServer::name).collect();
        def.warnings.push(format!(
            "`mcpServers` ({}) {WRITABLE_NOTE}",
            names.join(", ")
        ));
        def.mcp_servers.clear();
    }
    // Its handlers would run as the user, outside any sandbox; and turning the user's
    // hooks off (`hooks: {}`) could switch off the hooks that guard the model.
    use crate::definitions::agent_hooks::AgentHooks;
    match std::mem::take(&mut def.hooks) {
        AgentHooks::Inherit => {}
        AgentHooks::Off => def.warnings.push(format!(
            "`hooks: {{}}` {WRITABLE_NOTE} (the inherited hooks still run)"
        )),
        AgentHooks::Own(set) => def.warnings.push(format!(
            "`hooks` ({} handlers) {WRITABLE_NOTE}",
            set.entries().len()
        )),
    }
}

/// Why `new` may not replace `old`, if it may not: a writable-directory definition never
/// replaces the built-in, a declaration in code, a factory, or a file from a directory the
/// model cannot write.
pub(crate) fn refuses_replacing(new: &AgentDefinition, old: &AgentDefinition) -> Option<String> {
    if !new.model_writable || old.model_writable {
        return None;
    }
    let what = match &old.source {
        DefinitionSource::Builtin => "the built-in agent",
        DefinitionSource::Code => "an agent declared in code",
        DefinitionSource::Factory => "a factory agent",
        DefinitionSource::File(_) => "a definition from a protected directory",
    };
    Some(format!(
        "not loaded: it would replace {what}, and the model can write its directory"
    ))
}
