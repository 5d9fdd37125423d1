//! The stdio transport of `cadre mcp serve`: one JSON-RPC message per line on stdin, replies
//! one per line on stdout. The server library's own line transport ends the session at the
//! first line it cannot decode; this one answers such a line with a JSON-RPC error and keeps
//! reading:
//!
//! - a line that is not JSON (including one nested deeper than the JSON parser's limit of
//!   128 levels) gets `-32700 Parse error` with `id: null`;
//! - a line longer than [`MAX_LINE_BYTES`] is skipped up to its newline, without being held
//!   in memory, and gets the same `-32700`;
//! - JSON that is not a JSON-RPC message the server understands gets `-32600 Invalid
//!   Request` (with the request's id when it has one), except notifications of methods it
//!   does not know, which are ignored as the library ignores them;
//! - requests before `initialize` are answered `-32601` here (newer clients probe
//!   `server/discover` first and fall back to the handshake on an error).

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use std::future::Future;
use std::io;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// The longest line read; a longer one is answered `-32700` and skipped.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Replies queued for stdout before a sender waits.
const OUT_QUEUE: usize = 64;

/// One line as read.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A line (without its newline); the last one may lack the newline.
    Text(Vec<u8>),
    /// Longer than the limit; its bytes were discarded.
    TooLong,
    /// End of input.
    Eof,
}

/// Read the next line, holding at most `max` bytes of it.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    max: usize,
) -> io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Text(line),
            });
        }
        let (chunk, used, ended) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..i], i + 1, true),
            None => (available, available.len(), false),
        };
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        reader.consume(used);
        if ended {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Text(line)
            });
        }
    }
}

/// A JSON-RPC error reply as one output line.
fn error_line(id: &Value, code: i64, message: &str) -> Vec<u8> {
    let mut out = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message},
    })
    .to_string()
    .into_bytes();
    out.push(b'\n');
    out
}

/// What to do with one line.
#[derive(Debug)]
enum Verdict {
    /// Hand the message to the server.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Answer this (an error reply) and read on.
    Answer(Vec<u8>),
    /// Nothing to do (a blank line, a notification nobody handles).
    Skip,
}

/// The answer to a request that comes before `initialize`, or `None` to pass it on.
fn before_initialize(msg: &Value) -> Option<Vec<u8>> {
    let method = msg.get("method")?.as_str()?;
    let id = msg.get("id")?;
    if method == "initialize" {
        return None;
    }
    Some(error_line(
        id,
        -32601,
        &format!("method not found before initialize: {method}"),
    ))
}

/// Judge one line. `initialized` is whether a message has been passed on yet.
fn judge(line: &[u8], initialized: bool) -> Verdict {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Verdict::Answer(error_line(
                &Value::Null,
                -32700,
                &format!("Parse error: {e}"),
            ));
        }
    };
    if !initialized && let Some(answer) = before_initialize(&value) {
        return Verdict::Answer(answer);
    }
    let method = value
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let id = value.get("id").cloned();
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(msg) => Verdict::Message(Box::new(msg)),
        // A notification cannot be answered; one the server does not know is dropped.
        Err(_) if id.is_none() && method.is_some() => Verdict::Skip,
        Err(e) => Verdict::Answer(error_line(
            &id.unwrap_or(Value::Null),
            -32600,
            &format!("Invalid Request: {e}"),
        )),
    }
}

/// The transport: messages from `reader`, replies through a writer task (so that error
/// replies of the reader and the server's replies come out whole, in order).
pub(crate) struct LineTransport<R> {
    reader: BufReader<R>,
    out: mpsc::Sender<Vec<u8>>,
    initialized: bool,
    max_line: usize,
}

