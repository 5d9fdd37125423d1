//! Reading a window of lines from a file with bounded memory and bounded reading: the lines
//! before the window are skipped without being kept, a long line is kept only as far as it is
//! shown (the rest is counted, not stored), the window stops at a byte budget, and after it at
//! most a look-ahead budget is read to count the lines that follow.

use std::io::{BufRead, Read};
use tokio_util::sync::CancellationToken;

/// Bytes kept per shown character: enough for any UTF-8 character.
const BYTES_PER_CHAR: usize = 4;

/// How many lines a file has, as far as was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Total {
    /// The end of the file was reached: exactly this many lines.
    Exact(usize),
    /// The look-ahead budget ran out first: at least this many.
    AtLeast(usize),
}

/// What to read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WindowSpec {
    /// 1-based number of the first line.
    pub offset: usize,
    /// Lines at most.
    pub limit: usize,
    /// Characters shown per line at most; longer lines end with a marker.
    pub max_line_chars: usize,
    /// Bytes of shown text at most; the window ends early past it.
    pub max_bytes: usize,
    /// Bytes read after the window at most, to count the remaining lines.
    pub lookahead: u64,
}

/// The lines read, each already cut to `max_line_chars`.
#[derive(Debug)]
pub(crate) struct Window {
    /// The window's lines, from line `offset` on.
    pub lines: Vec<String>,
    /// How many lines the file has.
    pub total: Total,
}

/// Read the window `spec` from `reader`. Cancellation is checked between buffer fills.
pub(crate) fn read_window(
    mut reader: impl BufRead,
    spec: WindowSpec,
    cancel: &CancellationToken,
) -> std::io::Result<Window> {
    let mut seen = 0;
    while seen + 1 < spec.offset {
        if !skip_line(&mut reader, cancel)? {
            return Ok(Window {
                lines: Vec::new(),
                total: Total::Exact(seen),
            });
        }
        seen += 1;
    }
    let mut lines = Vec::new();
    let mut bytes = 0;
    while lines.len() < spec.limit && bytes < spec.max_bytes {
        match read_line(&mut reader, spec.max_line_chars, cancel)? {
            Some(line) => {
                bytes += line.len();
                lines.push(line);
                seen += 1;
            }
            None => {
                return Ok(Window {
                    lines,
                    total: Total::Exact(seen),
                });
            }
        }
    }
    let (more, at_end) = count_lines(&mut reader, spec.lookahead, cancel)?;
    let total = if at_end {
        Total::Exact(seen + more)
    } else {
        Total::AtLeast(seen + more)
    };
    Ok(Window { lines, total })
}

fn cancelled() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::Interrupted, "cancelled")
}

/// Consume one line without keeping it; false at the end of the file.
fn skip_line(reader: &mut impl BufRead, cancel: &CancellationToken) -> std::io::Result<bool> {
    let mut any = false;
    loop {
        if cancel.is_cancelled() {
            return Err(cancelled());
        }
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(any);
        }
        any = true;
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(true);
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

/// Read one line (without its `\n` or `\r\n`), keeping at most what `max_chars` characters
/// can take; `None` at the end of the file.
fn read_line(
    reader: &mut impl BufRead,
    max_chars: usize,
    cancel: &CancellationToken,
) -> std::io::Result<Option<String>> {
    let cap = max_chars.saturating_mul(BYTES_PER_CHAR);
    let mut kept = Vec::new();
    let mut dropped = 0usize;
    let mut any = false;
    let mut ends_cr = false;
    let mut ended = false;
    while !ended {
        if cancel.is_cancelled() {
            return Err(cancelled());
        }
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        any = true;
        let (chunk, used) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                ended = true;
                (&buf[..i], i + 1)
            }
            None => (buf, buf.len()),
        };
        let keep = chunk.len().min(cap - kept.len());
        kept.extend_from_slice(&chunk[..keep]);
        // Characters, not bytes: count every byte that starts one.
        dropped += chunk[keep..].iter().filter(|&&b| b & 0xC0 != 0x80).count();
        if let Some(&last) = chunk.last() {
            ends_cr = last == b'\r';
        }
        reader.consume(used);
    }
    if !any {
        return Ok(None);
    }
    if ended && ends_cr {
        if dropped > 0 {
            dropped -= 1;
        } else {
            kept.pop();
        }
    }
    Ok(Some(cut(
        &String::from_utf8_lossy(&kept),
        max_chars,
        dropped,
    )))
}

