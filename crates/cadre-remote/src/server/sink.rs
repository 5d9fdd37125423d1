//! The server-side parent's event sink. The runtime forwards each served child's progress
//! here as sub-agent updates; streams subscribe by the child's session id (known before the
//! task starts, so no early update is missed) and filter by task id.

use cadre_types::{Event, EventEnvelope, EventSink, SubagentUpdate};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;

/// Updates buffered per subscription before a slow stream starts losing the oldest.
const CAPACITY: usize = 1024;

/// Routes updates to the streams that follow them; drops the rest.
#[derive(Default)]
pub(crate) struct ServeSink {
    subs: Mutex<HashMap<String, broadcast::Sender<SubagentUpdate>>>,
}

impl ServeSink {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, broadcast::Sender<SubagentUpdate>>> {
        match self.subs.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Follow the updates of the child with session `session_id`.
    pub(crate) fn subscribe(self: &Arc<Self>, session_id: &str) -> Subscription {
        let rx = self
            .lock()
            .entry(session_id.to_string())
            .or_insert_with(|| broadcast::channel(CAPACITY).0)
            .subscribe();
        Subscription {
            rx: Some(rx),
            sink: self.clone(),
            key: session_id.to_string(),
        }
    }
}

impl EventSink for ServeSink {
    fn emit(&self, env: EventEnvelope) {
        if let Event::SubagentUpdate { update } = env.event {
            let g = self.lock();
            if let Some(tx) = g.get(&update.session_id) {
                let _ = tx.send(update);
            }
        }
    }
}

/// A stream's subscription; unsubscribes when dropped.
pub(crate) struct Subscription {
    rx: Option<broadcast::Receiver<SubagentUpdate>>,
    sink: Arc<ServeSink>,
    key: String,
}

impl Subscription {
    /// The next update (`None` when the sender is gone). Lagging skips lost updates.
    pub(crate) async fn recv(&mut self) -> Option<SubagentUpdate> {
        let rx = self.rx.as_mut()?;
        loop {
            match rx.recv().await {
                Ok(u) => return Some(u),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// An update already buffered, without waiting.
    pub(crate) fn try_recv(&mut self) -> Option<SubagentUpdate> {
        let rx = self.rx.as_mut()?;
        loop {
            match rx.try_recv() {
                Ok(u) => return Some(u),
                Err(broadcast::error::TryRecvError::Lagged(_)) => continue,
                Err(_) => return None,
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut g = self.sink.lock();
        if g.get(&self.key).is_some_and(|tx| tx.receiver_count() == 0) {
            g.remove(&self.key);
        }
    }
}
