//! Scripted replies of the mock server, with fault injection: error statuses with
//! `Retry-After`, delays, streams that are cut or stall, and bodies re-chunked so that a
//! multi-byte character is split across two writes.

use bytes::Bytes;
use serde_json::Value;
use std::time::Duration;

/// How a chunked body ends after its last chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// Normally (the response completes).
    Finish,
    /// The connection is closed abruptly, without completing the response.
    Cut,
    /// Nothing more is sent until the server shuts down.
    Stall,
    /// The last frame is sent again and again, without end (a model stuck in a loop).
    RepeatLast,
}

/// The body of a reply.
#[derive(Debug, Clone)]
pub(crate) enum ReplyBody {
    /// One buffer with a `Content-Length`.
    Full(Bytes),
    /// Separate frames (chunked transfer encoding), `gap` apart, ending as `end` says.
    Chunks {
        chunks: Vec<Bytes>,
        gap: Duration,
        end: StreamEnd,
    },
    /// One of two replies, depending on the request's `"stream": true`.
    ByStream {
        streaming: Box<MockReply>,
        plain: Box<MockReply>,
    },
}

/// One scripted reply of the mock server. Build with a constructor, then adjust with the
/// `with_*` / fault methods, which all take and return the reply.
#[derive(Debug, Clone)]
pub struct MockReply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) delay: Duration,
    pub(crate) body: ReplyBody,
}

impl MockReply {
    /// A 200 reply with a JSON body.
    pub fn json(body: &Value) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            delay: Duration::ZERO,
            body: ReplyBody::Full(Bytes::from(body.to_string())),
        }
    }

    /// A reply with a status and a plain-text body.
    pub fn text(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "text/plain; charset=utf-8".into())],
            delay: Duration::ZERO,
            body: ReplyBody::Full(Bytes::from(body.into())),
        }
    }

    /// An error status with a JSON body (`{"error":{...}}` or whatever the test needs).
    pub fn error(status: u16, body: &Value) -> Self {
        Self::json(body).with_status(status)
    }

    /// An OpenAI-style error: `{"error":{"message":..,"type":"error","code":..}}`.
    pub fn openai_error(status: u16, message: &str, code: Option<&str>) -> Self {
        Self::error(
            status,
            &serde_json::json!({"error": {"message": message, "type": "error", "code": code}}),
        )
    }

    /// An Anthropic-style error: `{"type":"error","error":{"type":kind,"message":..}}`.
    pub fn anthropic_error(status: u16, kind: &str, message: &str) -> Self {
        Self::error(
            status,
            &serde_json::json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }

    /// A 200 `text/event-stream` reply; each element is sent as its own frame.
    pub fn sse(chunks: Vec<Bytes>) -> Self {
        Self {
            status: 200,
            headers: vec![
                ("content-type".into(), "text/event-stream".into()),
                ("cache-control".into(), "no-cache".into()),
            ],
            delay: Duration::ZERO,
            body: ReplyBody::Chunks {
                chunks,
                gap: Duration::ZERO,
                end: StreamEnd::Finish,
            },
        }
    }

    /// `streaming` when the request body has `"stream": true`, else `plain`.
    pub fn by_stream(streaming: MockReply, plain: MockReply) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            delay: Duration::ZERO,
            body: ReplyBody::ByStream {
                streaming: Box::new(streaming),
                plain: Box::new(plain),
            },
        }
    }

    /// Set the status code.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// Add (or replace) a response header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Add a `Retry-After: secs` header.
    pub fn retry_after(self, secs: u64) -> Self {
        self.with_header("retry-after", &secs.to_string())
    }

    /// Wait this long before sending the response head.
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self.map_inner(|r| r.delayed(delay))
    }

    /// Pause this long between frames of a chunked body. Without a gap, frames are still
    /// flushed one by one.
    pub fn with_gap(mut self, gap: Duration) -> Self {
        if let ReplyBody::Chunks { gap: g, .. } = &mut self.body {
            *g = gap;
        }
        self.map_inner(|r| r.with_gap(gap))
    }

    /// Send only the first `n` frames, then close the connection abruptly.
    pub fn cut_after(self, n: usize) -> Self {
        self.truncate(n, StreamEnd::Cut)
    }

    /// Send only the first `n` frames, then send nothing more (until the server stops).
    pub fn stall_after(self, n: usize) -> Self {
        self.truncate(n, StreamEnd::Stall)
    }

    /// After the frames, send the last one again and again until the client goes away:
    /// an endless reply.
    pub fn repeat_last(mut self) -> Self {
        if let ReplyBody::Chunks { end, .. } = &mut self.body {
            *end = StreamEnd::RepeatLast;
        }
        self.map_inner(MockReply::repeat_last)
    }

    /// Re-chunk the body into frames of at most `size` bytes (at least 1), splitting
    /// multi-byte characters wherever they fall. Each frame is flushed as its own write.
    pub fn split_every(mut self, size: usize) -> Self {
        let size = size.max(1);
        self.rechunk(|all| all.chunks(size).map(Bytes::copy_from_slice).collect());
        self
    }

    /// Re-chunk the body so that every occurrence of `ch` (a multi-byte character) is split
    /// in the middle of its UTF-8 bytes, across two frames flushed as separate writes.
    /// Other frame boundaries are kept.
    pub fn split_inside(mut self, ch: char) -> Self {
        let mut buf = [0u8; 4];
        let pattern = ch.encode_utf8(&mut buf).as_bytes().to_vec();
        self.rechunk_frames(|frame| split_bytes_inside(&frame, &pattern));
        self
    }

    fn map_inner(mut self, f: impl Fn(MockReply) -> MockReply) -> Self {
        if let ReplyBody::ByStream { streaming, plain } = self.body {
            self.body = ReplyBody::ByStream {
                streaming: Box::new(f(*streaming)),
                plain: Box::new(f(*plain)),
            };
        }
        self
    }

    fn truncate(mut self, n: usize, end: StreamEnd) -> Self {
        match &mut self.body {
            ReplyBody::Full(bytes) => {
                let chunks = if n == 0 {
                    Vec::new()
                } else {
                    vec![bytes.clone()]
                };
                self.body = ReplyBody::Chunks {
                    chunks,
                    gap: Duration::ZERO,
                    end,
                };
            }
            ReplyBody::Chunks { chunks, end: e, .. } => {
                chunks.truncate(n);
                *e = end;
            }
            ReplyBody::ByStream { .. } => return self.map_inner(|r| r.truncate(n, end)),
        }
        self
    }

    /// Replace all frames by `f(concatenated body)`.
    fn rechunk(&mut self, f: impl Fn(Vec<u8>) -> Vec<Bytes>) {
        let (all, end) = match &self.body {
            ReplyBody::Full(b) => (b.to_vec(), StreamEnd::Finish),
            ReplyBody::Chunks { chunks, end, .. } => (chunks.concat(), *end),
            ReplyBody::ByStream { .. } => return,
        };
        self.body = ReplyBody::Chunks {
            chunks: f(all),
            gap: Duration::ZERO,
            end,
        };
    }

    /// Replace each frame by `f(frame)`.
    fn rechunk_frames(&mut self, f: impl Fn(Bytes) -> Vec<Bytes>) {
        let (frames, end) = match &self.body {
            ReplyBody::Full(b) => (vec![b.clone()], StreamEnd::Finish),
            ReplyBody::Chunks { chunks, end, .. } => (chunks.clone(), *end),
            ReplyBody::ByStream { .. } => return,
        };
        self.body = ReplyBody::Chunks {
            chunks: frames.into_iter().flat_map(f).collect(),
            gap: Duration::ZERO,
            end,
        };
    }
}

