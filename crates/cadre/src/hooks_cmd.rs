//! The hooks of a workspace: where they are read from (Claude Code's settings files and
//! cadre's `config.toml` files, in that order), `cadre hooks list` (with the handlers of
//! agent files' `hooks:`, which run only in those agents' children), and the `SessionEnd`
//! the binary fires when a session's run, REPL or TUI ends.

use crate::cli::{Cli, HooksCommand};
use crate::config;
use crate::setup::workspace_root;
use anyhow::Result;
use cadre_subagents::definitions::agent_hooks::AgentHooks;
use cadre_subagents::hooks::{HookEntry, HookSet, standard_sources};
use cadre_subagents::{AgentRegistry, SkillSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The hooks configured for `ws`, and a warning for each file or group skipped.
pub fn load(ws: &Path, explicit: Option<&Path>) -> (HookSet, Vec<String>) {
    let mut tomls: Vec<PathBuf> = Vec::new();
    if let Some(dir) = config::user_dir() {
        tomls.push(dir.join("config.toml"));
    }
    tomls.push(config::project_file(ws));
    if let Some(p) = explicit {
        tomls.push(p.to_path_buf());
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    HookSet::load(&standard_sources(home.as_deref(), ws, &tomls))
}

/// Fire `SessionEnd` for `session_id`, ended for `reason` (Claude Code's words:
/// `prompt_input_exit` when the user left the REPL or TUI, `clear` for `/clear`, `other`
/// for the end of `cadre run` or a signal). What went wrong with a handler is a warning on
/// stderr; nothing waits for the session any more, so nothing can be blocked.
pub async fn session_end(
    runtime: &cadre_subagents::SubagentRuntime,
    session_id: &str,
    reason: &str,
) {
    let Some(hooks) = runtime.config().claude_hooks.clone() else {
        return;
    };
    for w in hooks.session_end(session_id, reason).await {
        eprintln!("cadre: warning: {w}");
    }
}

/// The `permission_mode` hooks are told, in Claude Code's words for cadre's modes.
pub fn claude_mode(mode: cadre_engine::ApprovalMode) -> &'static str {
    use cadre_engine::ApprovalMode;
    match mode {
        ApprovalMode::Ask => "default",
        ApprovalMode::AutoApprove => "acceptEdits",
        ApprovalMode::ReadOnly => "plan",
        ApprovalMode::Bypass => "bypassPermissions",
    }
}

/// Run `cadre hooks ...`.
pub fn run(cli: &Cli, cmd: &HooksCommand) -> Result<ExitCode> {
    let HooksCommand::List { json } = cmd;
    let ws = workspace_root(cli)?;
    let (set, warnings) = load(&ws, cli.config.as_deref());
    for w in &warnings {
        eprintln!("cadre: warning: {w}");
    }
    // Agent files' handlers, listed after the configured ones with `agent:NAME (path)`.
    let registry = agent_registry(cli, &ws);
    let agents: Vec<_> = registry.iter().flat_map(AgentRegistry::list).collect();
    let entries: Vec<&HookEntry> = set
        .entries()
        .iter()
        .chain(
            agents
                .iter()
                .filter_map(|d| d.hooks.own())
                .flat_map(|s| s.entries()),
        )
        .collect();
    let mut out = std::io::stdout().lock();
    if *json {
        let rows: Vec<serde_json::Value> = entries
            .iter()
            .map(|e| {
                serde_json::json!({
                    "source": e.source,
                    "event": e.event.as_str(),
                    "matcher": e.matcher_text,
                    "handler": e.handler.describe(),
                    "timeout_secs": e.handler.timeout.map(|t| t.as_secs_f64()),
                    "disabled": set.is_disabled(),
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if entries.is_empty() {
        writeln!(out, "no hooks configured")?;
    }
    if set.is_disabled() {
        writeln!(out, "all hooks are off (disableAllHooks)")?;
    }
    for e in entries {
        let matcher = if e.matcher_text.is_empty() {
            "*"
        } else {
            &e.matcher_text
        };
        writeln!(
            out,
            "{}\t{}\t{}\t{}",
            e.source,
            e.event,
            matcher,
            e.handler.describe()
        )?;
    }
    for d in agents.iter().filter(|d| matches!(d.hooks, AgentHooks::Off)) {
        writeln!(
            out,
            "agent:{}: `hooks: {{}}`: its children run none of the hooks above",
            d.name
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The workspace's agent definitions, as `cadre agents` reads them; none when the
/// configuration cannot be read (its error is the business of the commands that run).
fn agent_registry(cli: &Cli, ws: &Path) -> Option<AgentRegistry> {
    let config = config::load(ws, cli.config.as_deref()).ok()?;
    let main_model = crate::setup::model_spec(cli, &config);
    let skills = SkillSet::discover(ws);
    Some(crate::agents_cmd::build_registry(
        ws,
        &config,
        &skills,
        &main_model,
    ))
}
