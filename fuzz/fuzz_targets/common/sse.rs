//! Shared by the two SSE targets: split the input into chunks, decode it streamed and whole,
//! and check what a request attempt promises the engine.
//!
//! Input: the first byte sets the chunk length (1–256 bytes); the rest is the body.

use cadre_llm::StreamEvent;
use cadre_llm::fuzzing::{WireFormat, decode_full, decode_stream};

/// The events with generated tool-call ids blanked (OpenAI's decoder invents one when the
/// server sent none), and whether the stream ended in an error.
fn shape(items: &[Result<StreamEvent, cadre_llm::ProviderError>]) -> (Vec<StreamEvent>, bool) {
    let mut events = Vec::new();
    let mut failed = false;
    for item in items {
        match item {
            Ok(StreamEvent::ToolCall(call)) if call.id.starts_with("call_") => {
                let mut call = call.clone();
                call.id.clear();
                events.push(StreamEvent::ToolCall(call));
            }
            Ok(e) => events.push(e.clone()),
            Err(_) => failed = true,
        }
    }
    (events, failed)
}

/// Run both decoders of `format` on `data`.
pub fn check(format: WireFormat, data: &[u8]) {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let size = usize::from(first) + 1;
    let chunks: Vec<&[u8]> = body.chunks(size).collect();
    let items = decode_stream(format, &chunks);

    // Nothing follows an error; `Done` comes once, last.
    if let Some(at) = items.iter().position(Result::is_err) {
        assert_eq!(at, items.len() - 1, "items after an error");
    }
    let dones = items
        .iter()
        .filter(|i| matches!(i, Ok(StreamEvent::Done { .. })))
        .count();
    assert!(dones <= 1, "{dones} Done events");
    // A reply is either complete or an error: an unfinished one is never passed on as if
    // it were whole (a tool would run from a partial call).
    match items.last() {
        None => panic!("no item at all for {body:?}"),
        Some(Ok(StreamEvent::Done { .. }) | Err(_)) => {}
        Some(Ok(other)) => panic!("stream ended with {other:?}, neither Done nor an error"),
    }
    // Where the network cuts the body does not change the reply.
    let whole = decode_stream(format, &[body]);
    assert_eq!(
        shape(&items),
        shape(&whole),
        "chunks of {size} bytes decode differently from the whole body"
    );

    if let Ok(events) = decode_full(format, body) {
        assert!(
            !events.iter().any(|e| matches!(e, StreamEvent::Done { .. }))
                || matches!(events.last(), Some(StreamEvent::Done { .. })),
            "Done is not last in a whole reply"
        );
    }
}
