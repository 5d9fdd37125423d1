//! One request attempt (send, status check, SSE decoding with an idle timeout, or a
//! whole JSON body) and the retry loop around attempts.

use super::{HttpCore, SseDecoder, Wire, error_chain};
use crate::retry::{AttemptFn, parse_retry_after, with_retries};
use crate::{ModelStream, ProviderError, StreamEvent};
use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::CONTENT_TYPE;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

/// Largest response body read for a non-streaming reply or an error.
const MAX_BODY: usize = 64 * 1024 * 1024;
/// Largest error body kept for the message.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// How long to wait for the end of a body after the reply is complete.
const DRAIN_LIMIT: Duration = Duration::from_millis(250);
/// How far the bytes of one SSE event may go past the reply cap (the JSON around the
/// content): the SSE parser buffers an event whole, so this bounds its buffer.
const EVENT_SLACK: usize = 64 * 1024;

/// Send `body` to the provider with retries and stream the decoded reply, holding at most
/// `cap` bytes of its content.
pub(crate) fn run(
    core: Arc<HttpCore>,
    wire: Arc<dyn Wire>,
    model: String,
    cap: usize,
    body: Bytes,
) -> ModelStream {
    let policy = core.retry.clone();
    let name = core.name.clone();
    let limit = core.limit.clone();
    let model: Arc<str> = model.into();
    let make: AttemptFn = Arc::new(move |_attempt| {
        attempt(core.clone(), wire.clone(), model.clone(), cap, body.clone())
    });
    super::limit::gated(limit.as_ref(), move || with_retries(policy, name, make))
}

/// [`run`] an encoded body; an encoding failure is the stream's only item.
pub(crate) fn run_body(
    core: Arc<HttpCore>,
    wire: Arc<dyn Wire>,
    model: String,
    cap: usize,
    body: Result<Bytes, ProviderError>,
) -> ModelStream {
    match body {
        Ok(body) => run(core, wire, model, cap, body),
        Err(err) => Box::pin(futures::stream::once(async move { Err(err) })),
    }
}

/// Why the body stream stopped.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("no data within the idle timeout")]
    Idle,
    #[error("an event grew past the reply cap")]
    TooLong,
    #[error("{0}")]
    Broken(String),
}

type SseStream = BoxStream<'static, Result<eventsource_stream::Event, EventStreamError<BodyError>>>;

enum Phase {
    Connect,
    Sse {
        events: SseStream,
        decoder: Box<dyn SseDecoder>,
    },
    Drain(SseStream),
    Finished,
}

struct Attempt {
    core: Arc<HttpCore>,
    wire: Arc<dyn Wire>,
    model: Arc<str>,
    body: Bytes,
    phase: Phase,
    queue: VecDeque<StreamEvent>,
    /// Tool-call content arrived (a call begun or complete): past this point the reply is
    /// never asked for again.
    tool_call: bool,
    /// The reply cap in bytes (text, thinking, tool calls).
    cap: usize,
    /// Content bytes decoded so far.
    content: usize,
    /// Body bytes received since the last complete SSE event.
    since_event: Arc<AtomicUsize>,
}

/// Bytes of a reply event counted against the reply cap.
fn content_bytes(event: &StreamEvent) -> usize {
    match event {
        StreamEvent::TextDelta(t) | StreamEvent::ThinkingDelta(t) => t.len(),
        StreamEvent::ThinkingSignature(s) => s.len(),
        StreamEvent::ToolCall(c) => c.id.len() + c.name.len() + c.arguments.len(),
        StreamEvent::Usage(_)
        | StreamEvent::ResponseId(_)
        | StreamEvent::Restart
        | StreamEvent::Done { .. } => 0,
    }
}

impl Attempt {
    fn too_long(&self) -> ProviderError {
        ProviderError::ReplyTooLong {
            provider: self.core.name.clone(),
            limit: self.cap,
        }
    }

