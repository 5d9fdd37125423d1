//! The phases after a reply is kept: its tool calls run, or, when it has none, the run is
//! held open for outstanding work, given another turn by a hook, or ends; and the end
//! itself, reported once.

use super::setup::RunLoop;
use super::{LoopState, Step, persist_failed};
use crate::agent::{AgentConfig, RunOutcome};
use crate::dispatch::not_run;
use crate::session::Session;
use cadre_tools::RunContext;
use cadre_types::{EndState, Event, LimitKind, ToolCall};
use tokio_util::sync::CancellationToken;

/// How many times a finished run may be held open for outstanding work (background tasks);
/// a safety net — extensions batch deliveries as rounds grow.
const MAX_OUTSTANDING_ROUNDS: u32 = 64;

impl RunLoop<'_> {
    /// Run the reply's tool calls and keep their results, at a turn boundary. A run out of
    /// budget or turns runs none of them: each gets a result saying why, and the run ends.
    pub(super) async fn dispatch(
        &self,
        session: &mut Session,
        state: &LoopState,
        calls: &[ToolCall],
        turn_span: &tracing::Span,
    ) -> Step {
        let limit = match self.stop.budget.exceeded() {
            Some(limit) => Some((
                limit,
                "the run used up its budget before this call could run",
            )),
            None => (state.turns >= self.cfg.limits.max_turns).then_some((
                LimitKind::MaxTurns,
                "the run reached its turn limit before this call could run",
            )),
        };
        if let Some((limit, why)) = limit {
            for call in calls {
                session.push(not_run(call, why)).map_err(persist_failed)?;
            }
            return Err(EndState::LimitReached { limit });
        }
        let results = self
            .dispatcher
            .run_all(calls, &self.stop.token, turn_span, self.observer)
            .await;
        for (msg, approved) in results {
            if let Some(tool) = approved {
                session.approve_tool(&tool).map_err(persist_failed)?;
            }
            session.push(msg).map_err(persist_failed)?;
        }
        session.flush().map_err(persist_failed)?;
        self.boundary(session).await;
        Ok(())
    }

    /// After a reply without tool calls: another turn (`Ok`) when outstanding work (a
    /// background task) holds the run open or a stop hook gives the model another turn;
    /// otherwise the run ends, completed unless it was stopped.
    pub(super) async fn decide_next(&self, session: &mut Session, state: &mut LoopState) -> Step {
        if state.outstanding_rounds < MAX_OUTSTANDING_ROUNDS
            && wait_outstanding(
                self.cfg,
                &self.run,
                &self.stop.token,
                state.outstanding_rounds,
            )
            .await
        {
            state.outstanding_rounds += 1;
            return Ok(());
        }
        if let Some(end) = self.stop.state(&self.cancel) {
            return Err(end);
        }
        let active = &mut state.stop_hook_active;
        if crate::hook_points::keep_going(self.cfg, &self.run, session, active).await? {
            return Ok(());
        }
        Err(EndState::Completed)
    }

    /// End the run in `state`: the outcome, said to whoever watches (`Done`) and logged.
    /// What the run spent includes everything run on its behalf (its node of the budget).
    /// The transcript is complete on disk before anyone hears the run ended.
    pub(super) fn finish(
        &self,
        session: &mut Session,
        state: EndState,
        carried: &LoopState,
    ) -> RunOutcome {
        let state = match (session.flush(), state) {
            (Err(e), EndState::Completed) => persist_failed(e),
            (_, state) => state,
        };
        let output = carried.text.output(&state);
        let turns = carried.turns;
        let usage = self.stop.budget.spent().usage;
        if let EndState::Failed { error } = &state {
            self.emitter.emit(Event::Error {
                message: error.clone(),
            });
        }
        self.emitter.emit(Event::Done {
            state: state.clone(),
            output: output.clone(),
            turns,
            usage,
        });
        tracing::info!(
            state = state.name(),
            turns,
            tokens = usage.total(),
            elapsed_ms = self.started.elapsed().as_millis() as u64,
            "run ended"
        );
        RunOutcome {
            state,
            output,
            turns,
            usage,
        }
    }
}

/// Whether an extension held the finished run open for outstanding work (and the run was
/// not stopped meanwhile).
async fn wait_outstanding(
    cfg: &AgentConfig,
    run: &RunContext,
    stop: &CancellationToken,
    round: u32,
) -> bool {
    let mut any = false;
    for ext in &cfg.extensions {
        if ext.wait_outstanding(run, stop, round).await {
            any = true;
        }
    }
    any && !stop.is_cancelled()
}
