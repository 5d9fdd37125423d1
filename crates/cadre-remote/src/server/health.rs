//! Health for load balancers and orchestrators: `GET /healthz` (the process answers) and
//! `GET /readyz` (this node should be given new work: its task store answers, it is not
//! draining and it has a free task slot). Both are unauthenticated, read no body and touch
//! no store: the store is probed by one background loop, one `SELECT 1` at a time bounded
//! by a short timeout, so probes arriving at any rate never open store connections. A
//! submission reads the same state and is refused at once while the store is down.

use super::state::State;
use axum::Json;
use axum::extract::State as AxumState;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How often the store is probed.
pub(crate) const PROBE_EVERY: Duration = Duration::from_millis(200);
/// How long one probe may take before the store counts as unreachable.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// A store whose last answered probe is older than this counts as unreachable, whatever
/// the probe loop says (it may be stuck).
const FRESH: Duration = Duration::from_secs(1);
/// What `Retry-After` tells a caller refused for a reason of this node.
pub(crate) const RETRY_AFTER_SECS: &str = "1";

/// How one probe ended.
enum Probe {
    /// The store answered.
    Answered,
    /// The store said no (refused the connection, an error): down at once.
    Failed(String),
    /// No answer within [`PROBE_TIMEOUT`].
    Late,
}

/// What the probe loop last found.
pub(crate) struct Health {
    /// When the health was made; the times below count from it.
    origin: Instant,
    /// Milliseconds from `origin` to the end of the last probe the store answered.
    answered_at: AtomicU64,
    /// Why the last probe failed (`None`: it succeeded).
    failure: Mutex<Option<String>>,
}

impl Health {
    /// The store just opened: it answered now.
    pub(crate) fn new() -> Self {
        Self {
            origin: Instant::now(),
            answered_at: AtomicU64::new(0),
            failure: Mutex::new(None),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn set_failure(&self, failure: Option<String>) {
        if let Ok(mut f) = self.failure.lock() {
            *f = failure;
        }
    }

    /// Record a probe's outcome. A late answer alone changes nothing: on a loaded machine
    /// one probe can wait past its timeout for a CPU, and refusing work for that would
    /// turn load into an outage; a store that stays silent is down once its last answer
    /// is older than [`FRESH`].
    fn probed(&self, outcome: Probe) {
        match outcome {
            Probe::Answered => {
                self.answered_at.store(self.now_ms(), Ordering::Release);
                self.set_failure(None);
            }
            Probe::Failed(e) => self.set_failure(Some(e)),
            Probe::Late => {}
        }
    }

    /// Why the store counts as unreachable now, or `None` when it answered its last probe,
    /// recently.
    pub(crate) fn store_down(&self) -> Option<String> {
        if let Ok(f) = self.failure.lock()
            && let Some(e) = f.as_ref()
        {
            return Some(e.clone());
        }
        let age = self
            .now_ms()
            .saturating_sub(self.answered_at.load(Ordering::Acquire));
        (age > u64::try_from(FRESH.as_millis()).unwrap_or(u64::MAX))
            .then(|| format!("no answer from the store for {age} ms"))
    }
}

/// Probe the store every [`PROBE_EVERY`] until dropped (the server aborts it).
pub(crate) async fn probe_loop(state: Arc<State>) {
    let store = state.runtime.store().clone();
    loop {
        let mut outcome = probe(store.as_ref()).await;
        if matches!(outcome, Probe::Failed(_)) {
            // One pooled connection the server dropped (reset by peer) fails its probe; the
            // pool replaces it, so a store is down only when a second probe fails too. A
            // stopped database refuses both at once.
            outcome = probe(store.as_ref()).await;
        }
        let was_down = state.health.store_down().is_some();
        state.health.probed(outcome);
        match (state.health.store_down(), was_down) {
            (Some(e), false) => tracing::warn!(error = %e, "store unreachable: not ready"),
            (None, true) => tracing::info!("store reachable again: ready"),
            _ => {}
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
}

/// One probe of `store`.
async fn probe(store: &dyn cadre_store::TaskStore) -> Probe {
    match tokio::time::timeout(PROBE_TIMEOUT, store.ping()).await {
        Ok(Ok(())) => Probe::Answered,
        Ok(Err(e)) => Probe::Failed(e.to_string()),
        Err(_) => Probe::Late,
    }
}

/// Why this node should not get new work now, or `None` when it is ready.
pub(crate) fn not_ready(state: &State) -> Option<&'static str> {
    if state.draining.is_cancelled() {
        return Some("draining");
    }
    if state.health.store_down().is_some() {
        return Some("store unreachable");
    }
    if state.book.free_slots() == 0 {
        return Some("at task cap");
    }
    None
}

fn uncached(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `GET /healthz`: the process answers.
pub(crate) async fn healthz() -> Response {
    uncached(Json(json!({"alive": true})).into_response())
}

/// `GET /readyz`: 200 `{"ready": true}`, or 503 `{"ready": false, "reason": …}` with
/// `Retry-After`.
pub(crate) async fn readyz(AxumState(state): AxumState<Arc<State>>) -> Response {
    match not_ready(&state) {
        None => uncached(Json(json!({"ready": true})).into_response()),
        Some(reason) => {
            let mut r = (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"ready": false, "reason": reason})),
            )
                .into_response();
            r.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECS),
            );
            uncached(r)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_probe_is_down_at_once_and_a_good_one_up_at_once() {
        let h = Health::new();
        assert_eq!(h.store_down(), None);
        h.probed(Probe::Failed("connection refused".into()));
        assert_eq!(h.store_down().as_deref(), Some("connection refused"));
        h.probed(Probe::Answered);
        assert_eq!(h.store_down(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_probe_is_down_only_once_the_store_has_been_silent_past_fresh() {
        // The flake this prevents: one probe starved of CPU refused the next submission.
        let h = Health::new();
        tokio::time::advance(PROBE_TIMEOUT).await;
        h.probed(Probe::Late);
        assert_eq!(h.store_down(), None, "one late answer");
        tokio::time::advance(FRESH).await;
        h.probed(Probe::Late);
        assert!(h.store_down().is_some_and(|e| e.contains("no answer")));
        h.probed(Probe::Answered);
        assert_eq!(h.store_down(), None);
    }
}
