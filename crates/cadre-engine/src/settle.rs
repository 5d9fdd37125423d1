//! Settling the tool calls an earlier run left without results, before the next model call
//! (their results must follow the reply that asked for them). A call that never started
//! runs now, as it would have. One that started may have acted: an extension that owns its
//! work answers for it (a delegation call gets its child's end, never a second child);
//! otherwise it runs again when its tool only reads or is idempotent, and is reported
//! `interrupted: outcome unknown` when it may have changed something.

use crate::agent::AgentConfig;
use crate::dispatch::Dispatcher;
use crate::extension::Settled;
use crate::observer::TurnObserver;
use crate::resume::{interrupted, may_rerun, unanswered};
use crate::session::{Session, SessionError};
use cadre_tools::RunContext;
use cadre_types::{Message, ToolCall};
use tokio_util::sync::CancellationToken;

/// Why the calls a new prompt finds without results stopped, as the model reads it.
pub(crate) const LOST: &str = "the cadre process running it was lost";

/// What settles the unanswered calls of a conversation for a run.
pub(crate) struct Settle<'a> {
    pub(crate) cfg: &'a AgentConfig,
    pub(crate) run: &'a RunContext,
    pub(crate) dispatcher: &'a Dispatcher<'a>,
    pub(crate) stop: &'a CancellationToken,
    /// Why the calls stopped: `interrupted: outcome unknown (<why>)`.
    pub(crate) why: &'a str,
    /// Count every unanswered call as started: the conversation comes from a copy that does
    /// not record starts (a checkpoint).
    pub(crate) all_started: bool,
    /// Asked before each call that runs again ([`TurnObserver::may_proceed`]).
    pub(crate) gate: &'a dyn TurnObserver,
}

/// What becomes of one unanswered call.
enum Plan {
    /// It runs (again).
    Run,
    /// Its result, known without running it.
    Known(Message),
}

impl Settle<'_> {
    /// Give each unanswered call of the last reply in `session` its result, appended in call
    /// order. True when there was any.
    pub(crate) async fn settle(
        &self,
        session: &mut Session,
        turn: u32,
    ) -> Result<bool, SessionError> {
        let calls = unanswered(session.messages());
        if calls.is_empty() {
            return Ok(false);
        }
        let mut plans = Vec::with_capacity(calls.len());
        for call in &calls {
            plans.push(self.plan(session, call).await);
        }
        let again: Vec<ToolCall> = calls
            .iter()
            .zip(&plans)
            .filter(|(_, p)| matches!(p, Plan::Run))
            .map(|(c, _)| c.clone())
            .collect();
        let turn_span = tracing::info_span!("turn", turn);
        let mut rerun = self
            .dispatcher
            .run_all(&again, self.stop, &turn_span, self.gate)
            .await
            .into_iter();
        for (call, plan) in calls.iter().zip(plans) {
            let (msg, approved) = match plan {
                Plan::Known(m) => (m, None),
                Plan::Run => rerun
                    .next()
                    .unwrap_or_else(|| (interrupted(call, self.why), None)),
            };
            if let Some(tool) = approved {
                session.approve_tool(&tool)?;
            }
            session.push(msg)?;
        }
        Ok(true)
    }

    async fn plan(&self, session: &Session, call: &ToolCall) -> Plan {
        if !self.all_started && !session.call_started(&call.id) {
            return Plan::Run;
        }
        for ext in &self.cfg.extensions {
            match ext.settle_call(self.run, call, self.stop).await {
                Some(Settled::Known(out)) => {
                    return Plan::Known(self.dispatcher.settled(call, out));
                }
                Some(Settled::OutcomeUnknown) => return Plan::Known(interrupted(call, self.why)),
                None => {}
            }
        }
        if may_rerun(&self.cfg.tools, call) {
            Plan::Run
        } else {
            Plan::Known(interrupted(call, self.why))
        }
    }
}
