//! Where a run consults its hooks outside a tool call's before and after: the user's prompt
//! before it joins the conversation, the model's finished answer before the run ends,
//! before each model call whether a hook asked for the run to stop, and an approval about
//! to be asked.

use crate::agent::AgentConfig;
use crate::hooks::PromptVerdict;
use crate::run_loop::Emitter;
use crate::{Session, SessionError};
use cadre_tools::RunContext;
use cadre_types::{ApprovalDecision, ApprovalRequest, EndState, Event, Message};

fn saving(e: SessionError) -> EndState {
    EndState::Failed {
        error: format!("could not save the session: {e}"),
    }
}

/// Add `prompt` to the conversation, then what the hooks add to it; or the end of a run
/// whose prompt a hook blocked (the prompt is then not kept).
pub(crate) async fn submit_prompt(
    cfg: &AgentConfig,
    run: &RunContext,
    session: &mut Session,
    prompt: String,
) -> Result<(), EndState> {
    let mut context = Vec::new();
    for hook in &cfg.hooks {
        match hook.prompt_submitted(&prompt, run).await {
            PromptVerdict::Proceed(c) => context.extend(c),
            PromptVerdict::Block(reason) => {
                return Err(EndState::Failed {
                    error: format!("the prompt was blocked by a hook: {reason}"),
                });
            }
        }
    }
    session.push(Message::user(prompt)).map_err(saving)?;
    for c in context {
        session.push(Message::user(c)).map_err(saving)?;
    }
    Ok(())
}

/// The end of a run a hook asked to stop, said to whoever watches it.
pub(crate) fn halted(cfg: &AgentConfig, run: &RunContext, emitter: &Emitter) -> Option<EndState> {
    let reason = cfg.hooks.iter().find_map(|h| h.halt(run))?;
    emitter.emit(Event::Notice {
        message: format!("a hook stopped the run: {reason}"),
    });
    Some(EndState::Cancelled)
}

/// True when a hook gives the finished model another turn (its reason is appended as the
/// next instruction); `active` then stays true for the rest of the run.
pub(crate) async fn keep_going(
    cfg: &AgentConfig,
    run: &RunContext,
    session: &mut Session,
    active: &mut bool,
) -> Result<bool, EndState> {
    let last = session.messages().last().map(Message::text).unwrap_or("");
    let last = last.to_string();
    for hook in &cfg.hooks {
        if let Some(reason) = hook.stopping(&last, *active, run).await {
            *active = true;
            session.push(Message::user(reason)).map_err(saving)?;
            return Ok(true);
        }
    }
    Ok(false)
}

/// What the hooks answer for an approval about to be asked: a refusal from any of them
/// wins over an approval from another; `None` when none answers.
pub(crate) async fn permission_request(
    cfg: &AgentConfig,
    run: &RunContext,
    request: &ApprovalRequest,
) -> Option<ApprovalDecision> {
    let mut allowed = None;
    for hook in &cfg.hooks {
        match hook.permission_request(request, run).await {
            Some(d) if d.refusal_text().is_some() => return Some(d),
            Some(d) => {
                allowed.get_or_insert(d);
            }
            None => {}
        }
    }
    allowed
}

/// Tell the hooks an approval waits for the user.
pub(crate) async fn approval_waits(cfg: &AgentConfig, run: &RunContext, tool: String) {
    let message = format!("cadre needs your permission to use {tool}");
    for hook in &cfg.hooks {
        hook.notification("permission_prompt", &message, run).await;
    }
}
