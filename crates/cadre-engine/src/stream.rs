//! The stream phase of a turn: one model call, its streamed text and thinking shown as they
//! come, its tool calls and usage gathered into the reply, and a reply past its size cap
//! cut off. A call stopped by a budget is still read to its usage for a moment: what the
//! provider bills is counted. Between a failed attempt and its retry the provider asks the
//! run whether it may still act (its stop, its budget, its observer). A call whose reply is
//! read whole and not shown (a compaction's summary) obeys the same stops.

use crate::agent::AgentConfig;
use crate::observer::{Step, TurnObserver};
use crate::run_loop::Emitter;
use crate::run_state::Stop;
use cadre_llm::{
    ModelRequest, ModelResponse, ProviderError, ResolvedModel, RetryAsks, RetryGate, StreamEvent,
};
use cadre_tools::{Budget, RunContext, Spend};
use cadre_types::{Event, Usage};
use futures::StreamExt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tracing::Instrument;

/// How long a model call stopped by a budget is still read for its usage. Shorter than the
/// grace a parent gives a stopped sub-agent call, so a child's last reply is counted before
/// its parent gives up on it.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// What one model call reported so far, readable after its stream is dropped, and whether
/// its content is still shown.
#[derive(Default)]
struct CallMeter {
    usage: Mutex<Usage>,
    muted: AtomicBool,
}

impl CallMeter {
    fn add(&self, u: Usage) {
        if let Ok(mut total) = self.usage.lock() {
            *total += u;
        }
    }

    fn usage(&self) -> Usage {
        self.usage.lock().map(|u| *u).unwrap_or_default()
    }

    fn shown(&self) -> bool {
        !self.muted.load(Ordering::Relaxed)
    }
}

/// Charge one model call's `usage`, priced at the `model` it called, to the run's budget
/// node and report it with the running total; returns it priced.
pub(crate) fn charge_call(
    model: &ResolvedModel,
    budget: &Budget,
    emitter: &Emitter,
    usage: Usage,
) -> Usage {
    // Priced per call: the calls of a job may use models with different prices.
    let call_usage = usage.priced(model.price.map(|p| p.cost_usd(&usage)));
    // Reported in the budget's critical section: a report that says the limit is crossed
    // comes before any call a sibling could still start.
    budget.charge_then(Spend::tokens(call_usage), |total| {
        emitter.emit(Event::Usage {
            usage: call_usage,
            total: total.usage,
            subagent: None,
        });
    });
    call_usage
}

/// Who may stop a model call before it starts and between its attempts: the run's observer
/// (a durable child's lease) and the run it asks for.
pub(crate) struct Gate<'a> {
    pub(crate) observer: &'a dyn TurnObserver,
    pub(crate) run: &'a RunContext,
}

impl Gate<'_> {
    /// Whether the run may take a model step now: it is not stopped and its observer lets
    /// it. An observer's refusal stops the run, as a refused step does. The budget is
    /// checked where the call starts (see [`Budget::start`]).
    pub(crate) async fn may_call(&self, stop: &Stop) -> bool {
        if stop.token.is_cancelled() {
            return false;
        }
        if self.observer.may_proceed(self.run, Step::ModelCall).await {
            return true;
        }
        stop.token.cancel();
        false
    }

    /// Whether a retry of the call may be sent now: its budget is not exhausted and the
    /// run may take a model step ([`may_call`](Self::may_call)).
    async fn allows_retry(&self, stop: &Stop) -> bool {
        stop.budget.start(|| ()).is_some() && self.may_call(stop).await
    }

    /// Run `call`, a model call whose request carries the gate of `asks`, answering the
    /// provider's questions as they come: they come between attempts, while the reply
    /// waits for the answer, so they are answered while it is read.
    pub(crate) async fn answer_while<T>(
        &self,
        stop: &Stop,
        asks: &mut RetryAsks,
        call: impl Future<Output = T>,
    ) -> T {
        tokio::pin!(call);
        loop {
            tokio::select! {
                r = &mut call => return r,
                Some(ask) = asks.next() => ask.answer(self.allows_retry(stop).await),
            }
        }
    }
}

