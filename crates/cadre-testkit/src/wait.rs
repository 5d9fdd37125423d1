//! Waiting on a condition with a deadline, the one way tests synchronise with work that
//! happens elsewhere (a child process, a spawned task, another store connection): poll the
//! condition until it holds and fail with a message naming it when the deadline passes, so a
//! slow machine only makes a test slower, never wrong, and a broken one fails with a reason.
//!
//! The async forms use tokio's clock, so under `tokio::time::pause` the deadline and the poll
//! interval are virtual too.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a condition is looked at again: short against any deadline a test names.
const POLL: Duration = Duration::from_millis(20);

/// Polls `cond` from this thread until it gives `Some` and returns that value, or `None` once
/// `within` has passed without it: for a caller that reports the failure itself (with what it
/// saw by then).
pub fn poll_for<T>(within: Duration, mut cond: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = cond() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// Polls `cond` from this thread until it gives `Some`, and returns that value; panics with
/// `what` once `within` has passed without it.
pub fn wait_for<T>(what: &str, within: Duration, cond: impl FnMut() -> Option<T>) -> T {
    match poll_for(within, cond) {
        Some(v) => v,
        None => panic!("timed out after {within:?} waiting for {what}"),
    }
}

/// Polls `cond` from this thread until it holds; panics with `what` once `within` has passed.
pub fn wait_until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    wait_for(what, within, || cond().then_some(()));
}

/// Polls the async `cond` until it gives `Some` and returns that value, or `None` once
/// `within` (on tokio's clock) has passed without it: for a caller that reports the failure
/// itself.
pub async fn poll_some<T, F, Fut>(within: Duration, mut cond: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = cond().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Polls the async `cond` until it gives `Some`, and returns that value; panics with `what`
/// once `within` (on tokio's clock) has passed without it.
pub async fn eventually_some<T, F, Fut>(what: &str, within: Duration, cond: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match poll_some(within, cond).await {
        Some(v) => v,
        None => panic!("timed out after {within:?} waiting for {what}"),
    }
}

/// Polls the async `cond` until it holds; panics with `what` once `within` (on tokio's clock)
/// has passed.
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_some(what, within, || {
        let f = cond();
        async move { f.await.then_some(()) }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn a_condition_that_comes_true_is_waited_for() {
        let n = AtomicU32::new(0);
        let got = wait_for("the third look", Duration::from_secs(5), || {
            (n.fetch_add(1, Ordering::SeqCst) == 2).then_some(7)
        });
        assert_eq!(got, 7);
    }

    #[test]
    fn a_condition_that_never_holds_gives_none_to_the_caller() {
        assert_eq!(poll_for(Duration::from_millis(50), || None::<u8>), None);
    }

    #[test]
    #[should_panic(expected = "waiting for never")]
    fn a_condition_that_never_holds_fails_naming_it() {
        wait_until("never", Duration::from_millis(50), || false);
    }

    #[tokio::test(start_paused = true)]
    async fn the_async_form_runs_on_paused_time() {
        let n = AtomicU32::new(0);
        eventually("the fifth look", Duration::from_secs(1), || {
            let seen = n.fetch_add(1, Ordering::SeqCst);
            async move { seen == 4 }
        })
        .await;
        assert_eq!(n.load(Ordering::SeqCst), 5);
    }
}
