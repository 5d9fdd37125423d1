//! The transcript: what was said and done, as a list of entries built from the event stream.
//! Each entry carries a version that changes whenever the entry does, so the renderer can
//! keep the lines of unchanged entries.

use cadre_types::{TodoItem, Usage};
use std::collections::HashMap;

/// Longest text kept for one tool result or argument list (the rest is cut with a marker).
pub const MAX_TOOL_TEXT: usize = 64 * 1024;
/// Longest text kept for one assistant message or thinking block.
pub const MAX_MESSAGE_TEXT: usize = 1024 * 1024;
/// Entries kept; the oldest go first beyond this.
pub const MAX_ENTRIES: usize = 50_000;

/// One tool call and its result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    /// The call id (empty for `@agent` direct runs).
    pub call_id: String,
    /// The tool, or `@name` for a direct run.
    pub tool: String,
    /// The raw JSON arguments (or the job of a direct run).
    pub args: String,
    /// The result and whether it is an error, once known.
    pub result: Option<(String, bool)>,
    /// Shown in full.
    pub expanded: bool,
    /// Sub-agent tasks this call started, in start order.
    pub children: Vec<String>,
    /// The text of the file a whole-file write replaces, read before it ran: the diff and
    /// the `+N -M` count are against it.
    pub replaces: Option<String>,
}

/// What an entry is.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryKind {
    /// The person's prompt.
    User(String),
    /// The assistant's text (Markdown).
    Assistant(String),
    /// The assistant's thinking, dimmed and folded unless `expanded`.
    Thinking {
        /// The text.
        text: String,
        /// Shown in full.
        expanded: bool,
    },
    /// A tool call (or an `@agent` direct run).
    Tool(ToolEntry),
    /// Something the UI or the engine wants to say.
    Notice(String),
    /// An error.
    Error(String),
    /// An agent's plan as it stands after a `todo_write` call (or restated on resume).
    Plan {
        /// `main` or the sub-agent whose plan it is.
        agent: String,
        /// The items, in the agent's order.
        todos: Vec<TodoItem>,
    },
    /// A turn ended: how, and with what usage.
    TurnEnd {
        /// `completed`, `cancelled`, ...
        state: String,
        /// The run's usage.
        usage: Usage,
    },
}

/// An entry with its change counter.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// What it is.
    pub kind: EntryKind,
    /// Bumped on every change (the render cache key).
    pub version: u64,
}

/// The ordered entries.
#[derive(Debug, Default, Clone)]
pub struct Transcript {
    entries: Vec<Entry>,
    /// Entries dropped from the front (so indexes held elsewhere can be rebased).
    dropped: usize,
    /// The entry (absolute index) showing each sub-agent task.
    children: HashMap<String, usize>,
}

fn push_capped(s: &mut String, more: &str, cap: usize) {
    if s.len() >= cap {
        return;
    }
    let room = cap - s.len();
    if more.len() <= room {
        s.push_str(more);
    } else {
        let mut cut = room;
        while !more.is_char_boundary(cut) {
            cut -= 1;
        }
        s.push_str(&more[..cut]);
        s.push_str("\n… (cut)");
    }
}

/// `text` cut to `cap` bytes on a character boundary, with a marker when cut.
pub fn capped(text: &str, cap: usize) -> String {
    let mut s = String::new();
    push_capped(&mut s, text, cap);
    s
}

impl Transcript {
    /// The entries, oldest first.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// How many entries were dropped from the front so far.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// Add an entry.
    pub fn push(&mut self, kind: EntryKind) {
        self.entries.push(Entry { kind, version: 0 });
        if self.entries.len() > MAX_ENTRIES {
            let n = self.entries.len() - MAX_ENTRIES;
            self.entries.drain(..n);
            self.dropped += n;
            let first = self.dropped;
            self.children.retain(|_, abs| *abs >= first);
        }
    }

    /// Change entry `i` (bumps its version).
    pub fn edit(&mut self, i: usize, f: impl FnOnce(&mut EntryKind)) {
        if let Some(e) = self.entries.get_mut(i) {
            f(&mut e.kind);
            e.version += 1;
        }
    }

