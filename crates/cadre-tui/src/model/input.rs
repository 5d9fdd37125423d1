//! The input box: a multi-line buffer with a cursor, the usual editing keys, history with
//! Up/Down and a reverse search (Ctrl+R), and completion of `@agent` names and `/commands`.
//! Plain data; the key mapping is in `keys.rs`.

/// Longest input kept, in characters (a paste beyond it is cut).
pub const MAX_INPUT_CHARS: usize = 100_000;
/// History entries kept.
pub const MAX_HISTORY: usize = 1_000;
/// A single-line paste longer than this many characters is shown collapsed too.
pub const COLLAPSE_CHARS: usize = 1_000;

/// A reverse history search in progress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Search {
    /// What was typed.
    pub query: String,
    /// The history index of the current match (searching older from there).
    pub hit: Option<usize>,
}

/// The editor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputBox {
    lines: Vec<Vec<char>>,
    row: usize,
    col: usize,
    history: Vec<String>,
    /// Where Up/Down is in the history (`None`: editing a fresh draft).
    browsing: Option<usize>,
    draft: String,
    /// The reverse search, while active.
    pub search: Option<Search>,
    /// Pastes shown collapsed: the marker in the buffer and the text it stands for, in
    /// the order they were pasted.
    pastes: Vec<(String, String)>,
}

impl Default for InputBox {
    fn default() -> Self {
        Self {
            lines: vec![Vec::new()],
            row: 0,
            col: 0,
            history: Vec::new(),
            browsing: None,
            draft: String::new(),
            search: None,
            pastes: Vec::new(),
        }
    }
}

impl InputBox {
    /// An empty box over `history` (oldest first).
    pub fn with_history(history: Vec<String>) -> Self {
        let mut b = Self {
            history,
            ..Self::default()
        };
        b.trim_history();
        b
    }

    /// The text, with each collapsed paste expanded to what was pasted.
    pub fn text(&self) -> String {
        let shown = self
            .lines
            .iter()
            .map(|l| l.iter().collect::<String>())
            .collect::<Vec<_>>()
            .join("\n");
        // Markers are looked for in order, each after the previous one, so a pasted text
        // that happens to hold a marker's spelling is never expanded again.
        let mut out = String::with_capacity(shown.len());
        let mut rest = shown.as_str();
        for (marker, full) in &self.pastes {
            if let Some(i) = rest.find(marker.as_str()) {
                out.push_str(&rest[..i]);
                out.push_str(full);
                rest = &rest[i + marker.len()..];
            }
        }
        out.push_str(rest);
        out
    }

    /// The lines, for rendering.
    pub fn lines(&self) -> Vec<String> {
        self.lines.iter().map(|l| l.iter().collect()).collect()
    }

    /// (row, column) of the cursor, in characters.
    pub fn cursor(&self) -> (usize, usize) {
        (self.row, self.col)
    }

    /// True when there is no text.
    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    /// The history, oldest first.
    pub fn history(&self) -> &[String] {
        &self.history
    }

    fn len(&self) -> usize {
        self.lines.iter().map(Vec::len).sum::<usize>() + self.lines.len() - 1
    }

    /// Replace the text; the cursor goes to the end.
    pub fn set(&mut self, text: &str) {
        self.lines = text.split('\n').map(|l| l.chars().collect()).collect();
        if self.lines.is_empty() {
            self.lines.push(Vec::new());
        }
        self.row = self.lines.len() - 1;
        self.col = self.lines[self.row].len();
        self.pastes.clear();
    }

    /// Empty the box and leave history browsing.
    pub fn clear(&mut self) {
        self.set("");
        self.browsing = None;
        self.search = None;
    }

