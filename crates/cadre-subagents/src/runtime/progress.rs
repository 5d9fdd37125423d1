//! A task's recent progress, kept small: the last few lines of what a child did (tool
//! calls, results, text), each cut to a short preview, with streamed text pieces merged into
//! one line. It is what `task_output` shows for a task that is still running; the child's
//! whole transcript stays in its session.

use cadre_types::UpdateKind;
use std::collections::VecDeque;

/// Lines kept per task; older ones are dropped.
pub const TASK_LOG_CAPACITY: usize = 12;
/// Characters kept per line.
pub const LINE_PREVIEW_CHARS: usize = 200;

/// One line of progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressLine {
    /// What happened.
    pub kind: UpdateKind,
    /// The tool, for tool lines.
    pub tool: Option<String>,
    /// A preview of the text (at most [`LINE_PREVIEW_CHARS`] characters, then `…`).
    pub text: String,
}

impl ProgressLine {
    /// The line as `task_output` prints it.
    pub fn render(&self) -> String {
        let tool = self.tool.as_deref().unwrap_or("");
        match self.kind {
            UpdateKind::Start => format!("started: {}", self.text),
            UpdateKind::Resumed => self.text.clone(),
            UpdateKind::Delta => format!("text: {}", self.text),
            UpdateKind::Thinking => format!("thinking: {}", self.text),
            UpdateKind::ToolStart => format!("▸ {tool}({})", self.text),
            UpdateKind::ToolResult => format!("◂ {tool}: {}", self.text),
            UpdateKind::Done => format!("done: {}", self.text),
            UpdateKind::Error => format!("error: {}", self.text),
            UpdateKind::Cancelled => format!("cancelled: {}", self.text),
            UpdateKind::Compaction => format!("compacted: {}", self.text),
        }
    }
}

/// The bounded log of one task.
#[derive(Debug, Default)]
pub struct ProgressLog {
    lines: VecDeque<ProgressLine>,
}

/// Append `text` to `out` until it holds `LINE_PREVIEW_CHARS` characters (line breaks
/// become spaces); a cut is marked with `…`, after which the line takes nothing more.
fn push_preview(out: &mut String, text: &str) {
    let have = out.chars().count();
    if have > LINE_PREVIEW_CHARS {
        return;
    }
    let mut room = LINE_PREVIEW_CHARS - have;
    for c in text.chars() {
        if room == 0 {
            out.push('…');
            return;
        }
        out.push(if matches!(c, '\n' | '\r') { ' ' } else { c });
        room -= 1;
    }
}

impl ProgressLog {
    /// Record one update. Consecutive text (or thinking) pieces extend the same line.
    pub fn push(&mut self, kind: UpdateKind, tool: Option<&str>, text: &str) {
        if matches!(kind, UpdateKind::Delta | UpdateKind::Thinking)
            && let Some(last) = self.lines.back_mut()
            && last.kind == kind
        {
            push_preview(&mut last.text, text);
            return;
        }
        if self.lines.len() >= TASK_LOG_CAPACITY {
            self.lines.pop_front();
        }
        let mut preview = String::new();
        push_preview(&mut preview, text);
        self.lines.push_back(ProgressLine {
            kind,
            tool: tool.map(str::to_string),
            text: preview,
        });
    }

    /// The lines, oldest first.
    pub fn lines(&self) -> Vec<ProgressLine> {
        self.lines.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded_and_previews_cut() {
        let mut log = ProgressLog::default();
        for i in 0..(TASK_LOG_CAPACITY + 5) {
            log.push(UpdateKind::ToolStart, Some("bash"), &format!("{i}"));
        }
        let lines = log.lines();
        assert_eq!(lines.len(), TASK_LOG_CAPACITY);
        assert_eq!(lines[0].text, "5");
        log.push(UpdateKind::ToolResult, Some("bash"), &"é".repeat(500));
        let last = log.lines().pop().unwrap();
        assert_eq!(last.text.chars().count(), LINE_PREVIEW_CHARS + 1);
        assert!(last.text.ends_with('…'));
        assert_eq!(last.render(), format!("◂ bash: {}", last.text));
    }

    #[test]
    fn streamed_text_merges_into_one_line_until_the_preview_is_full() {
        let mut log = ProgressLog::default();
        log.push(UpdateKind::Delta, None, "Hello");
        log.push(UpdateKind::Delta, None, ",\nworld");
        assert_eq!(log.lines().len(), 1);
        assert_eq!(log.lines()[0].text, "Hello, world");
        for _ in 0..100 {
            log.push(UpdateKind::Delta, None, "abcdefgh");
        }
        let lines = log.lines();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].text.chars().count(), LINE_PREVIEW_CHARS + 1);
        log.push(UpdateKind::ToolStart, Some("read"), "{}");
        log.push(UpdateKind::Delta, None, "again");
        let lines = log.lines();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[2].text, "again");
    }
}
