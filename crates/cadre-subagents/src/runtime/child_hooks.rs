//! `SubagentStart` and `SubagentStop`: the configured hooks fired once around every child's
//! run (foreground, background, adopted or remote), matched on the child's agent name; and
//! `TeammateIdle` after the run of a team member.

use super::SubagentRuntime;
use crate::hooks::HookEvent;
use cadre_engine::RunOutcome;
use cadre_tools::RunContext;
use serde_json::json;
use std::sync::Weak;

/// Fire `SubagentStart` for the child running as `run`; the context its hooks add.
pub(crate) async fn started(runtime: &Weak<SubagentRuntime>, run: &RunContext) -> Vec<String> {
    let Some(hooks) = runtime
        .upgrade()
        .and_then(|rt| rt.config().claude_hooks.clone())
    else {
        return Vec::new();
    };
    let input = hooks.base(HookEvent::SubagentStart, run);
    let names = [run.agent.as_str()];
    hooks
        .fire(HookEvent::SubagentStart, &names, input, run)
        .await
        .context
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
    let Some(hooks) = runtime
        .upgrade()
        .and_then(|rt| rt.config().claude_hooks.clone())
    else {
        return;
    };
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
