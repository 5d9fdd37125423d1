//! The span processor between the agents and an exporter: ended spans go into a bounded
//! queue that one thread drains in batches, so a slow or absent collector never holds up a
//! run and never grows memory. What cannot be exported is counted; one warning says so.

use opentelemetry::Context;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Spans waiting for export at most; past it they are dropped.
pub const QUEUE_CAPACITY: usize = 4096;
/// Spans sent in one export at most.
const MAX_BATCH: usize = 512;
/// How long a span waits for a batch to fill before it is sent anyway.
const SCHEDULE: Duration = Duration::from_secs(1);

enum Msg {
    Span(Box<SpanData>),
    /// Export what is queued and answer.
    Flush(SyncSender<()>),
}

/// Counts shared by the processor and its thread.
#[derive(Debug, Default)]
struct Counts {
    accepted: AtomicU64,
    dropped: AtomicU64,
    exported: AtomicU64,
    warned: AtomicBool,
}

impl Counts {
    /// Warn once per process; later losses are only counted.
    fn warn_once(&self, what: &str, message: &str) {
        if !self.warned.swap(true, Ordering::SeqCst) {
            tracing::warn!(target: "cadre::telemetry", "telemetry: {what}: {message}");
        }
    }
}

/// A [`SpanProcessor`] with a bounded queue drained by its own thread.
#[derive(Debug)]
pub struct BoundedQueue {
    tx: Mutex<Option<SyncSender<Msg>>>,
    done: Mutex<Option<Receiver<()>>>,
    counts: Arc<Counts>,
    /// Names the destination in the warning (`the collector at …`, `trace file …`).
    what: String,
}

impl BoundedQueue {
    /// Start the thread that exports to `exporter`; `what` names where spans go.
    pub fn new<E: SpanExporter + 'static>(
        exporter: E,
        capacity: usize,
        what: String,
    ) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel(capacity);
        let (done_tx, done_rx) = std::sync::mpsc::sync_channel(1);
        let counts = Arc::new(Counts::default());
        let worker = Worker {
            exporter,
            counts: counts.clone(),
            what: what.clone(),
        };
        std::thread::Builder::new()
            .name("cadre-telemetry".into())
            .spawn(move || {
                worker.run(rx);
                let _ = done_tx.send(());
            })?;
        Ok(Self {
            tx: Mutex::new(Some(tx)),
            done: Mutex::new(Some(done_rx)),
            counts,
            what,
        })
    }

    fn sender(&self) -> Option<SyncSender<Msg>> {
        self.tx.lock().ok().and_then(|t| t.clone())
    }
}

impl SpanProcessor for BoundedQueue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        let Some(tx) = self.sender() else {
            return;
        };
        // Never waits: a full queue drops the span (the thread is stuck on the collector).
        match tx.try_send(Msg::Span(Box::new(span))) {
            Ok(()) => {
                self.counts.accepted.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        let Some(tx) = self.sender() else {
            return Ok(());
        };
        let (ack_tx, ack_rx) = std::sync::mpsc::sync_channel(1);
        tx.send(Msg::Flush(ack_tx))
            .map_err(|_| OTelSdkError::AlreadyShutdown)?;
        ack_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| OTelSdkError::Timeout(Duration::from_secs(5)))
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        // Closing the channel lets the thread send what is queued and stop.
        drop(self.tx.lock().ok().and_then(|mut t| t.take()));
        let Some(done) = self.done.lock().ok().and_then(|mut d| d.take()) else {
            return Err(OTelSdkError::AlreadyShutdown);
        };
        let finished = done.recv_timeout(timeout).is_ok();
        let c = &self.counts;
        let lost = c.accepted.load(Ordering::SeqCst)
            - c.exported
                .load(Ordering::SeqCst)
                .min(c.accepted.load(Ordering::SeqCst))
            + c.dropped.load(Ordering::SeqCst);
        if lost > 0 {
            let total = c.accepted.load(Ordering::SeqCst) + c.dropped.load(Ordering::SeqCst);
            let message = format!("{lost} of {total} spans were not exported");
            if c.warned.load(Ordering::SeqCst) {
                tracing::info!(target: "cadre::telemetry", "telemetry: {}: {message}", self.what);
            } else {
                c.warn_once(&self.what, &message);
            }
        }
        if finished {
            Ok(())
        } else {
            Err(OTelSdkError::Timeout(timeout))
        }
    }
}

struct Worker<E> {
    exporter: E,
    counts: Arc<Counts>,
    what: String,
}

impl<E: SpanExporter> Worker<E> {
    fn run(mut self, rx: Receiver<Msg>) {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        let mut due = Instant::now() + SCHEDULE;
        loop {
            let wait = due.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Msg::Span(s)) => {
                    batch.push(*s);
                    if batch.len() >= MAX_BATCH {
                        self.export(&mut batch);
                        due = Instant::now() + SCHEDULE;
                    }
                }
                Ok(Msg::Flush(ack)) => {
                    self.export(&mut batch);
                    let _ = ack.send(());
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.export(&mut batch);
                    due = Instant::now() + SCHEDULE;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.export(&mut batch);
                    let _ = self.exporter.shutdown();
                    return;
                }
            }
        }
    }

    fn export(&mut self, batch: &mut Vec<SpanData>) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        let spans = std::mem::replace(batch, Vec::with_capacity(MAX_BATCH));
        match futures::executor::block_on(self.exporter.export(spans)) {
            Ok(()) => {
                self.counts.exported.fetch_add(n, Ordering::SeqCst);
            }
            Err(e) => self.counts.warn_once(
                &self.what,
                &format!(
                    "an export failed ({e}); spans that cannot be sent are dropped and counted"
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{Tracer, TracerProvider};
    use opentelemetry_sdk::trace::SdkTracerProvider;

    /// An exporter that says it started and then never answers (a collector that accepts
    /// and never replies), until the test ends.
    #[derive(Debug)]
    struct Stuck(Mutex<SyncSender<()>>);

    impl SpanExporter for Stuck {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            if let Ok(tx) = self.0.lock() {
                let _ = tx.send(());
            }
            std::thread::park();
            Err(OTelSdkError::Timeout(Duration::ZERO))
        }
    }

    #[test]
    fn a_stuck_exporter_drops_spans_past_the_queue_and_never_blocks_the_caller() {
        let (entered_tx, entered) = std::sync::mpsc::sync_channel(4);
        let queue = BoundedQueue::new(Stuck(Mutex::new(entered_tx)), 8, "test".into()).unwrap();
        let counts = queue.counts.clone();
        let provider = Arc::new(
            SdkTracerProvider::builder()
                .with_span_processor(queue)
                .build(),
        );
        let tracer = provider.tracer("t");
        tracer.in_span("first", |_| {});
        // A flush sends the first span; the exporter then hangs.
        let flusher = provider.clone();
        std::thread::spawn(move || flusher.force_flush());
        entered
            .recv_timeout(Duration::from_secs(10))
            .expect("the export started");
        for _ in 0..100 {
            tracer.in_span("s", |_| {});
        }
        assert_eq!(counts.accepted.load(Ordering::SeqCst), 1 + 8);
        assert_eq!(counts.dropped.load(Ordering::SeqCst), 92);
        assert!(
            !counts.warned.load(Ordering::SeqCst),
            "no warning before the exit"
        );
        let r = provider.shutdown_with_timeout(Duration::from_millis(100));
        assert!(r.is_err(), "the stuck export cannot finish");
        assert!(
            counts.warned.load(Ordering::SeqCst),
            "the loss is reported once"
        );
    }
}
