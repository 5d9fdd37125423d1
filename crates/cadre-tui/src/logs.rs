//! Log lines while the UI owns the screen. Written to standard error they would be drawn
//! over the full-screen UI (over its input line and status bar, until the next full
//! redraw), so while the UI holds the terminal they are kept for it instead, and it shows
//! them as notices in the transcript. With `--log-file` they go to the file as before.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Mutex;

/// Lines kept for the UI at most; older ones are dropped and counted.
pub const MAX_LINES: usize = 200;

struct Kept {
    lines: VecDeque<String>,
    dropped: usize,
}

static KEPT: Mutex<Kept> = Mutex::new(Kept {
    lines: VecDeque::new(),
    dropped: 0,
});

/// The log writer for a process without a log file: standard error, except while the UI
/// holds the terminal. One writer per log event (what `tracing_subscriber` asks for), so the
/// event's line is kept whole when the writer is dropped.
#[derive(Debug, Default)]
pub struct LogWriter {
    held: Vec<u8>,
}

impl LogWriter {
    /// A writer for one log event.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if crate::shell::holds_terminal() {
            self.held.extend_from_slice(buf);
            Ok(buf.len())
        } else {
            std::io::stderr().write(buf)
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let text = strip_ansi(&String::from_utf8_lossy(&self.held));
        keep(text.trim_end());
    }
}

fn keep(line: &str) {
    if line.is_empty() {
        return;
    }
    if let Ok(mut k) = KEPT.lock() {
        if k.lines.len() >= MAX_LINES {
            k.lines.pop_front();
            k.dropped += 1;
        }
        k.lines.push_back(line.to_string());
    }
}

/// The kept lines, oldest first, and how many were dropped for room since the last call.
pub fn take_lines() -> (Vec<String>, usize) {
    match KEPT.lock() {
        Ok(mut k) => (k.lines.drain(..).collect(), std::mem::take(&mut k.dropped)),
        Err(_) => (Vec::new(), 0),
    }
}

/// `text` without terminal escape sequences (the log's colours, or anything a logged value
/// carried), so nothing in a kept line can move the cursor or change the screen.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates, then one final byte.
                for f in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&f) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
        } else if c == '\n' || c == '\t' || !c.is_control() {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_control_characters_are_stripped() {
        assert_eq!(
            strip_ansi("\u{1b}[33m WARN\u{1b}[0m retrying \u{1b}[2J\u{1b}[Hx\r\u{7}"),
            " WARN retrying x"
        );
    }

    #[test]
    fn a_line_logged_while_the_ui_holds_the_terminal_is_kept_not_written() {
        crate::shell::set_holds_terminal_for_test(true);
        {
            let mut w = LogWriter::new();
            w.write_all(b"\x1b[33mWARN\x1b[0m model request failed; retrying\n")
                .unwrap_or_default();
        }
        crate::shell::set_holds_terminal_for_test(false);
        let (lines, dropped) = take_lines();
        assert_eq!(lines, ["WARN model request failed; retrying"]);
        assert_eq!(dropped, 0);
    }
}