    /// Take the text out (and record it in the history when it is not blank).
    pub fn take(&mut self) -> String {
        let text = self.text();
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
            self.trim_history();
        }
        self.clear();
        text
    }

    fn trim_history(&mut self) {
        if self.history.len() > MAX_HISTORY {
            let n = self.history.len() - MAX_HISTORY;
            self.history.drain(..n);
        }
    }

    /// Insert one character (`\n` starts a new line).
    pub fn insert(&mut self, c: char) {
        if self.len() >= MAX_INPUT_CHARS {
            return;
        }
        if c == '\n' {
            let rest = self.lines[self.row].split_off(self.col);
            self.row += 1;
            self.lines.insert(self.row, rest);
            self.col = 0;
        } else if c != '\r' {
            self.lines[self.row].insert(self.col, c);
            self.col += 1;
        }
    }

    /// Insert text as typed.
    pub fn insert_str(&mut self, s: &str) {
        for c in s.chars() {
            self.insert(c);
        }
    }

    /// Insert a paste: every line break (CR, LF or CRLF) becomes a new line, and a paste of
    /// several lines (or a very long one) is shown as one `[pasted N lines]` marker while
    /// [`InputBox::text`] gives the whole text. A paste never submits.
    pub fn paste(&mut self, s: &str) {
        let text = s.replace("\r\n", "\n").replace('\r', "\n");
        let room = MAX_INPUT_CHARS.saturating_sub(self.text().chars().count());
        let text: String = text.chars().take(room).collect();
        let lines = text.lines().count();
        if lines <= 1 && text.chars().count() <= COLLAPSE_CHARS && !text.contains('\n') {
            self.insert_str(&text);
            return;
        }
        let count = match lines {
            1 => "1 line".to_string(),
            n => format!("{n} lines"),
        };
        let marker = match self.pastes.len() {
            0 => format!("[pasted {count}]"),
            n => format!("[pasted #{} {count}]", n + 1),
        };
        for c in marker.chars() {
            self.lines[self.row].insert(self.col, c);
            self.col += 1;
        }
        self.pastes.push((marker, text));
    }

    /// Delete before the cursor.
    pub fn backspace(&mut self) {
        if self.col > 0 {
            self.col -= 1;
            self.lines[self.row].remove(self.col);
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = self.lines[self.row].len();
            self.lines[self.row].extend(line);
        }
    }

    /// Delete under the cursor.
    pub fn delete(&mut self) {
        if self.col < self.lines[self.row].len() {
            self.lines[self.row].remove(self.col);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].extend(next);
        }
    }

    /// Delete the word before the cursor (Ctrl+W).
    pub fn delete_word(&mut self) {
        let line = &self.lines[self.row];
        let mut start = self.col;
        while start > 0 && line[start - 1].is_whitespace() {
            start -= 1;
        }
        while start > 0 && !line[start - 1].is_whitespace() {
            start -= 1;
        }
        self.lines[self.row].drain(start..self.col);
        self.col = start;
    }

    /// Delete from the start of the line to the cursor (Ctrl+U).
    pub fn kill_to_start(&mut self) {
        self.lines[self.row].drain(..self.col);
        self.col = 0;
    }

    /// Delete from the cursor to the end of the line (Ctrl+K).
    pub fn kill_to_end(&mut self) {
        self.lines[self.row].truncate(self.col);
    }

    /// Cursor left.
    pub fn left(&mut self) {
        if self.col > 0 {
            self.col -= 1;
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.lines[self.row].len();
        }
    }

    /// Cursor right.
    pub fn right(&mut self) {
        if self.col < self.lines[self.row].len() {
            self.col += 1;
        } else if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    /// Cursor to the start of the line.
    pub fn home(&mut self) {
        self.col = 0;
    }

    /// Cursor to the end of the line.
    pub fn end(&mut self) {
        self.col = self.lines[self.row].len();
    }

    /// Up: the line above, or (on the first line) the previous history entry.
    pub fn up(&mut self) {
        if self.row > 0 {
            self.row -= 1;
            self.col = self.col.min(self.lines[self.row].len());
            return;
        }
        let next = match self.browsing {
            None if !self.history.is_empty() => {
                self.draft = self.text();
                self.history.len() - 1
            }
            Some(i) if i > 0 => i - 1,
            _ => return,
        };
        self.browsing = Some(next);
        let entry = self.history[next].clone();
        self.set(&entry);
    }

    /// Down: the line below, or (on the last line) the next history entry or the draft.
    pub fn down(&mut self) {
        if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = self.col.min(self.lines[self.row].len());
            return;
        }
        match self.browsing {
            Some(i) if i + 1 < self.history.len() => {
                self.browsing = Some(i + 1);
                let entry = self.history[i + 1].clone();
                self.set(&entry);
            }
            Some(_) => {
                self.browsing = None;
                let draft = std::mem::take(&mut self.draft);
                self.set(&draft);
            }
            None => {}
        }
    }

    /// Start a reverse search, or (while searching) find the next older match.
    pub fn search_older(&mut self) {
        match &mut self.search {
            None => self.search = Some(Search::default()),
            Some(s) => {
                let from = s.hit.unwrap_or(self.history.len());
                s.hit = find_older(&self.history, &s.query, from);
            }
        }
    }

    /// Type into the search query.
    pub fn search_type(&mut self, c: Option<char>) {
        if let Some(s) = &mut self.search {
            match c {
                Some(c) => s.query.push(c),
                None => {
                    s.query.pop();
                }
            }
            s.hit = find_older(&self.history, &s.query, self.history.len());
        }
    }

    /// The entry the search shows.
    pub fn search_hit(&self) -> Option<&str> {
        let s = self.search.as_ref()?;
        s.hit.map(|i| self.history[i].as_str())
    }

    /// End the search: keep the match in the box (`accept`) or restore nothing.
    pub fn search_end(&mut self, accept: bool) {
        if let Some(hit) = self.search_hit().map(str::to_string)
            && accept
        {
            self.set(&hit);
        }
        self.search = None;
    }

    /// The word before the cursor when it is one Tab completes (`@agent` anywhere, a
    /// `/command` at the start of the input); `None` after a space.
    pub fn completable_word(&self) -> Option<String> {
        let line = &self.lines[self.row];
        let mut start = self.col;
        while start > 0 && !line[start - 1].is_whitespace() {
            start -= 1;
        }
        let word: String = line[start..self.col].iter().collect();
        (word.starts_with('@') || (word.starts_with('/') && start == 0 && self.row == 0))
            .then_some(word)
    }

    /// Complete the word before the cursor from `candidates` (`@explorer`, `/help`): the
    /// longest common extension of every candidate it starts. Returns the matches.
    pub fn complete(&mut self, candidates: &[String]) -> Vec<String> {
        let Some(word) = self.completable_word() else {
            return Vec::new();
        };
        let matches: Vec<String> = candidates
            .iter()
            .filter(|c| c.starts_with(&word))
            .cloned()
            .collect();
        let Some(first) = matches.first() else {
            return matches;
        };
        let mut common: Vec<char> = first.chars().collect();
        for m in &matches[1..] {
            let n = common
                .iter()
                .zip(m.chars())
                .take_while(|(a, b)| **a == *b)
                .count();
            common.truncate(n);
        }
        let mut add: String = common[word.chars().count()..].iter().collect();
        if matches.len() == 1 {
            add.push(' ');
        }
        self.insert_str(&add);
        matches
    }
}

