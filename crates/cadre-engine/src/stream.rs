//! The stream phase of a turn: one model call, its streamed text and thinking shown as they
//! come, its tool calls and usage gathered into the reply, and a reply past its size cap
//! cut off. A call stopped by a budget is still read to its usage for a moment: what the
//! provider bills is counted.

use crate::agent::AgentConfig;
use crate::run_loop::Emitter;
use cadre_llm::{ModelRequest, StreamEvent};
use cadre_tools::{Budget, Spend};
use cadre_types::{Event, Usage};
use futures::StreamExt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
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

/// Charge one model call's `usage`, priced at the run's model, to the run's budget node and
/// report it with the running total; returns it priced.
pub(crate) fn charge_call(
    cfg: &AgentConfig,
    budget: &Budget,
    emitter: &Emitter,
    usage: Usage,
) -> Usage {
    // Priced per call: the calls of a job may use models with different prices.
    let call_usage = usage.priced(cfg.model.price.map(|p| p.cost_usd(&usage)));
    budget.charge(Spend::tokens(call_usage));
    emitter.emit(Event::Usage {
        usage: call_usage,
        total: budget.spent().usage,
        subagent: None,
    });
    call_usage
}

/// One model call of a run that `stop` (or its budget running out) may end. `None` when it
/// was stopped: no call starts once the budget is exhausted (checked here, when the call
/// would start, not when a watcher gets round to cancelling `stop`), and a call stopped by
/// the budget is read on, unshown, for [`DRAIN_GRACE`] so the usage the provider reports
/// for it is charged (billed is billed).
pub(crate) async fn call_model(
    cfg: &AgentConfig,
    request: ModelRequest,
    emitter: &Emitter,
    stop: &CancellationToken,
    budget: &Budget,
    span: tracing::Span,
) -> Option<Result<Reply, FailedReply>> {
    if stop.is_cancelled() || budget.exceeded().is_some() {
        return None;
    }
    let meter = CallMeter::default();
    let call = stream_reply(cfg, request, emitter, &meter).instrument(span.clone());
    tokio::pin!(call);
    tokio::select! {
        biased;
        _ = stop.cancelled() => {}
        _ = budget.exhausted() => {}
        r = &mut call => {
            match &r {
                Ok(reply) => cadre_tools::otel::record_chat(
                    &span,
                    crate::spans::tokens_of(&reply.usage),
                    reply.stop_reason.as_deref(),
                    reply.response_id.as_deref(),
                    &reply.text,
                ),
                Err(failed) => {
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
    if budget.exceeded().is_some() {
        meter.muted.store(true, Ordering::Relaxed);
        let _ = tokio::time::timeout(DRAIN_GRACE, &mut call).await;
    }
    let usage = meter.usage();
    cadre_tools::otel::record_chat(&span, crate::spans::tokens_of(&usage), None, None, "");
    cadre_tools::otel::record_error(&span, "cancelled");
    if usage != Usage::default() {
        charge_call(cfg, budget, emitter, usage);
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
    pub(crate) error: cadre_llm::ProviderError,
    pub(crate) partial_text: String,
}

async fn stream_reply(
    cfg: &AgentConfig,
    request: ModelRequest,
    emitter: &Emitter,
    meter: &CallMeter,
) -> Result<Reply, FailedReply> {
    let mut cap = crate::reply_cap::ReplyCap::new(cfg.max_reply_bytes, cfg.max_output_tokens);
    let mut stream = cfg.model.provider.stream(request);
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
                error: cadre_llm::ProviderError::ReplyTooLong {
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
