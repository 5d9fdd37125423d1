//! Entry points for the fuzz targets under `fuzz/` (cargo feature `fuzzing`, which no
//! shipped build enables): the reply decoders of both wire formats fed from bytes, with no
//! HTTP in between, handled the way one request attempt handles a streamed body.

use crate::anthropic::AnthropicWire;
use crate::http::Wire;
use crate::openai::OpenAiWire;
use crate::{ProviderError, StreamEvent};
use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use std::convert::Infallible;
use std::task::{Context, Poll, Waker};

/// Which provider protocol a body is decoded as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    /// OpenAI Chat Completions (and every OpenAI-compatible server).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

fn wire(format: WireFormat) -> Box<dyn Wire> {
    let provider = "fuzz".to_string();
    match format {
        WireFormat::OpenAi => Box::new(OpenAiWire {
            provider,
            auth_hint: "OPENAI_API_KEY".into(),
        }),
        WireFormat::Anthropic => Box::new(AnthropicWire {
            provider,
            auth_hint: "ANTHROPIC_API_KEY".into(),
        }),
    }
}

fn stream_error(message: String) -> ProviderError {
    ProviderError::Stream {
        provider: "fuzz".into(),
        message,
        after_tool_call: false,
    }
}

/// Decode a streamed reply whose body arrives in `chunks` (SSE framing and the provider's
/// event decoder), as a request attempt does: the items the attempt's stream would yield,
/// ending at the reply's `Done`, at the first error, or at the end of the body.
pub fn decode_stream(
    format: WireFormat,
    chunks: &[&[u8]],
) -> Vec<Result<StreamEvent, ProviderError>> {
    let mut decoder = wire(format).decoder();
    let body = futures::stream::iter(
        chunks
            .iter()
            .map(|c| Ok::<_, Infallible>(Bytes::copy_from_slice(c))),
    );
    let mut events = body.eventsource();
    // The body is in memory, so every poll is ready at once.
    let mut cx = Context::from_waker(Waker::noop());
    let mut items = Vec::new();
    while let Poll::Ready(next) = events.poll_next_unpin(&mut cx) {
        let mut out = Vec::new();
        match next {
            Some(Ok(ev)) => match decoder.on_event(&ev.event, &ev.data, &mut out) {
                Ok(done) => {
                    items.extend(out.into_iter().map(Ok));
                    if done {
                        break;
                    }
                }
                Err(e) => {
                    items.push(Err(e));
                    break;
                }
            },
            Some(Err(e)) => {
                // A body that breaks after a complete reply still counts.
                match decoder.on_eof(&mut out) {
                    Ok(()) => items.extend(out.into_iter().map(Ok)),
                    Err(_) => items.push(Err(stream_error(format!("invalid SSE: {e}")))),
                }
                break;
            }
            None => {
                match decoder.on_eof(&mut out) {
                    Ok(()) => items.extend(out.into_iter().map(Ok)),
                    Err(m) => items.push(Err(stream_error(m.to_string()))),
                }
                break;
            }
        }
    }
    items
}

/// Decode a whole (non-streamed) JSON reply.
pub fn decode_full(format: WireFormat, body: &[u8]) -> Result<Vec<StreamEvent>, ProviderError> {
    wire(format).parse_full(body)
}
