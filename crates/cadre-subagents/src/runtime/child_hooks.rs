//! `SubagentStart` and `SubagentStop`: the configured hooks fired once around every child's
//! run (foreground, background, adopted or remote), matched on the child's agent name; and
//! `TeammateIdle` after the run of a team member. Also which hooks a child's engine runs:
//! the inherited ones unless its definition says `hooks: {}`, and its definition's own.

use super::SubagentRuntime;
use crate::definitions::agent_hooks::AgentHooks;
use crate::hooks::{ClaudeHooks, HookEvent};
use crate::{AgentDefinition, RuntimeConfig};
use cadre_engine::{RunOutcome, ToolHook};
use cadre_tools::RunContext;
use serde_json::json;
use std::sync::{Arc, Weak};

/// The hooks around the tool calls (and prompts, approvals, compaction) of a child of
/// `def` that inherits `inherited`: without the configured Claude Code hooks when the
/// definition says `hooks: {}`, and with its own handlers added. Only this child runs
/// them; its children inherit `inherited`.
pub(crate) fn engine_hooks(
    cfg: &RuntimeConfig,
    def: &AgentDefinition,
    inherited: &[Arc<dyn ToolHook>],
) -> Vec<Arc<dyn ToolHook>> {
    let configured = cfg
        .claude_hooks
        .as_ref()
        .map(|c| Arc::as_ptr(c) as *const ());
    let mut out: Vec<Arc<dyn ToolHook>> = inherited
        .iter()
        .filter(|h| {
            !(matches!(def.hooks, AgentHooks::Off)
                && configured == Some(Arc::as_ptr(h) as *const ()))
        })
        .cloned()
        .collect();
    if let Some(own) = own_hooks(cfg, def) {
        out.push(own);
    }
    out
}

/// The definition's own handlers, run where the configured hooks run.
fn own_hooks(cfg: &RuntimeConfig, def: &AgentDefinition) -> Option<Arc<ClaudeHooks>> {
    let set = def.hooks.own()?;
    // `disableAllHooks` turns off every hook, an agent file's too.
    let hooks = cfg
        .claude_hooks
        .as_ref()
        .filter(|h| !h.set().is_disabled())?;
    Some(Arc::new(hooks.scoped(set.clone())))
}

/// The configured hooks and, after them, the own hooks of the child's definition.
/// Only those with a handler for `event` on the child's agent: the runtime always has
/// configured hooks (an agent file's run through them), mostly with nothing to run, and a
/// fan-out's children must not each build an input for nobody.
fn hooks_for(
    runtime: &Weak<SubagentRuntime>,
    run: &RunContext,
    event: HookEvent,
) -> Vec<Arc<ClaudeHooks>> {
    let Some(rt) = runtime.upgrade() else {
        return Vec::new();
    };
    let Some(configured) = rt.config().claude_hooks.clone() else {
        return Vec::new();
    };
    let own = rt
        .registry()
        .get(&run.agent)
        .and_then(|def| own_hooks(rt.config(), def));
    let names = [run.agent.as_str()];
    std::iter::once(configured)
        .chain(own)
        .filter(|h| !h.set().matching(event, &names).is_empty())
        .collect()
}

/// Fire `SubagentStart` for the child running as `run`; the context its hooks add.
pub(crate) async fn started(runtime: &Weak<SubagentRuntime>, run: &RunContext) -> Vec<String> {
    let mut context = Vec::new();
    for hooks in hooks_for(runtime, run, HookEvent::SubagentStart) {
        let input = hooks.base(HookEvent::SubagentStart, run);
        let names = [run.agent.as_str()];
        let o = hooks
            .fire(HookEvent::SubagentStart, &names, input, run)
            .await;
        context.extend(o.context);
    }
    context
}

/// Append hook context to a child's prompt: after it, so what precedes is unchanged.
pub(crate) fn add_context(prompt: &mut String, context: Vec<String>) {
    for c in context {
        prompt.push_str("\n\n");
        prompt.push_str(&c);
    }
}

/// Fire `SubagentStop` for the child that ran as `run` and ended with `outcome`.
pub(crate) async fn stopped(
    runtime: &Weak<SubagentRuntime>,
    run: &RunContext,
    outcome: &RunOutcome,
) {
    for hooks in hooks_for(runtime, run, HookEvent::SubagentStop) {
        let mut input = hooks.base(HookEvent::SubagentStop, run);
        input.insert("stop_hook_active".into(), json!(false));
        input.insert("last_assistant_message".into(), json!(outcome.output));
        input.insert("state".into(), json!(outcome.state.name()));
        input.insert("complete".into(), json!(outcome.state.is_complete()));
        let names = [run.agent.as_str()];
        // The child has ended: a block cannot give it another turn here.
        let _ = hooks
            .fire(HookEvent::SubagentStop, &names, input, run)
            .await;
    }
}

/// Fire `TeammateIdle` for the team member that ran as `run` and now waits for its next task.
pub(crate) async fn teammate_idle(
    runtime: &Weak<SubagentRuntime>,
    run: &RunContext,
    seat: &super::teams::TeamSeat,
) {
    let Some(hooks) = runtime
        .upgrade()
        .and_then(|rt| rt.config().claude_hooks.clone())
    else {
        return;
    };
    hooks.teammate_idle(&seat.key.name, &seat.label, run).await;
}
