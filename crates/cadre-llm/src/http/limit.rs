//! A cap on how many requests one provider has in flight at once
//! (`max_concurrent_requests`): a wide fan-out against a local server (vLLM, Ollama,
//! llama.cpp) queues here instead of opening thousands of connections. A request holds its
//! slot from the first attempt until its reply ends or is dropped, retries included.

use crate::ModelStream;
use futures::StreamExt;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// The stream `make` returns, started only once a slot of `limit` is free (at once without
/// a limit).
pub(crate) fn gated(
    limit: Option<&Arc<Semaphore>>,
    make: impl FnOnce() -> ModelStream + Send + 'static,
) -> ModelStream {
    let Some(limit) = limit.cloned() else {
        return make();
    };
    let stream = futures::stream::once(async move {
        // The semaphore is never closed, so acquiring only waits.
        let permit = limit.acquire_owned().await.ok();
        make().map(move |event| {
            let _slot = &permit;
            event
        })
    })
    .flatten();
    Box::pin(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StreamEvent;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn at_most_the_limit_run_at_once_and_all_finish() {
        let limit = Arc::new(Semaphore::new(2));
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let streams: Vec<ModelStream> = (0..6)
            .map(|i| {
                let (running, peak) = (running.clone(), peak.clone());
                gated(Some(&limit), move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    Box::pin(futures::stream::once(async move {
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        running.fetch_sub(1, Ordering::SeqCst);
                        Ok(StreamEvent::TextDelta(i.to_string()))
                    }))
                })
            })
            .collect();
        let outs = futures::future::join_all(
            streams
                .into_iter()
                .map(futures::StreamExt::collect::<Vec<_>>),
        )
        .await;
        assert_eq!(outs.iter().map(Vec::len).sum::<usize>(), 6);
        assert_eq!(peak.load(Ordering::SeqCst), 2);
        assert_eq!(limit.available_permits(), 2, "every slot was given back");
    }

    #[tokio::test]
    async fn without_a_limit_the_stream_starts_at_once() {
        let s = gated(None, || Box::pin(futures::stream::empty()));
        assert!(s.collect::<Vec<_>>().await.is_empty());
    }
}
