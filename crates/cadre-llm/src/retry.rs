//! Retry policy for HTTP providers: exponential backoff with full jitter, `Retry-After`
//! honoured up to a cap, and the stream wrapper that re-sends a request whose reply failed
//! before any event reached the consumer.

use crate::{ModelStream, ProviderConfig, ProviderError};
use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How often and how patiently a provider re-sends a failed request.
///
/// A request is retried when its error is retryable ([`ProviderError::is_retryable`]:
/// HTTP 408/409/429/5xx/529, connection errors, a stream that broke before any content)
/// and no event of the reply has reached the consumer yet. Errors such as 400, 401, 403,
/// 404, an idle timeout, or a stream that broke after content was emitted are returned
/// at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per request, including the first (at least 1).
    pub max_attempts: u32,
    /// Backoff before the first retry; it doubles with every further retry.
    pub base_delay: Duration,
    /// Upper bound of the backoff.
    pub max_delay: Duration,
    /// Longest server `Retry-After` honoured; longer values are cut to this.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The default policy with `max_attempts` and `max_retry_after_secs` taken from a
    /// provider table when set.
    pub fn from_config(cfg: &ProviderConfig) -> Self {
        let mut policy = Self::default();
        if let Some(n) = cfg.max_attempts {
            policy.max_attempts = n.max(1);
        }
        if let Some(secs) = cfg.max_retry_after_secs {
            policy.max_retry_after = Duration::from_secs(secs);
        }
        policy
    }

    /// This policy with another backoff base (tests use a few milliseconds).
    pub fn with_base_delay(mut self, base_delay: Duration) -> Self {
        self.base_delay = base_delay;
        self
    }

    /// This policy with another number of attempts (at least 1).
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts.max(1);
        self
    }

    /// The backoff before retry number `retry` (1 for the first retry): a uniformly random
    /// duration between zero and `min(max_delay, base_delay * 2^(retry-1))` ("full jitter").
    pub fn backoff(&self, retry: u32) -> Duration {
        let shift = retry.saturating_sub(1).min(31);
        let cap = self
            .base_delay
            .saturating_mul(1u32 << shift)
            .min(self.max_delay);
        let cap_micros = u64::try_from(cap.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(fastrand::u64(0..=cap_micros))
    }

    /// How long to wait before retry number `retry` after `error`: the server's
    /// `Retry-After` (capped at `max_retry_after`) when it sent one, else [`Self::backoff`].
    pub fn delay_for(&self, retry: u32, error: &ProviderError) -> Duration {
        match error.retry_after() {
            Some(after) => after.min(self.max_retry_after),
            None => self.backoff(retry),
        }
    }
}

/// Parse a `Retry-After` header value: whole seconds (`"120"`) or an HTTP date, taken
/// relative to `now`. A date in the past means "now" (zero). Unparseable values give `None`.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = value.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Some(Duration::from_secs_f64(secs.min(1e9)));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Something that starts one attempt of a request; its argument is the attempt number
/// (1 for the first).
pub(crate) type AttemptFn = Arc<dyn Fn(u32) -> ModelStream + Send + Sync>;

struct RetryState {
    make: AttemptFn,
    policy: RetryPolicy,
    provider: String,
    attempt: u32,
    current: ModelStream,
    emitted: bool,
    finished: bool,
}

/// Run attempts from `make` until one succeeds, an error is not retryable, an event has
/// already been passed on, or the attempts are used up. Errors end the stream.
pub(crate) fn with_retries(policy: RetryPolicy, provider: String, make: AttemptFn) -> ModelStream {
    let current = make(1);
    let state = RetryState {
        make,
        policy,
        provider,
        attempt: 1,
        current,
        emitted: false,
        finished: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.finished {
            return None;
        }
        loop {
            match st.current.next().await {
                Some(Ok(event)) => {
                    st.emitted = true;
                    return Some((Ok(event), st));
                }
                Some(Err(error)) => {
                    if st.emitted
                        || !error.is_retryable()
                        || st.attempt >= st.policy.max_attempts.max(1)
                    {
                        st.finished = true;
                        return Some((Err(error), st));
                    }
                    // Close the failed attempt's connection before waiting.
                    st.current = futures::stream::empty().boxed();
                    let delay = st.policy.delay_for(st.attempt, &error);
                    tracing::warn!(
                        provider = %st.provider,
                        attempt = st.attempt,
                        max_attempts = st.policy.max_attempts,
                        delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        error = %error,
                        "model request failed; retrying"
                    );
                    tokio::time::sleep(delay).await;
                    st.attempt += 1;
                    st.current = (st.make)(st.attempt);
                }
                None => return None,
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StreamEvent;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_retry_after(" 0.5 ", now),
            Some(Duration::from_millis(500))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(7)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[test]
    fn backoff_is_jittered_and_capped() {
        let p = RetryPolicy::default();
        for retry in 1..40 {
            let d = p.backoff(retry);
            assert!(d <= p.max_delay, "{d:?}");
            let cap = p.base_delay.saturating_mul(1 << (retry - 1).min(31));
            assert!(d <= cap, "{d:?} > {cap:?}");
        }
        let err = ProviderError::Http {
            provider: "p".into(),
            status: 429,
            message: "slow down".into(),
            retry_after: Some(Duration::from_secs(500)),
        };
        assert_eq!(p.delay_for(1, &err), Duration::from_secs(60));
    }

    #[test]
    fn config_overrides_defaults() {
        let cfg = ProviderConfig {
            max_attempts: Some(0),
            max_retry_after_secs: Some(5),
            ..Default::default()
        };
        let p = RetryPolicy::from_config(&cfg);
        assert_eq!(p.max_attempts, 1);
        assert_eq!(p.max_retry_after, Duration::from_secs(5));
    }

    fn failing(status: u16) -> ModelStream {
        futures::stream::once(async move {
            Err(ProviderError::Http {
                provider: "p".into(),
                status,
                message: "x".into(),
                retry_after: None,
            })
        })
        .boxed()
    }

    #[tokio::test]
    async fn retries_retryable_errors_until_success() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let policy = RetryPolicy::default().with_base_delay(Duration::from_millis(1));
        let make: AttemptFn = Arc::new(move |attempt| {
            c.fetch_add(1, Ordering::SeqCst);
            if attempt < 3 {
                failing(503)
            } else {
                futures::stream::iter(vec![Ok(StreamEvent::TextDelta("ok".into()))]).boxed()
            }
        });
        let out: Vec<_> = with_retries(policy, "p".into(), make).collect().await;
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].as_ref().unwrap(),
            &StreamEvent::TextDelta("ok".into())
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn does_not_retry_after_content_or_on_client_errors() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let policy = RetryPolicy::default().with_base_delay(Duration::from_millis(1));
        let make: AttemptFn = Arc::new(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            futures::stream::iter(vec![Ok(StreamEvent::TextDelta("a".into()))])
                .chain(failing(503))
                .boxed()
        });
        let out: Vec<_> = with_retries(policy.clone(), "p".into(), make)
            .collect()
            .await;
        assert_eq!(out.len(), 2);
        assert!(out[1].is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let make: AttemptFn = Arc::new(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            failing(400)
        });
        let out: Vec<_> = with_retries(policy, "p".into(), make).collect().await;
        assert_eq!(out.len(), 1);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
