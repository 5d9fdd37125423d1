//! Turn extensions: the engine's one extension point for context it does not own. An
//! extension contributes a fixed section of the system prompt and appends messages to the
//! conversation before a model call (live state when it changed, results of finished
//! background work). When the model answers without tool calls, extensions that still have
//! outstanding work can hold the run open and give the model another turn. When a run takes
//! up a conversation whose last tool calls started and left no result (their process was
//! lost), an extension may answer for a call whose work it owns, so that the work is not
//! done twice.
//!
//! The contract keeps a session's requests append-only, so that providers' prompt caches
//! (automatic prefix caching, Anthropic cache breakpoints) hit on everything but the newest
//! messages: the system prompt and the tool list are built once per run and must not change
//! between the runs of a session; everything that changes is appended, never spliced into
//! earlier history.

use async_trait::async_trait;
use cadre_tools::{RunContext, ToolOutput};
use cadre_types::{Message, ToolCall};
use tokio_util::sync::CancellationToken;

/// Context contributed from outside the engine.
#[async_trait]
pub trait TurnExtension: Send + Sync {
    /// This extension's section of the system prompt, appended to the base prompt. Called
    /// once when a run starts; it must return the same text for every run of a session
    /// unless what it describes changed (live state belongs in
    /// [`take_injections`](Self::take_injections)), because the system prompt opens the
    /// prefix that providers cache.
    fn system_section(&self, _run: &RunContext) -> Option<String> {
        None
    }

    /// Called once when a run starts, before its conversation is settled or its prompt
    /// added, with the run's own context (its node of the budget) and its caller's
    /// cancellation. Work the run takes up from an earlier run of its session (children
    /// adopted after a crash) starts here, so that it spends from this run's budget and
    /// counts in its totals like work the run started itself.
    async fn run_starts(&self, _run: &RunContext, _cancel: &CancellationToken) {}

    /// Messages to append to the conversation before the next model call. `history` is the
    /// conversation so far — the record of what the model has been told — so an extension
    /// can append live state only when it differs from the last state it reported there.
    /// Each message must be returned once only. What is handed out exactly once (a finished
    /// task's result) is marked handed out in [`recorded`](Self::recorded), not here: a
    /// process lost before the session holds the message then hands it out again, and
    /// `history` (its newest messages) says whether the lost process had recorded it.
    async fn take_injections(&self, _run: &RunContext, _history: &[Message]) -> Vec<Message> {
        Vec::new()
    }

    /// Called once the messages of this extension's last
    /// [`take_injections`](Self::take_injections) for `run` are recorded: in the session's
    /// transcript and in the checkpoint of the turn boundary that follows, before the model
    /// call that reads them.
    async fn recorded(&self, _run: &RunContext) {}

    /// Called when the model has finished. Wait (until `cancel`) for outstanding work whose
    /// results the model should see; return true if new injections are ready. `round` counts
    /// the times this run was already held open, so an extension can batch more as it grows.
    async fn wait_outstanding(
        &self,
        _run: &RunContext,
        _cancel: &CancellationToken,
        _round: u32,
    ) -> bool {
        false
    }

    /// What becomes of `call`, a tool call of an earlier run that started and left no
    /// result (the process running it was lost), when this extension owns the work it
    /// started: a delegation call whose child is recorded answers with that child's end,
    /// waiting (until `cancel`) for a child that still runs; a call that may have acted
    /// although its tool only reads (a message sent to a live child) is
    /// [`Settled::OutcomeUnknown`]. `None` when this extension knows nothing of the call;
    /// the engine then runs the call again if its tool only reads or is idempotent, and
    /// otherwise answers `interrupted: outcome unknown`. Asked once per such call, before
    /// the run's next model call; the first extension that answers wins.
    async fn settle_call(
        &self,
        _run: &RunContext,
        _call: &ToolCall,
        _cancel: &CancellationToken,
    ) -> Option<Settled> {
        None
    }
}

/// An extension's answer for an interrupted call ([`TurnExtension::settle_call`]).
#[derive(Debug)]
pub enum Settled {
    /// The call's result, known without running it again.
    Known(ToolOutput),
    /// It may have acted: not run again, and answered `interrupted: outcome unknown`.
    OutcomeUnknown,
}
