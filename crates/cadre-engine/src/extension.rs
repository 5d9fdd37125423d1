//! Turn extensions: the engine's one extension point for per-turn context. Before each
//! model call the engine asks every extension for a system-prompt section (rebuilt every
//! turn; the base prompt is never changed) and for messages to inject (e.g. results of
//! finished background work). When the model answers without tool calls, extensions that
//! still have outstanding work can hold the run open and give the model another turn.

use async_trait::async_trait;
use cadre_tools::RunContext;
use cadre_types::Message;
use tokio_util::sync::CancellationToken;

/// Per-turn context contributed from outside the engine.
#[async_trait]
pub trait TurnExtension: Send + Sync {
    /// A section appended to the system prompt for this turn only.
    fn system_section(&self, _run: &RunContext) -> Option<String> {
        None
    }

    /// Messages to add to the conversation before the next model call. Each message must
    /// be returned once only.
    async fn take_injections(&self, _run: &RunContext) -> Vec<Message> {
        Vec::new()
    }

    /// Tokens spent on this run's behalf outside its own model calls (its sub-agents); added
    /// to the usage the run reports when it ends.
    fn usage_rollup(&self, _run: &RunContext) -> cadre_types::Usage {
        cadre_types::Usage::default()
    }

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
}