    /// Count `events` against the cap, with what the decoder still holds.
    fn check_cap(&mut self, events: &[StreamEvent], held: usize) -> Result<(), ProviderError> {
        self.content += events.iter().map(content_bytes).sum::<usize>();
        if self.content.saturating_add(held) > self.cap {
            return Err(self.too_long());
        }
        Ok(())
    }

    fn stream_error(&self, message: impl Into<String>) -> ProviderError {
        ProviderError::Stream {
            provider: self.core.name.clone(),
            message: message.into(),
            after_tool_call: self.tool_call,
        }
    }

    fn idle_error(&self) -> ProviderError {
        ProviderError::IdleTimeout {
            provider: self.core.name.clone(),
            after: self.core.idle_timeout,
            after_tool_call: self.tool_call,
        }
    }

    /// Mark decoder stream errors with whether tool-call content had arrived.
    fn fix(&self, error: ProviderError) -> ProviderError {
        match error {
            ProviderError::Stream {
                provider, message, ..
            } => ProviderError::Stream {
                provider,
                message,
                after_tool_call: self.tool_call,
            },
            other => other,
        }
    }

    fn body_error(&self, error: EventStreamError<BodyError>) -> ProviderError {
        match error {
            EventStreamError::Transport(BodyError::Idle) => self.idle_error(),
            EventStreamError::Transport(BodyError::TooLong) => self.too_long(),
            EventStreamError::Transport(BodyError::Broken(m)) => {
                self.stream_error(format!("connection broke mid-reply: {m}"))
            }
            EventStreamError::Utf8(e) => self.stream_error(format!("invalid UTF-8: {e}")),
            EventStreamError::Parser(e) => self.stream_error(format!("invalid SSE: {e}")),
        }
    }

    /// Send the request and check the status; on success set up the next phase.
    async fn connect(&mut self) -> Result<(), ProviderError> {
        let core = &self.core;
        let request = core
            .client
            .post(core.url.clone())
            .headers(core.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(self.body.clone());
        let response = match tokio::time::timeout(core.idle_timeout, request.send()).await {
            Err(_) => return Err(self.idle_error()),
            Ok(Err(e)) => {
                return Err(ProviderError::Transport {
                    provider: core.name.clone(),
                    message: error_chain(&e),
                });
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, SystemTime::now()));
            let location = status.is_redirection().then(|| {
                let to = response.headers().get(reqwest::header::LOCATION);
                crate::redirects::redirect_refused(to.and_then(|v| v.to_str().ok()))
            });
            let bytes = read_body(response, core.idle_timeout, MAX_ERROR_BODY)
                .await
                .unwrap_or_default();
            let text = match &location {
                Some(refused) => refused.as_str().into(),
                None => String::from_utf8_lossy(&bytes),
            };
            return Err(self
                .wire
                .map_error(status.as_u16(), &text, retry_after, &self.model));
        }
        if core.stream {
            let since = self.since_event.clone();
            let limit = self.cap.saturating_add(EVENT_SLACK);
            let events = idle_bytes(response, core.idle_timeout)
                .map(move |chunk| {
                    let chunk = chunk?;
                    let seen = since.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
                    if seen > limit {
                        return Err(BodyError::TooLong);
                    }
                    Ok(chunk)
                })
                .eventsource()
                .boxed();
            self.phase = Phase::Sse {
                events,
                decoder: self.wire.decoder(),
            };
            return Ok(());
        }
        let bytes = match read_body(response, core.idle_timeout, MAX_BODY).await {
            Ok(b) => b,
            Err(BodyError::Idle) => return Err(self.idle_error()),
            Err(BodyError::TooLong) => return Err(self.too_long()),
            Err(BodyError::Broken(m)) => {
                return Err(self.stream_error(format!("connection broke mid-reply: {m}")));
            }
        };
        let events = self.wire.parse_full(&bytes)?;
        self.check_cap(&events, 0)?;
        self.queue.extend(events);
        Ok(())
    }

