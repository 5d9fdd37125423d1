//! The retry gate: how the caller of a model request gets a say before each retry. A
//! provider re-sends a failed request after a backoff of up to seconds; meanwhile the run
//! may have lost the right to act (another node owns its task now, its budget ran out).
//! The provider knows nothing of leases or budgets, so before every retry it asks the gate
//! the request carries, and the caller answers. A request without a gate is always retried.

use futures::StreamExt;
use futures::channel::{mpsc, oneshot};

/// Carried by a [`ModelRequest`](crate::ModelRequest): asked before every retry of it.
/// The default gate is open (every retry is allowed). Cheap to clone; clones ask the same
/// [`RetryAsks`].
#[derive(Clone, Default)]
pub struct RetryGate {
    asks: Option<mpsc::UnboundedSender<RetryAsk>>,
}

impl std::fmt::Debug for RetryGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryGate")
            .field("gated", &self.asks.is_some())
            .finish()
    }
}

impl RetryGate {
    /// A gate whose questions arrive at the returned [`RetryAsks`]. Its caller must answer
    /// them while the request runs: a question nobody answers (the receiver dropped, or an
    /// ask dropped unanswered) is a refusal.
    pub fn channel() -> (Self, RetryAsks) {
        let (tx, rx) = mpsc::unbounded();
        (Self { asks: Some(tx) }, RetryAsks(rx))
    }

    /// Whether retry `attempt` (2 for the first retry) may be sent.
    pub async fn allows(&self, attempt: u32) -> bool {
        let Some(asks) = &self.asks else {
            return true;
        };
        let (answer, answered) = oneshot::channel();
        if asks.unbounded_send(RetryAsk { attempt, answer }).is_err() {
            return false;
        }
        answered.await.unwrap_or(false)
    }
}

/// The questions of a [`RetryGate`], one per retry about to be sent.
pub struct RetryAsks(mpsc::UnboundedReceiver<RetryAsk>);

impl RetryAsks {
    /// The next question; `None` once every clone of the gate is gone.
    pub async fn next(&mut self) -> Option<RetryAsk> {
        self.0.next().await
    }
}

/// One question of a [`RetryGate`]: may retry [`attempt`](Self::attempt) be sent?
#[derive(Debug)]
pub struct RetryAsk {
    /// The attempt about to be sent (2 for the first retry).
    pub attempt: u32,
    answer: oneshot::Sender<bool>,
}

impl RetryAsk {
    /// Answer it: `true` sends the retry, `false` ends the request with
    /// [`ProviderError::RetryRefused`](crate::ProviderError::RetryRefused).
    pub fn answer(self, allowed: bool) {
        let _ = self.answer.send(allowed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_open_gate_allows_and_a_gate_without_an_answer_refuses() {
        assert!(RetryGate::default().allows(2).await);
        let (gate, asks) = RetryGate::channel();
        drop(asks);
        assert!(!gate.allows(2).await);
        let (gate, mut asks) = RetryGate::channel();
        let answering = tokio::spawn(async move {
            let first = asks.next().await.unwrap();
            assert_eq!(first.attempt, 2);
            first.answer(true);
            // Dropped unanswered: a refusal.
            let _second = asks.next().await.unwrap();
        });
        assert!(gate.allows(2).await);
        assert!(!gate.allows(3).await);
        answering.await.unwrap();
    }
}
