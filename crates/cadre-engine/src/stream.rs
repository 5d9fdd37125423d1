//! The stream phase of a turn: one model call, its streamed text and thinking shown as they
//! come, its tool calls and usage gathered into the reply, and a reply past its size cap
//! cut off.

use crate::agent::AgentConfig;
use crate::run_loop::Emitter;
use cadre_llm::{ModelRequest, StreamEvent};
use cadre_types::{Event, Usage};
use futures::StreamExt;

pub(crate) struct Reply {
    pub(crate) text: String,
    pub(crate) thinking: String,
    pub(crate) signature: Option<String>,
    pub(crate) calls: Vec<cadre_types::ToolCall>,
    pub(crate) usage: Usage,
}

/// A model call that failed, with the text it streamed before failing (part of the run's
/// output: nothing the model wrote is dropped).
pub(crate) struct FailedReply {
    pub(crate) error: cadre_llm::ProviderError,
    pub(crate) partial_text: String,
}

pub(crate) async fn stream_reply(
    cfg: &AgentConfig,
    request: ModelRequest,
    emitter: &Emitter,
) -> Result<Reply, FailedReply> {
    let mut cap = crate::reply_cap::ReplyCap::new(cfg.max_reply_bytes, cfg.max_output_tokens);
    let mut stream = cfg.model.provider.stream(request);
    let mut reply = Reply {
        text: String::new(),
        thinking: String::new(),
        signature: None,
        calls: Vec::new(),
        usage: Usage::default(),
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
                emitter.emit(Event::TextDelta { text: t });
            }
            StreamEvent::ThinkingDelta(t) => {
                reply.thinking.push_str(&t);
                emitter.emit(Event::ThinkingDelta { text: t });
            }
            StreamEvent::ThinkingSignature(s) => reply.signature = Some(s),
            StreamEvent::ToolCall(c) => reply.calls.push(c),
            StreamEvent::Usage(u) => reply.usage += u,
            StreamEvent::Restart => {
                // The provider asks again from the start: what streamed so far is not part
                // of the reply (it was shown, so say that it is discarded).
                reply.text.clear();
                reply.thinking.clear();
                reply.signature = None;
                cap = crate::reply_cap::ReplyCap::new(cfg.max_reply_bytes, cfg.max_output_tokens);
                emitter.emit(Event::Notice {
                    message: "the reply broke off before any tool call; asking the model again \
                              (the text above is discarded)"
                        .into(),
                });
            }
            StreamEvent::Done { .. } => break,
        }
    }
    Ok(reply)
}
