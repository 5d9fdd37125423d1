//! Server-sent-event framing helpers.

use bytes::Bytes;

/// A `data:` frame: `data: {data}\n\n`.
pub fn sse_data(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// A named event frame: `event: {event}\ndata: {data}\n\n`.
pub fn sse_event(event: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}
