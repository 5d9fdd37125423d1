//! A child's checkpoint: its conversation appended to the task store at every turn
//! boundary, so that another node can continue the task from the last completed step.
//!
//! Each boundary appends only the messages stored since the last one. Nothing is written
//! before the first model reply: until then the task's prompt (in its record) is all there
//! is to continue from, so the first append carries the prompt and the first reply. A compaction (the
//! session's count of them changes) starts a new generation holding the whole compacted
//! conversation. A write the store fails is not lost: the next boundary appends from where
//! the stored copy ends, so it carries the missed messages too. The run never waits on a
//! refusal: the task ended, or another node owns it now, and nothing more is written.
//! Before each model call and tool call the checkpointer asks the child's lease whether this
//! node still owns the task, and stops the run when it does not.

use crate::runtime::lease::OwnerLease;
use cadre_engine::{Step, TurnBoundary, TurnObserver};
use cadre_store::{StoreError, TaskStore};
use cadre_tools::RunContext;
use cadre_types::Message;
use std::sync::{Arc, Mutex};

/// What the store holds of this run's conversation.
#[derive(Debug, Default)]
struct Stored {
    /// The generation written to.
    generation: u64,
    /// The session's compaction count the generation was started at; `None` before the
    /// first boundary.
    compactions: Option<u64>,
    /// Messages of the generation stored.
    len: usize,
    /// The store refused: the task is not this run's to write any more.
    refused: bool,
    /// Something was stored.
    any: bool,
}

/// The [`TurnObserver`] that checkpoints one task's child.
pub(crate) struct Checkpointer {
    store: Arc<dyn TaskStore>,
    task_id: String,
    /// The owner epoch this run holds the task at (its writes are fenced with it).
    epoch: u64,
    stored: Mutex<Stored>,
    /// Whether this node still owns the task; none: the run is never held back.
    lease: Option<Arc<OwnerLease>>,
}

impl Checkpointer {
    /// Checkpoints of task `task_id`, owned at `epoch`, from an empty store copy.
    pub(crate) fn new(store: Arc<dyn TaskStore>, task_id: &str, epoch: u64) -> Self {
        Self {
            store,
            task_id: task_id.to_string(),
            epoch,
            stored: Mutex::default(),
            lease: None,
        }
    }

    /// The same, with every model call and tool call of the run held back once `lease`
    /// says another node owns the task.
    pub(crate) fn leased(mut self, lease: Arc<OwnerLease>) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Checkpoints of an adopted task, owned now at `epoch`, whose stored copy holds the
    /// first `len` messages of `generation`, restored into a session that has had
    /// `compactions` compactions: the next append goes on from there.
    pub(crate) fn continuing(
        store: Arc<dyn TaskStore>,
        task_id: &str,
        epoch: u64,
        generation: u64,
        compactions: u64,
        len: usize,
    ) -> Self {
        Self {
            store,
            task_id: task_id.to_string(),
            epoch,
            stored: Mutex::new(Stored {
                generation,
                compactions: Some(compactions),
                len,
                refused: false,
                any: true,
            }),
            lease: None,
        }
    }

    /// Where the next append goes and what it holds, or `None` when there is nothing to
    /// write. A new compaction count starts a new generation from the first message.
    fn next_append(&self, b: &TurnBoundary<'_>) -> Option<(u64, usize)> {
        let mut s = self.stored.lock().ok()?;
        if s.refused {
            return None;
        }
        match s.compactions {
            None => s.compactions = Some(b.compactions),
            Some(c) if c != b.compactions => {
                s.compactions = Some(b.compactions);
                s.generation += 1;
                s.len = 0;
            }
            Some(_) => {}
        }
        let replied = || {
            b.history
                .iter()
                .any(|m| matches!(m, Message::Assistant { .. }))
        };
        if !s.any && !replied() {
            return None;
        }
        (b.history.len() > s.len).then_some((s.generation, s.len))
    }
}

