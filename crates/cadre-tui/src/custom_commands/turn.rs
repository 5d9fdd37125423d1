//! The main agent as a command's `allowed-tools` narrows it for the one turn the command
//! runs: only the tools named, and a restricted form (`Bash(git diff:*)`) confining its tool.

use cadre_engine::{Agent, AgentConfig, PermissionPolicy, RuleError};
use cadre_subagents::definitions::tool_names::map_allowlist;
use cadre_subagents::entry_matches;

/// `agent` with only the tools `allowed` names (Claude Code's or cadre's names). Names that
/// match no tool are warnings; the result never has a tool `agent` lacks.
pub fn narrowed(
    agent: &Agent,
    allowed: &[String],
    warnings: &mut Vec<String>,
) -> Result<Agent, RuleError> {
    let c = agent.config();
    let known: Vec<String> = c.tools.names().iter().map(ToString::to_string).collect();
    let mapped = map_allowlist(allowed, &known, warnings);
    let tools = c
        .tools
        .filtered(|t| mapped.tools.iter().any(|e| entry_matches(e, t.name())));
    let permissions = PermissionPolicy {
        mode: c.permissions.mode,
        rules: c.permissions.rules.clone().confined_to(&mapped.only)?,
    };
    Ok(Agent::from_config(AgentConfig {
        name: c.name.clone(),
        model: c.model.clone(),
        system_prompt: c.system_prompt.clone(),
        tools,
        limits: c.limits,
        tool_timeout: c.tool_timeout,
        max_parallel_tools: c.max_parallel_tools,
        hooks: c.hooks.clone(),
        permissions,
        extensions: c.extensions.clone(),
        offloader: c.offloader.clone(),
        max_output_tokens: c.max_output_tokens,
        max_reply_bytes: c.max_reply_bytes,
        temperature: c.temperature,
        compaction: c.compaction.clone(),
        network_tools: c.network_tools.clone(),
    }))
}