impl<R: AsyncRead + Unpin + Send + 'static> LineTransport<R> {
    /// A transport reading `reader` and writing `writer`; the returned task ends once the
    /// transport is dropped and everything queued has been written.
    pub(crate) fn new<W>(reader: R, writer: W) -> (Self, tokio::task::JoinHandle<()>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::with_max_line(reader, writer, MAX_LINE_BYTES)
    }

    fn with_max_line<W>(
        reader: R,
        mut writer: W,
        max_line: usize,
    ) -> (Self, tokio::task::JoinHandle<()>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out, mut queued) = mpsc::channel::<Vec<u8>>(OUT_QUEUE);
        let writing = tokio::spawn(async move {
            while let Some(line) = queued.recv().await {
                if writer.write_all(&line).await.is_err() || writer.flush().await.is_err() {
                    return;
                }
            }
        });
        let transport = Self {
            reader: BufReader::new(reader),
            out,
            initialized: false,
            max_line,
        };
        (transport, writing)
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed")
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        let encoded = serde_json::to_vec(&item);
        async move {
            let mut line = encoded.map_err(io::Error::other)?;
            line.push(b'\n');
            out.send(line).await.map_err(|_| closed())
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let verdict = match read_line(&mut self.reader, self.max_line).await {
                Ok(Line::Text(line)) => judge(&line, self.initialized),
                Ok(Line::TooLong) => Verdict::Answer(error_line(
                    &Value::Null,
                    -32700,
                    &format!("Parse error: line longer than {} bytes", self.max_line),
                )),
                Ok(Line::Eof) => return None,
                Err(e) => {
                    tracing::debug!(error = %e, "cannot read stdin; ending the session");
                    return None;
                }
            };
            match verdict {
                Verdict::Message(msg) => {
                    self.initialized = true;
                    return Some(*msg);
                }
                Verdict::Answer(reply) => {
                    if self.out.send(reply).await.is_err() {
                        return None;
                    }
                }
                Verdict::Skip => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut r = BufReader::with_capacity(8, input);
        let mut out = Vec::new();
        loop {
            let l = read_line(&mut r, max).await.unwrap();
            let eof = l == Line::Eof;
            out.push(l);
            if eof {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_over_the_limit_are_skipped_to_their_newline() {
        let input = b"short\nthis one is far too long\n\nlast-without-newline";
        assert_eq!(
            lines(input, 10).await,
            vec![
                Line::Text(b"short".to_vec()),
                Line::TooLong,
                Line::Text(Vec::new()),
                Line::TooLong,
                Line::Eof,
            ]
        );
        assert_eq!(
            lines(
                b"fits
", 4
            )
            .await,
            vec![Line::Text(b"fits".to_vec()), Line::Eof]
        );
    }

    fn code(v: &Verdict) -> i64 {
        let Verdict::Answer(line) = v else {
            panic!("no answer: {v:?}")
        };
        let v: Value = serde_json::from_slice(line).unwrap();
        v["error"]["code"].as_i64().unwrap()
    }

    #[test]
    fn malformed_deep_and_invalid_lines_are_answered() {
        assert_eq!(code(&judge(b"{not json", true)), -32700);
        assert_eq!(code(&judge("\u{0}\u{ff}".as_bytes(), true)), -32700);
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(code(&judge(deep.as_bytes(), true)), -32700);
        assert_eq!(code(&judge(br#"{"jsonrpc":"2.0","id":7}"#, true)), -32600);
        assert!(matches!(judge(b"  \r", true), Verdict::Skip));
        // Not a request at all: answered with a null id, as JSON-RPC says.
        assert_eq!(
            code(&judge(br#"{"jsonrpc":"2.0","method":7}"#, true)),
            -32600
        );
        // Notifications are never answered, whatever they say.
        for n in [
            r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":"bad"}"#,
        ] {
            assert!(
                !matches!(judge(n.as_bytes(), true), Verdict::Answer(_)),
                "{n}"
            );
        }
        assert!(matches!(
            judge(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, true),
            Verdict::Message(_)
        ));
    }

    #[test]
    fn only_requests_before_initialize_are_answered_here() {
        let probe = judge(
            br#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#,
            false,
        );
        assert_eq!(code(&probe), -32601);
        let init = br#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        assert!(matches!(judge(init, false), Verdict::Message(_)));
    }
}
