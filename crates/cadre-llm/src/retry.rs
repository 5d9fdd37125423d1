//! Retry policy for HTTP providers: exponential backoff with full jitter, `Retry-After`
//! honoured up to a cap (above it the call fails at once), a bound on the whole time spent
//! retrying, and the stream wrapper that re-sends a request whose reply failed before any
//! tool-call content (text already passed on is discarded with [`StreamEvent::Restart`]).

use crate::{ModelStream, ProviderConfig, ProviderError, StreamEvent};
use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How often and how patiently a provider re-sends a failed request.
///
/// A request is retried when its error is retryable ([`ProviderError::is_retryable`]:
/// HTTP 408/409/429/5xx/529, connection errors, a stream that broke or stalled before any
/// tool-call content) and no tool call of the reply has reached the consumer. Errors such
/// as 400, 401, 403, 404, a `Retry-After` above `max_retry_after`, or a break after
/// tool-call content are returned at once; so is any error once retrying would go on past
/// `give_up_after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per request, including the first (at least 1).
    pub max_attempts: u32,
    /// Backoff before the first retry; it doubles with every further retry.
    pub base_delay: Duration,
    /// Upper bound of the backoff.
    pub max_delay: Duration,
    /// Longest server `Retry-After` honoured; a longer one fails the call at once.
    pub max_retry_after: Duration,
    /// No retry starts later than this after the first attempt did: a dead provider is
    /// given up on within it.
    pub give_up_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            give_up_after: Duration::from_secs(30),
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
    /// `Retry-After` when it sent one, else [`Self::backoff`].
    pub fn delay_for(&self, retry: u32, error: &ProviderError) -> Duration {
        match error.retry_after() {
            Some(after) => after,
            None => self.backoff(retry),
        }
    }

    /// Whether to retry after `error`, `elapsed` after the first attempt started and
    /// `delay` before the next one would: `Err` with the error to return when not.
    fn retry_or_fail(
        &self,
        attempt: u32,
        error: ProviderError,
        elapsed: Duration,
        delay: Duration,
    ) -> Result<(), ProviderError> {
        if !error.is_retryable() || attempt >= self.max_attempts.max(1) {
            return Err(error);
        }
        let asked = error.retry_after();
        if asked.is_some_and(|after| after > self.max_retry_after) {
            let limit = format!("more than the {} cadre waits", human(self.max_retry_after));
            return Err(not_waiting(error, delay, &limit));
        }
        if elapsed.saturating_add(delay) > self.give_up_after {
            return Err(match asked {
                Some(_) => {
                    let limit = format!("past the {} cadre retries for", human(self.give_up_after));
                    not_waiting(error, delay, &limit)
                }
                None => error,
            });
        }
        Ok(())
    }
}