    /// Append streamed assistant text: to the last entry when it is assistant text.
    pub fn push_text(&mut self, text: &str) {
        if let Some(i) = self.last_index()
            && matches!(self.entries[i].kind, EntryKind::Assistant(_))
        {
            self.edit(i, |k| {
                if let EntryKind::Assistant(s) = k {
                    push_capped(s, text, MAX_MESSAGE_TEXT);
                }
            });
            return;
        }
        self.push(EntryKind::Assistant(capped(text, MAX_MESSAGE_TEXT)));
    }

    /// Append streamed thinking: to the last entry when it is thinking.
    pub fn push_thinking(&mut self, text: &str) {
        if let Some(i) = self.last_index()
            && matches!(self.entries[i].kind, EntryKind::Thinking { .. })
        {
            self.edit(i, |k| {
                if let EntryKind::Thinking { text: s, .. } = k {
                    push_capped(s, text, MAX_MESSAGE_TEXT);
                }
            });
            return;
        }
        self.push(EntryKind::Thinking {
            text: capped(text, MAX_MESSAGE_TEXT),
            expanded: false,
        });
    }

    /// The index of the last entry.
    pub fn last_index(&self) -> Option<usize> {
        self.entries.len().checked_sub(1)
    }

    /// The tool entry with this call id, newest first.
    pub fn find_call(&self, call_id: &str) -> Option<usize> {
        self.entries
            .iter()
            .rposition(|e| matches!(&e.kind, EntryKind::Tool(t) if t.call_id == call_id))
    }

    /// The tool entry that holds sub-agent task `task_id`.
    pub fn find_child(&self, task_id: &str) -> Option<usize> {
        let abs = *self.children.get(task_id)?;
        abs.checked_sub(self.dropped)
            .filter(|&i| i < self.entries.len())
    }

    /// Show sub-agent task `task_id` under the tool entry `i`.
    pub fn attach(&mut self, i: usize, task_id: &str) {
        let id = task_id.to_string();
        let mut attached = false;
        self.edit(i, |k| {
            if let EntryKind::Tool(t) = k {
                t.children.push(id);
                attached = true;
            }
        });
        if attached {
            self.children.insert(task_id.to_string(), self.dropped + i);
        }
    }

    /// Whether entry `i` can be folded and unfolded.
    pub fn is_foldable(&self, i: usize) -> bool {
        matches!(
            self.entries.get(i).map(|e| &e.kind),
            Some(EntryKind::Tool(_) | EntryKind::Thinking { .. })
        )
    }

    /// Fold or unfold entry `i`.
    pub fn toggle(&mut self, i: usize) {
        self.edit(i, |k| match k {
            EntryKind::Tool(t) => t.expanded = !t.expanded,
            EntryKind::Thinking { expanded, .. } => *expanded = !*expanded,
            _ => {}
        });
    }

    /// Remove everything.
    pub fn clear(&mut self) {
        self.dropped += self.entries.len();
        self.entries.clear();
        self.children.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_text_joins_the_last_message_and_is_capped() {
        let mut t = Transcript::default();
        t.push_text("Hel");
        t.push_text("lo");
        t.push_thinking("hmm");
        t.push_text("again");
        assert_eq!(t.entries().len(), 3);
        assert_eq!(t.entries()[0].kind, EntryKind::Assistant("Hello".into()));
        assert_eq!(t.entries()[0].version, 1);
        let big = "é".repeat(MAX_MESSAGE_TEXT);
        t.push_text(&big);
        let EntryKind::Assistant(s) = &t.entries()[2].kind else {
            panic!()
        };
        assert!(s.len() <= MAX_MESSAGE_TEXT + 16 && s.ends_with("(cut)"));
    }

    #[test]
    fn old_entries_go_beyond_the_cap() {
        let mut t = Transcript::default();
        for i in 0..MAX_ENTRIES + 5 {
            t.push(EntryKind::Notice(i.to_string()));
        }
        assert_eq!(t.entries().len(), MAX_ENTRIES);
        assert_eq!(t.dropped(), 5);
        assert_eq!(t.entries()[0].kind, EntryKind::Notice("5".into()));
    }
}