/// A model call on `model` whose reply is read whole and not shown (a compaction's
/// summary), stopped like [`call_model`]: `None` when the run may not take the step (it is
/// stopped, or `gate` says no), its budget is exhausted when the call would start (checked
/// and started in one critical section), or either happens during the call, a refused retry
/// included. The usage of a reply is charged to the run's budget and reported.
pub(crate) async fn call_unshown(
    model: &ResolvedModel,
    mut request: ModelRequest,
    emitter: &Emitter,
    stop: &Stop,
    gate: Gate<'_>,
) -> Option<Result<ModelResponse, ProviderError>> {
    if !gate.may_call(stop).await {
        return None;
    }
    let (retry_gate, mut asks) = RetryGate::channel();
    request.retry_gate = retry_gate;
    let stream = stop.budget.start(|| model.provider.stream(request))?;
    let reply = tokio::select! {
        biased;
        _ = stop.token.cancelled() => return None,
        _ = stop.budget.exhausted() => return None,
        r = gate.answer_while(stop, &mut asks, cadre_llm::collect(stream)) => r,
    };
    match reply {
        Err(ProviderError::RetryRefused { .. }) => None,
        Err(e) => Some(Err(e)),
        Ok(reply) => {
            charge_call(model, &stop.budget, emitter, reply.usage);
            Some(Ok(reply))
        }
    }
}

/// One model call of a run that `stop` (or its budget running out) may end. `None` when it
/// was stopped: no call starts once the budget is exhausted (the check and the start are
/// one critical section of the budget, see [`Budget::start`]), no retry is sent once the
/// run is stopped, its budget exhausted, or `gate` says no (the provider asks between
/// attempts), and a call stopped by the budget is read on, unshown, for [`DRAIN_GRACE`] so
/// the usage the provider reports for it is charged (billed is billed).
pub(crate) async fn call_model(
    cfg: &AgentConfig,
    mut request: ModelRequest,
    emitter: &Emitter,
    stop: &Stop,
    gate: Gate<'_>,
    span: tracing::Span,
) -> Option<Result<Reply, FailedReply>> {
    if stop.token.is_cancelled() {
        return None;
    }
    let (retry_gate, mut asks) = RetryGate::channel();
    request.retry_gate = retry_gate;
    let stream = stop.budget.start(|| cfg.model.provider.stream(request))?;
    let meter = CallMeter::default();
    let started = tokio::time::Instant::now();
    let reply = stream_reply(cfg, stream, emitter, &meter).instrument(span.clone());
    let call = gate.answer_while(stop, &mut asks, reply);
    tokio::pin!(call);
    tokio::select! {
        biased;
        _ = stop.token.cancelled() => {}
        _ = stop.budget.exhausted() => {}
        r = &mut call => {
            match &r {
                Ok(reply) => {
                    chat_metric(cfg, &reply.usage, started, None);
                    cadre_tools::otel::record_chat(
                        &span,
                        crate::spans::tokens_of(&reply.usage),
                        reply.stop_reason.as_deref(),
                        reply.response_id.as_deref(),
                        &reply.text,
                    );
                }
                // A retry refused: the call ends as a stopped one.
                Err(FailedReply {
                    error: ProviderError::RetryRefused { .. },
                    ..
                }) => return stopped(cfg, &meter, emitter, stop, &span, started),
                Err(failed) => {
                    chat_metric(cfg, &meter.usage(), started, Some("provider_error"));
                    cadre_tools::otel::record_chat(
                        &span,
                        crate::spans::tokens_of(&meter.usage()),
                        None,
                        None,
                        &failed.partial_text,
                    );
                    cadre_tools::otel::record_error(&span, "provider_error");
                }
            }
            return Some(r);
        }
    }
    if stop.budget.exceeded().is_some() {
        meter.muted.store(true, Ordering::Relaxed);
        let _ = tokio::time::timeout(DRAIN_GRACE, &mut call).await;
    }
    stopped(cfg, &meter, emitter, stop, &span, started)
}