fn find_older(history: &[String], query: &str, before: usize) -> Option<usize> {
    if query.is_empty() {
        return None;
    }
    history[..before.min(history.len())]
        .iter()
        .rposition(|h| h.contains(query))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paste_keeps_every_line_break_and_is_shown_collapsed() {
        let lines: Vec<String> = (1..=200).map(|i| format!("line {i}")).collect();
        // tmux sends CR between lines; other terminals LF or CRLF.
        for sep in ["\r", "\n", "\r\n"] {
            let mut b = InputBox::default();
            b.insert_str("look: ");
            b.paste(&lines.join(sep));
            assert_eq!(b.lines(), ["look: [pasted 200 lines]"], "{sep:?}");
            assert_eq!(b.text(), format!("look: {}", lines.join("\n")), "{sep:?}");
            let taken = b.take();
            assert_eq!(taken.lines().count(), 200);
            assert!(b.is_empty());
            assert_eq!(
                b.history().last(),
                Some(&taken),
                "the history keeps the whole text"
            );
        }
    }

    #[test]
    fn pastes_expand_in_order_and_a_short_one_is_inserted_as_is() {
        let mut b = InputBox::default();
        b.paste("a\rb");
        b.insert(' ');
        // A pasted text that spells a marker is not expanded again.
        b.paste("[pasted 2 lines]\nc");
        b.insert(' ');
        b.paste("short");
        assert_eq!(b.lines(), ["[pasted 2 lines] [pasted #2 2 lines] short"]);
        assert_eq!(b.text(), "a\nb [pasted 2 lines]\nc short");
        // A marker the person deleted takes its text with it.
        let mut b = InputBox::default();
        b.paste("x\ny");
        b.kill_to_start();
        b.insert_str("typed");
        assert_eq!(b.text(), "typed");
    }

    #[test]
    fn editing_multi_line_text() {
        let mut b = InputBox::default();
        b.insert_str("helo");
        b.left();
        b.insert('l');
        b.end();
        b.insert('\n');
        b.insert_str("world foo");
        b.delete_word();
        assert_eq!(b.text(), "hello\nworld ");
        b.home();
        b.backspace();
        assert_eq!(b.text(), "helloworld ");
        assert_eq!(b.cursor(), (0, 5));
        b.kill_to_end();
        assert_eq!(b.take(), "hello");
        assert!(b.is_empty());
    }

    #[test]
    fn history_with_up_down_keeps_the_draft() {
        let mut b = InputBox::with_history(vec!["one".into(), "two".into()]);
        b.insert_str("dra");
        b.up();
        assert_eq!(b.text(), "two");
        b.up();
        assert_eq!(b.text(), "one");
        b.up();
        assert_eq!(b.text(), "one");
        b.down();
        b.down();
        assert_eq!(b.text(), "dra");
    }

    #[test]
    fn reverse_search_finds_older_matches() {
        let mut b =
            InputBox::with_history(vec!["cargo test".into(), "ls".into(), "cargo build".into()]);
        b.search_older();
        for c in "cargo".chars() {
            b.search_type(Some(c));
        }
        assert_eq!(b.search_hit(), Some("cargo build"));
        b.search_older();
        assert_eq!(b.search_hit(), Some("cargo test"));
        b.search_end(true);
        assert_eq!(b.text(), "cargo test");
    }

    #[test]
    fn tab_completes_agents_and_commands() {
        let names: Vec<String> = ["@explorer", "@auditor", "/help", "/history"]
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        let mut b = InputBox::default();
        b.insert_str("@expl");
        assert_eq!(b.complete(&names), ["@explorer"]);
        assert_eq!(b.text(), "@explorer ");
        let mut b = InputBox::default();
        b.insert_str("/h");
        assert_eq!(b.complete(&names).len(), 2);
        assert_eq!(b.text(), "/h");
        let mut b = InputBox::default();
        b.insert_str("look at /h");
        assert!(
            b.complete(&names).is_empty(),
            "a slash mid-line is no command"
        );
    }

    #[test]
    fn input_is_bounded() {
        let mut b = InputBox::default();
        b.insert_str(&"x".repeat(MAX_INPUT_CHARS + 10));
        assert_eq!(b.text().len(), MAX_INPUT_CHARS);
    }
}