/// A duration for people: `27 h`, `5 min`, `40 s`.
fn human(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        s if s >= 3600 => format!("{} h", s / 3600),
        s if s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// `error` (an HTTP error with `Retry-After`) saying that cadre does not wait `after`.
fn not_waiting(error: ProviderError, after: Duration, limit: &str) -> ProviderError {
    match error {
        ProviderError::Http {
            provider,
            status,
            message,
            retry_after,
        } => ProviderError::Http {
            provider,
            status,
            message: format!(
                "{message} (the server asks to wait {}, {limit}: not retried)",
                human(after)
            ),
            retry_after,
        },
        other => other,
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
    /// Text or thinking of the current attempt was passed on.
    emitted: bool,
    /// A tool call was passed on: the reply is never asked for again.
    tool_call: bool,
    started: tokio::time::Instant,
    finished: bool,
    /// Asked after each backoff, before the retry is sent.
    gate: crate::RetryGate,
}

/// Run attempts from `make` until one succeeds, an error is not retryable, a tool call has
/// already been passed on, retrying would take too long, or the attempts are used up.
/// Before a retry that follows passed-on text, [`StreamEvent::Restart`] is passed on.
/// After each backoff `gate` is asked whether the retry may be sent; a refusal ends the
/// stream with [`ProviderError::RetryRefused`] and nothing more is sent. Errors end the
/// stream.
pub(crate) fn with_retries(
    policy: RetryPolicy,
    provider: String,
    gate: crate::RetryGate,
    make: AttemptFn,
) -> ModelStream {
    let current = make(1);
    let state = RetryState {
        make,
        policy,
        provider,
        attempt: 1,
        current,
        emitted: false,
        tool_call: false,
        started: tokio::time::Instant::now(),
        finished: false,
        gate,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.finished {
            return None;
        }
        loop {
            match st.current.next().await {
                Some(Ok(event)) => {
                    st.tool_call |= matches!(event, StreamEvent::ToolCall(_));
                    st.emitted = true;
                    return Some((Ok(event), st));
                }
                Some(Err(error)) => {
                    let delay = st.policy.delay_for(st.attempt, &error);
                    let error = if st.tool_call {
                        Err(error)
                    } else {
                        let elapsed = st.started.elapsed();
                        st.policy
                            .retry_or_fail(st.attempt, error.clone(), elapsed, delay)
                            .map(|()| error)
                    };
                    let error = match error {
                        Ok(e) => e,
                        Err(e) => {
                            st.finished = true;
                            return Some((Err(e), st));
                        }
                    };
                    // Close the failed attempt's connection before waiting.
                    st.current = futures::stream::empty().boxed();
                    tracing::warn!(
                        provider = %st.provider,
                        attempt = st.attempt,
                        max_attempts = st.policy.max_attempts,
                        delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        error = %error,
                        "model request failed; retrying"
                    );
                    tokio::time::sleep(delay).await;
                    // The backoff may have lasted seconds: the caller decides whether the
                    // retry still may be sent (the run may have lost its task or budget).
                    if !st.gate.allows(st.attempt + 1).await {
                        st.finished = true;
                        let refused = ProviderError::RetryRefused {
                            provider: st.provider.clone(),
                            message: error.to_string(),
                        };
                        return Some((Err(refused), st));
                    }
                    st.attempt += 1;
                    st.current = (st.make)(st.attempt);
                    if std::mem::take(&mut st.emitted) {
                        return Some((Ok(StreamEvent::Restart), st));
                    }
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
        assert_eq!(p.delay_for(1, &err), Duration::from_secs(500));
    }

    fn rate_limited(secs: u64) -> ProviderError {
        ProviderError::Http {
            provider: "p".into(),
            status: 429,
            message: "rate limited for 27 h".into(),
            retry_after: Some(Duration::from_secs(secs)),
        }
    }

    #[tokio::test]
    async fn a_retry_after_above_the_cap_fails_at_once_with_the_servers_message() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let make: AttemptFn = Arc::new(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            futures::stream::once(async { Err(rate_limited(99_999)) }).boxed()
        });
        let started = std::time::Instant::now();
        let out: Vec<_> = with_retries(
            RetryPolicy::default(),
            "p".into(),
            crate::RetryGate::default(),
            make,
        )
        .collect()
        .await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let err = out[0].as_ref().unwrap_err().to_string();
        assert_eq!(
            err,
            "p returned HTTP 429: rate limited for 27 h (the server asks to wait 27 h, more \
             than the 1 min cadre waits: not retried)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_defaults_give_up_on_a_dead_provider_within_30_seconds() {
        // A provider that always says "busy, come back in 20 s", with attempts to spare.
        let make: AttemptFn =
            Arc::new(|_| futures::stream::once(async { Err(rate_limited(20)) }).boxed());
        let policy = RetryPolicy::default().with_max_attempts(100);
        let started = tokio::time::Instant::now();
        let out: Vec<_> = with_retries(policy, "p".into(), crate::RetryGate::default(), make)
            .collect()
            .await;
        assert!(
            started.elapsed() <= Duration::from_secs(30),
            "{:?}",
            started.elapsed()
        );
        let err = out.last().unwrap().as_ref().unwrap_err().to_string();
        assert!(err.contains("past the 30 s cadre retries for"), "{err}");
        // Errors without Retry-After: backoff until the same bound.
        let make: AttemptFn = Arc::new(|_| failing(503));
        let started = tokio::time::Instant::now();
        let policy = RetryPolicy::default().with_max_attempts(1000);
        let _: Vec<_> = with_retries(policy, "p".into(), crate::RetryGate::default(), make)
            .collect()
            .await;
        assert!(
            started.elapsed() <= Duration::from_secs(30),
            "{:?}",
            started.elapsed()
        );
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
        let out: Vec<_> = with_retries(policy, "p".into(), crate::RetryGate::default(), make)
            .collect()
            .await;
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].as_ref().unwrap(),
            &StreamEvent::TextDelta("ok".into())
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn text_is_restarted_but_a_tool_call_is_never_asked_for_again() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let policy = RetryPolicy::default().with_base_delay(Duration::from_millis(1));
        let make: AttemptFn = Arc::new(move |attempt| {
            c.fetch_add(1, Ordering::SeqCst);
            let text = Ok(StreamEvent::TextDelta(format!("try {attempt}")));
            if attempt == 1 {
                futures::stream::iter(vec![text])
                    .chain(failing(503))
                    .boxed()
            } else {
                futures::stream::iter(vec![text]).boxed()
            }
        });
        let out: Vec<_> = with_retries(
            policy.clone(),
            "p".into(),
            crate::RetryGate::default(),
            make,
        )
        .collect()
        .await;
        let out: Vec<StreamEvent> = out.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            out,
            vec![
                StreamEvent::TextDelta("try 1".into()),
                StreamEvent::Restart,
                StreamEvent::TextDelta("try 2".into()),
            ]
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);

        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let make: AttemptFn = Arc::new(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            let call = cadre_types::ToolCall {
                id: "c".into(),
                name: "t".into(),
                arguments: "{}".into(),
            };
            futures::stream::iter(vec![Ok(StreamEvent::ToolCall(call))])
                .chain(failing(503))
                .boxed()
        });
        let out: Vec<_> = with_retries(
            policy.clone(),
            "p".into(),
            crate::RetryGate::default(),
            make,
        )
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
        let out: Vec<_> = with_retries(policy, "p".into(), crate::RetryGate::default(), make)
            .collect()
            .await;
        assert_eq!(out.len(), 1);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_the_gate_refuses_is_not_sent() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let make: AttemptFn = Arc::new(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            failing(503)
        });
        let (gate, mut asks) = crate::RetryGate::channel();
        // The caller allows the first retry and refuses the second.
        let answers = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(ask) = asks.next().await {
                seen.push(ask.attempt);
                ask.answer(seen.len() < 2);
            }
            seen
        });
        let out: Vec<_> = with_retries(RetryPolicy::default(), "p".into(), gate, make)
            .collect()
            .await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(out.len(), 1);
        let err = out[0].as_ref().unwrap_err();
        assert!(matches!(err, ProviderError::RetryRefused { .. }), "{err}");
        assert!(!err.is_retryable());
        assert_eq!(answers.await.unwrap(), vec![2, 3]);
    }
}