/// A model call's tokens and duration, for the metrics.
fn chat_metric(
    cfg: &AgentConfig,
    usage: &Usage,
    started: tokio::time::Instant,
    error: Option<&str>,
) {
    cadre_tools::otel::metrics::chat_call(
        &cfg.model.spec,
        &cfg.name,
        crate::spans::tokens_of(usage),
        started.elapsed(),
        error,
    );
}

/// The end of a stopped call: what it reported is charged, and it has no reply.
fn stopped(
    cfg: &AgentConfig,
    meter: &CallMeter,
    emitter: &Emitter,
    stop: &Stop,
    span: &tracing::Span,
    started: tokio::time::Instant,
) -> Option<Result<Reply, FailedReply>> {
    let usage = meter.usage();
    chat_metric(cfg, &usage, started, Some("cancelled"));
    cadre_tools::otel::record_chat(span, crate::spans::tokens_of(&usage), None, None, "");
    cadre_tools::otel::record_error(span, "cancelled");
    if usage != Usage::default() {
        charge_call(&cfg.model, &stop.budget, emitter, usage);
    }
    None
}

pub(crate) struct Reply {
    pub(crate) text: String,
    pub(crate) thinking: String,
    pub(crate) signature: Option<String>,
    pub(crate) calls: Vec<cadre_types::ToolCall>,
    pub(crate) usage: Usage,
    /// The provider's stop reason, if it gave one.
    pub(crate) stop_reason: Option<String>,
    /// The provider's id of the reply, for its `chat` span.
    pub(crate) response_id: Option<String>,
}

/// A model call that failed, with the text it streamed before failing (part of the run's
/// output: nothing the model wrote is dropped).
pub(crate) struct FailedReply {
    pub(crate) error: ProviderError,
    pub(crate) partial_text: String,
}

async fn stream_reply(
    cfg: &AgentConfig,
    mut stream: cadre_llm::ModelStream,
    emitter: &Emitter,
    meter: &CallMeter,
) -> Result<Reply, FailedReply> {
    let mut cap = crate::reply_cap::ReplyCap::new(cfg.max_reply_bytes, cfg.max_output_tokens);
    let mut reply = Reply {
        text: String::new(),
        thinking: String::new(),
        signature: None,
        calls: Vec::new(),
        usage: Usage::default(),
        stop_reason: None,
        response_id: None,
    };
    while let Some(ev) = stream.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(error) => {
                return Err(FailedReply {
                    error,
                    partial_text: reply.text,
                });
            }
        };
        if cap.exceeded_by(&ev) {
            // Dropping the stream closes the connection: nothing more of it is read.
            return Err(FailedReply {
                error: ProviderError::ReplyTooLong {
                    provider: cfg.model.provider.name().to_string(),
                    limit: cfg.max_reply_bytes,
                },
                partial_text: reply.text,
            });
        }
        match ev {
            StreamEvent::TextDelta(t) => {
                reply.text.push_str(&t);
                if meter.shown() {
                    emitter.emit(Event::TextDelta { text: t });
                }
            }
            StreamEvent::ThinkingDelta(t) => {
                reply.thinking.push_str(&t);
                if meter.shown() {
                    emitter.emit(Event::ThinkingDelta { text: t });
                }
            }
            StreamEvent::ThinkingSignature(s) => reply.signature = Some(s),
            StreamEvent::ToolCall(c) => reply.calls.push(c),
            StreamEvent::Usage(u) => {
                reply.usage += u;
                meter.add(u);
            }
            StreamEvent::Restart => {
                // The provider asks again from the start: what streamed so far is not part
                // of the reply (it was shown, so say that it is discarded).
                reply.text.clear();
                reply.thinking.clear();
                reply.signature = None;
                cap = crate::reply_cap::ReplyCap::new(cfg.max_reply_bytes, cfg.max_output_tokens);
                cadre_tools::otel::retry_event("the reply broke off before any tool call");
                emitter.emit(Event::Notice {
                    message: "the reply broke off before any tool call; asking the model again \
                              (the text above is discarded)"
                        .into(),
                });
            }
            StreamEvent::ResponseId(id) => reply.response_id = Some(id),
            StreamEvent::Done { stop_reason } => {
                reply.stop_reason = stop_reason;
                break;
            }
        }
    }
    Ok(reply)
}