#[async_trait::async_trait]
impl TurnObserver for Checkpointer {
    async fn turn_boundary(&self, _run: &RunContext, b: TurnBoundary<'_>) {
        if self.lease.as_ref().is_some_and(|l| l.is_lost()) {
            return;
        }
        self.record(b).await;
    }

    async fn may_proceed(&self, _run: &RunContext, _step: Step<'_>) -> bool {
        match &self.lease {
            Some(lease) => lease.holds().await,
            None => true,
        }
    }
}

impl Checkpointer {
    /// Append what the store does not hold yet of the conversation at `b`.
    async fn record(&self, b: TurnBoundary<'_>) {
        let Some((generation, start)) = self.next_append(&b) else {
            return;
        };
        let new = &b.history[start..];
        let written = self
            .store
            .append_checkpoint(
                &self.task_id,
                self.epoch,
                generation,
                start as u64,
                new,
                b.usage,
            )
            .await;
        let Ok(mut s) = self.stored.lock() else {
            return;
        };
        match written {
            Ok(()) if s.generation == generation => {
                cadre_tools::otel::checkpoint_event(&self.task_id, b.history.len() as u64);
                s.len = b.history.len();
                s.any = true;
            }
            Ok(()) => {}
            Err(e @ StoreError::CheckpointRefused { .. }) => {
                tracing::debug!(task = %self.task_id, error = %e, "checkpoints stop");
                s.refused = true;
            }
            Err(e) => {
                tracing::warn!(task = %self.task_id, error = %e, "store: checkpoint not written; the next one carries it");
            }
        }
    }
}

// Put a checkpoint's conversation into the adopted child's session. A fresh session (on
/// another node) takes it whole; a transcript reopened here (the lost process shared this
/// workspace) that the checkpoint extends is extended. True when the session's history now
/// extends the stored copy; false when the transcript holds more or something else (it
/// is kept: what it holds ran here), and the next checkpoint starts a new generation.
pub(crate) fn restore(
    session: &mut cadre_engine::Session,
    messages: &[Message],
) -> Result<bool, cadre_engine::SessionError> {
    let have = session.messages().len();
    if !messages.starts_with(session.messages()) {
        return Ok(false);
    }
    for m in &messages[have..] {
        session.push(m.clone())?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_store::{MemoryStore, NewTask, NodeId};
    use cadre_types::Usage;

    fn at(history: &[Message], compactions: u64) -> TurnBoundary<'_> {
        TurnBoundary {
            history,
            compactions,
            usage: Usage::default(),
        }
    }

    #[tokio::test]
    async fn appends_new_messages_and_restarts_after_a_compaction() {
        let store = Arc::new(MemoryStore::new(NodeId::new("n")));
        let id = store.create(&NewTask::new("w", "s", "p")).await.unwrap().id;
        let cp = Checkpointer::new(store.clone(), &id, 0);
        let mut history = vec![Message::user("a")];
        // Before the first reply, the prompt in the task record is all there is.
        cp.record(at(&history, 2)).await;
        assert_eq!(store.read_checkpoint(&id).await.unwrap(), None);
        history.push(Message::assistant("b"));
        cp.record(at(&history, 2)).await;
        cp.record(at(&history, 2)).await;
        history.push(Message::user("c"));
        cp.record(at(&history, 2)).await;
        let stored = store.read_checkpoint(&id).await.unwrap().unwrap();
        assert_eq!((stored.generation, stored.messages), (0, history.clone()));

        // The session compacted: a shorter conversation, stored whole as a new generation.
        let compacted = vec![Message::user("summary"), Message::user("c")];
        cp.record(at(&compacted, 3)).await;
        let stored = store.read_checkpoint(&id).await.unwrap().unwrap();
        assert_eq!((stored.generation, stored.messages), (1, compacted));

        // Once the task ended, the store refuses and nothing more is tried.
        store
            .transition(&id, cadre_store::Transition::failed("x"))
            .await
            .unwrap();
        history.push(Message::user("d"));
        cp.record(at(&history, 3)).await;
        assert!(cp.stored.lock().unwrap().refused);
    }
}
