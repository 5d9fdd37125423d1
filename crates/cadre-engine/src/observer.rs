//! Turn observers: what sees a run's conversation at each turn boundary, to keep a durable
//! copy of it somewhere else (the sub-agent runtime checkpoints its children in the task
//! store this way). The engine says when and what; where it goes is not its concern. An
//! observer may also hold the run back: before each model request and each tool call the
//! engine asks it whether the run may take that step (a durable child asks whether its
//! node still owns its task).

use async_trait::async_trait;
use cadre_tools::RunContext;
use cadre_types::{Message, ToolCall, Usage};

/// The conversation at a turn boundary.
#[derive(Debug, Clone, Copy)]
pub struct TurnBoundary<'a> {
    /// The conversation as the session holds it now.
    pub history: &'a [Message],
    /// How many compactions the session has had. When it changes, `history` no longer
    /// extends what was seen before: its head was replaced by a summary.
    pub compactions: u64,
    /// What the run has spent so far (everything run on its behalf included).
    pub usage: Usage,
}

/// Sees a run's conversation at each turn boundary: before each model call (the request
/// about to be sent), after each reply is recorded (before its calls run, before the run
/// ends or waits on its final answer), and after a reply's call results are recorded. The run waits for it, so what it keeps is complete
/// before the next step begins; it cannot change the run, only stop it
/// ([`may_proceed`](Self::may_proceed)).
#[async_trait]
pub trait TurnObserver: Send + Sync {
    /// A turn boundary was reached.
    async fn turn_boundary(&self, run: &RunContext, boundary: TurnBoundary<'_>);

    /// Whether the run may take `step` now. Asked before each model request, before each
    /// retry the provider would send of it (as [`Step::ModelCall`]), and before each tool
    /// call starts, so it sits on the hot path: an answer should cost a clock read,
    /// not a round trip, in the common case. False stops the run at once: the step is not
    /// taken, calls still running are cancelled, and the run ends `cancelled`.
    async fn may_proceed(&self, _run: &RunContext, _step: Step<'_>) -> bool {
        true
    }
}

/// A step a run is about to take ([`TurnObserver::may_proceed`]).
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// A model request.
    ModelCall,
    /// A tool call.
    ToolCall(&'a ToolCall),
}

/// The observer of runs nobody observes.
pub(crate) struct Unobserved;

#[async_trait]
impl TurnObserver for Unobserved {
    async fn turn_boundary(&self, _run: &RunContext, _boundary: TurnBoundary<'_>) {}
}