    /// Produce the next item of the attempt's stream.
    async fn next(&mut self) -> Option<Result<StreamEvent, ProviderError>> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(Ok(event));
            }
            match std::mem::replace(&mut self.phase, Phase::Finished) {
                Phase::Finished => return None,
                Phase::Connect => {
                    if let Err(e) = self.connect().await {
                        return Some(Err(e));
                    }
                }
                Phase::Drain(mut events) => {
                    // Read to the end so the connection can be reused; ignore what comes.
                    let _ = tokio::time::timeout(DRAIN_LIMIT, async {
                        while let Some(Ok(_)) = events.next().await {}
                    })
                    .await;
                    return None;
                }
                Phase::Sse {
                    mut events,
                    mut decoder,
                } => {
                    let mut out = Vec::new();
                    match events.next().await {
                        Some(Ok(ev)) => match decoder.on_event(&ev.event, &ev.data, &mut out) {
                            Ok(done) => {
                                self.since_event.store(0, Ordering::Relaxed);
                                self.tool_call |= decoder.tool_call_started()
                                    || out.iter().any(|e| matches!(e, StreamEvent::ToolCall(_)));
                                if let Err(e) = self.check_cap(&out, decoder.held_bytes()) {
                                    return Some(Err(e));
                                }
                                self.phase = if done {
                                    Phase::Drain(events)
                                } else {
                                    Phase::Sse { events, decoder }
                                };
                            }
                            Err(e) => return Some(Err(self.fix(e))),
                        },
                        Some(Err(e @ EventStreamError::Transport(BodyError::TooLong))) => {
                            return Some(Err(self.body_error(e)));
                        }
                        Some(Err(e)) => {
                            // A body that breaks after the reply was complete (e.g. an
                            // OpenAI stream cut after `finish_reason`) still counts.
                            if decoder.on_eof(&mut out).is_err() {
                                return Some(Err(self.body_error(e)));
                            }
                            tracing::debug!(
                                provider = %self.core.name,
                                "stream broke after a complete reply"
                            );
                        }
                        None => {
                            if let Err(m) = decoder.on_eof(&mut out) {
                                return Some(Err(self.stream_error(m.to_string())));
                            }
                        }
                    }
                    self.queue.extend(out);
                }
            }
        }
    }
}

/// One attempt: send, check the status, decode the reply.
fn attempt(
    core: Arc<HttpCore>,
    wire: Arc<dyn Wire>,
    model: Arc<str>,
    cap: usize,
    body: Bytes,
) -> ModelStream {
    let state = Attempt {
        core,
        wire,
        model,
        body,
        phase: Phase::Connect,
        queue: VecDeque::new(),
        tool_call: false,
        cap,
        content: 0,
        since_event: Arc::new(AtomicUsize::new(0)),
    };
    futures::stream::unfold(state, |mut st| async move {
        let item = st.next().await?;
        if item.is_err() {
            st.phase = Phase::Finished;
            st.queue.clear();
        }
        Some((item, st))
    })
    .boxed()
}

/// The response body as a byte stream that fails when no bytes arrive for `idle`.
fn idle_bytes(
    response: reqwest::Response,
    idle: Duration,
) -> impl futures::Stream<Item = Result<Bytes, BodyError>> + Send + 'static {
    let inner = response.bytes_stream().boxed();
    futures::stream::unfold(Some(inner), move |state| async move {
        let mut inner = state?;
        match tokio::time::timeout(idle, inner.next()).await {
            Ok(Some(Ok(bytes))) => Some((Ok(bytes), Some(inner))),
            Ok(Some(Err(e))) => Some((Err(BodyError::Broken(error_chain(&e))), None)),
            Ok(None) => None,
            Err(_) => Some((Err(BodyError::Idle), None)),
        }
    })
}

/// Read a whole body (at most `limit` bytes are kept), failing on idle or a broken body.
async fn read_body(
    response: reqwest::Response,
    idle: Duration,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    let mut out = Vec::new();
    let mut stream = std::pin::pin!(idle_bytes(response, idle));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let room = limit.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}