/// `text` cut to `max` characters with a marker counting what was cut, `dropped` characters
/// beyond `text` included.
fn cut(text: &str, max: usize, dropped: usize) -> String {
    match text.char_indices().nth(max) {
        None if dropped == 0 => text.to_string(),
        None => format!("{text}[... {dropped} more characters]"),
        Some((at, _)) => {
            let more = text[at..].chars().count() + dropped;
            format!("{}[... {more} more characters]", &text[..at])
        }
    }
}

/// Count the lines in at most `budget` more bytes; also whether the end of the file was
/// reached.
fn count_lines(
    reader: &mut impl BufRead,
    budget: u64,
    cancel: &CancellationToken,
) -> std::io::Result<(usize, bool)> {
    let mut lines = 0;
    let mut partial = false;
    let mut limited = reader.take(budget);
    loop {
        if cancel.is_cancelled() {
            return Err(cancelled());
        }
        let buf = limited.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let newlines = buf.iter().filter(|&&b| b == b'\n').count();
        lines += newlines;
        partial = buf.last() != Some(&b'\n');
        let n = buf.len();
        limited.consume(n);
    }
    let at_end = limited.into_inner().fill_buf()?.is_empty();
    Ok((lines + usize::from(partial), at_end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(offset: usize, limit: usize) -> WindowSpec {
        WindowSpec {
            offset,
            limit,
            max_line_chars: 5,
            max_bytes: 1 << 20,
            lookahead: 1 << 20,
        }
    }

    fn window(text: &[u8], spec: WindowSpec) -> Window {
        let reader = std::io::BufReader::with_capacity(3, text);
        read_window(reader, spec, &CancellationToken::new()).unwrap()
    }

    #[test]
    fn lines_end_at_newlines_and_crlf_with_an_optional_last_newline() {
        let w = window(b"one\ntwo\r\nthree", spec(1, 10));
        assert_eq!(w.lines, ["one", "two", "three"]);
        assert_eq!(w.total, Total::Exact(3));
        let w = window(b"a\n\nb\n", spec(2, 10));
        assert_eq!(w.lines, ["", "b"]);
        assert_eq!(w.total, Total::Exact(3));
        let w = window(b"", spec(1, 10));
        assert!(w.lines.is_empty());
        assert_eq!(w.total, Total::Exact(0));
        let w = window(b"a\nb\n", spec(5, 10));
        assert_eq!(w.total, Total::Exact(2));
    }

    #[test]
    fn long_lines_keep_only_what_is_shown_and_count_the_rest() {
        let w = window("héllo wörld\r\nxy\n".as_bytes(), spec(1, 10));
        assert_eq!(w.lines, ["héllo[... 6 more characters]", "xy"]);
        // Far past what is kept: the count is still exact.
        let long = format!("{}\n", "é".repeat(1000));
        let w = window(long.as_bytes(), spec(1, 1));
        assert_eq!(w.lines, ["ééééé[... 995 more characters]"]);
    }

    #[test]
    fn after_the_window_lines_are_counted_only_within_the_lookahead() {
        let text: String = (1..=100).map(|i| format!("{i}\n")).collect();
        let w = window(text.as_bytes(), spec(3, 2));
        assert_eq!(w.lines, ["3", "4"]);
        assert_eq!(w.total, Total::Exact(100));
        let mut short = spec(1, 2);
        short.lookahead = 10;
        let w = window(text.as_bytes(), short);
        assert_eq!(w.total, Total::AtLeast(2 + 5));
        let mut small = spec(1, 100);
        small.max_bytes = 3;
        let w = window(text.as_bytes(), small);
        assert_eq!(w.lines, ["1", "2", "3"]);
    }

    #[test]
    fn a_cancelled_read_stops() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let err = read_window(&b"a\nb\n"[..], spec(2, 1), &cancel).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::Interrupted);
    }
}