/// Split `frame` in the middle of every occurrence of `pattern` (a character's UTF-8
/// bytes, at least 2 long). Returns the pieces in order; they concatenate to `frame`.
pub fn split_bytes_inside(frame: &[u8], pattern: &[u8]) -> Vec<Bytes> {
    if pattern.len() < 2 {
        return vec![Bytes::copy_from_slice(frame)];
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + pattern.len() <= frame.len() {
        if &frame[i..i + pattern.len()] == pattern {
            let cut = i + pattern.len() / 2;
            out.push(Bytes::copy_from_slice(&frame[start..cut]));
            start = cut;
            i += pattern.len();
        } else {
            i += 1;
        }
    }
    out.push(Bytes::copy_from_slice(&frame[start..]));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_inside_breaks_the_character() {
        let text = "aé€b€";
        let pieces = split_bytes_inside(text.as_bytes(), "€".as_bytes());
        assert_eq!(pieces.len(), 3);
        assert!(std::str::from_utf8(&pieces[0]).is_err());
        assert_eq!(pieces.concat(), text.as_bytes());
    }

    #[test]
    fn faults_truncate_frames() {
        let r =
            MockReply::sse(vec![Bytes::from("a"), Bytes::from("b"), Bytes::from("c")]).cut_after(2);
        match r.body {
            ReplyBody::Chunks { chunks, end, .. } => {
                assert_eq!(chunks.len(), 2);
                assert_eq!(end, StreamEnd::Cut);
            }
            _ => panic!("not chunked"),
        }
        let r = MockReply::text(200, "héllo").split_every(1);
        match r.body {
            ReplyBody::Chunks { chunks, .. } => assert_eq!(chunks.len(), 6),
            _ => panic!("not chunked"),
        }
    }
}
