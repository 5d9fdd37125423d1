//! What a run keeps while it runs besides its conversation: the text its replies produced,
//! and why it stops early (cancellation, or a budget that ran out).

use cadre_tools::Budget;
use cadre_types::EndState;
use tokio_util::sync::CancellationToken;

/// The text a run's model replies produced, turn by turn: a completed run answers with the
/// last of it, a run that did not complete with all of it (the model may have written its
/// findings over several turns before the limit hit).
#[derive(Default)]
pub(crate) struct RunText {
    texts: Vec<String>,
}

impl RunText {
    pub(crate) fn add(&mut self, text: &str) {
        if !text.trim().is_empty() {
            self.texts.push(text.to_string());
        }
    }

    /// The run's output for `state`.
    pub(crate) fn output(&self, state: &EndState) -> String {
        if state.is_complete() {
            self.texts.last().cloned().unwrap_or_default()
        } else {
            self.texts.join("\n\n")
        }
    }
}

/// Why the run is stopping early, decided once.
pub(crate) struct Stop {
    /// Cancelled when the run must stop: its caller cancelled it or its budget ran out.
    pub(crate) token: CancellationToken,
    /// The run's own node of the budget tree.
    pub(crate) budget: Budget,
}

impl Stop {
    /// A budget that ran out wins over the cancellation it causes: a child whose parent's
    /// budget ran out ends `limit reached`, not `cancelled`.
    pub(crate) fn state(&self, parent: &CancellationToken) -> Option<EndState> {
        if let Some(limit) = self.budget.exceeded() {
            Some(EndState::LimitReached { limit })
        } else if parent.is_cancelled() || self.token.is_cancelled() {
            Some(EndState::Cancelled)
        } else {
            None
        }
    }

    /// Stop the run (its model call and tool calls) when its budget is exhausted.
    pub(crate) fn watch_budget(&self) -> Option<AbortOnDrop> {
        if !self.budget.is_limited() {
            return None;
        }
        let (token, budget) = (self.token.clone(), self.budget.clone());
        Some(AbortOnDrop(tokio::spawn(async move {
            tokio::select! {
                _ = budget.exhausted() => token.cancel(),
                _ = token.cancelled() => {}
            }
        })))
    }
}

/// A task aborted when this is dropped (the budget watch ends with the run).
pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
