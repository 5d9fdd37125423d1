//! The two channels from the engine to the UI: an event sink that never blocks (bounded; what
//! does not fit is counted and reported), and the approval handler that queues each request in
//! the dialog and waits for the person's answer.

use async_trait::async_trait;
use cadre_tools::ApprovalHandler;
use cadre_types::{ApprovalDecision, ApprovalRequest, EventEnvelope, EventSink};
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};

/// Events waiting for the UI at most (a frame drains them all).
pub const EVENT_QUEUE: usize = 65_536;

/// Sends events to the UI loop.
pub struct ChannelSink {
    tx: mpsc::Sender<EventEnvelope>,
    dropped: AtomicU64,
}

impl ChannelSink {
    /// A sink and the receiver the UI reads.
    pub fn new() -> (Self, mpsc::Receiver<EventEnvelope>) {
        let (tx, rx) = mpsc::channel(EVENT_QUEUE);
        (
            Self {
                tx,
                dropped: AtomicU64::new(0),
            },
            rx,
        )
    }

    /// Events dropped because the UI fell behind, since the last call.
    pub fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }
}

impl EventSink for ChannelSink {
    fn emit(&self, event: EventEnvelope) {
        if self.tx.try_send(event).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One request and where its answer goes.
pub type ApprovalAsk = (ApprovalRequest, oneshot::Sender<ApprovalDecision>);

/// Asks the person through the dialog.
pub struct DialogApprovals {
    tx: mpsc::Sender<ApprovalAsk>,
}

impl DialogApprovals {
    /// A handler and the receiver of its requests.
    pub fn new() -> (Self, mpsc::Receiver<ApprovalAsk>) {
        let (tx, rx) = mpsc::channel(crate::model::approvals::MAX_PENDING);
        (Self { tx }, rx)
    }
}

#[async_trait]
impl ApprovalHandler for DialogApprovals {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalDecision {
        let tool = request.tool.clone();
        let (reply, answer) = oneshot::channel();
        if self.tx.try_send((request, reply)).is_err() {
            return ApprovalDecision::Deny {
                feedback: Some(format!(
                    "{tool} needs approval and too many requests are waiting for the person; it was not run"
                )),
            };
        }
        answer.await.unwrap_or(ApprovalDecision::Deny {
            feedback: Some("the session ended before the person answered".into()),
        })
    }
}
