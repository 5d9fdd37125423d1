//! Markdown to styled lines (pulldown-cmark): headings, emphasis, lists, quotes, inline code
//! and fenced code blocks highlighted by syntect with its bundled syntaxes and theme. The
//! syntax set is loaded on the first code block, not at start-up. Tables are laid out in
//! aligned columns at the width the text is drawn at.

use super::table::Table;
use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use std::sync::OnceLock;
use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme, ThemeSet};
use syntect::parsing::SyntaxSet;

/// Code lines highlighted per block at most; the rest are shown plain (bounded work per frame).
const MAX_HIGHLIGHTED_LINES: usize = 2_000;

fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

fn theme() -> &'static Theme {
    static THEME: OnceLock<Theme> = OnceLock::new();
    THEME.get_or_init(|| {
        let mut set = ThemeSet::load_defaults();
        set.themes.remove("base16-ocean.dark").unwrap_or_default()
    })
}

/// Highlight `code` written in `lang` (a fence tag or file extension); plain when unknown.
pub fn highlight(code: &str, lang: &str) -> Vec<Line<'static>> {
    let plain = Style::default().fg(Color::Gray);
    let set = syntaxes();
    let syntax = (!lang.is_empty())
        .then(|| set.find_syntax_by_token(lang))
        .flatten();
    let Some(syntax) = syntax else {
        return code
            .lines()
            .map(|l| Line::from(Span::styled(l.to_string(), plain)))
            .collect();
    };
    let mut h = HighlightLines::new(syntax, theme());
    let mut out = Vec::new();
    for (i, line) in syntect::util::LinesWithEndings::from(code).enumerate() {
        let text = line.trim_end_matches(['\n', '\r']);
        if i >= MAX_HIGHLIGHTED_LINES {
            out.push(Line::from(Span::styled(text.to_string(), plain)));
            continue;
        }
        match h.highlight_line(line, set) {
            Ok(ranges) => out.push(Line::from(
                ranges
                    .into_iter()
                    .map(|(st, piece)| {
                        let fg = st.foreground;
                        Span::styled(
                            piece.trim_end_matches(['\n', '\r']).to_string(),
                            Style::default().fg(Color::Rgb(fg.r, fg.g, fg.b)),
                        )
                    })
                    .collect::<Vec<_>>(),
            )),
            Err(_) => out.push(Line::from(Span::styled(text.to_string(), plain))),
        }
    }
    out
}

/// Render Markdown `text` as lines; only tables are laid out for `width`, the rest is left
/// for the caller to wrap.
pub fn render(text: &str, width: usize) -> Vec<Line<'static>> {
    let mut r = Renderer {
        width,
        ..Renderer::default()
    };
    for ev in Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES) {
        r.event(ev);
    }
    r.flush();
    r.lines
}

#[derive(Default)]
struct Renderer {
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// Open lists: the next number for ordered ones.
    lists: Vec<Option<u64>>,
    quote: usize,
    code: Option<(String, String)>,
    /// The pending item marker, written before the item's first text.
    marker: Option<String>,
    /// The width tables are laid out for.
    width: usize,
    /// The table being collected: its cells gather in `current`.
    table: Option<Table>,
}

impl Renderer {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, f: impl FnOnce(Style) -> Style) {
        let s = f(self.style());
        self.styles.push(s);
    }

    fn prefix(&mut self) {
        if self.current.is_empty() && self.table.is_none() {
            if self.quote > 0 {
                self.current.push(Span::styled(
                    "│ ".repeat(self.quote),
                    Style::default().fg(Color::DarkGray),
                ));
            }
            let indent = self.lists.len().saturating_sub(1) * 2;
            match self.marker.take() {
                Some(m) => self
                    .current
                    .push(Span::raw(format!("{}{m}", " ".repeat(indent)))),
                None if !self.lists.is_empty() => {
                    self.current.push(Span::raw(" ".repeat(indent + 2)))
                }
                None => {}
            }
        }
    }

    /// The laid-out table, each line led by the prefix of the block it is in (a list item's
    /// indent or marker, a quote's bars), in the width that prefix leaves.
    fn table_lines(&mut self, t: &Table) {
        self.prefix();
        let mut lead = std::mem::take(&mut self.current);
        let lead_width: usize = lead.iter().map(Span::width).sum();
        for line in t.lines(self.width.saturating_sub(lead_width)) {
            let mut line = line;
            line.spans.splice(0..0, lead);
            self.lines.push(line);
            // A list item's marker leads the first line only.
            self.prefix();
            lead = std::mem::take(&mut self.current);
        }
    }

    fn text(&mut self, t: &str) {
        for (i, part) in t.split('\n').enumerate() {
            if i > 0 {
                self.flush();
            }
            if !part.is_empty() {
                self.prefix();
                self.current
                    .push(Span::styled(part.to_string(), self.style()));
            }
        }
    }

    fn flush(&mut self) {
        // Inside a table a break stays in its cell.
        if !self.current.is_empty() && self.table.is_none() {
            self.lines
                .push(Line::from(std::mem::take(&mut self.current)));
        }
    }

    fn blank(&mut self) {
        self.flush();
        if self.lines.last().is_some_and(|l| !l.spans.is_empty()) {
            self.lines.push(Line::default());
        }
    }

    fn event(&mut self, ev: Event<'_>) {
        if let Some((lang, buf)) = &mut self.code {
            match ev {
                Event::Text(t) => buf.push_str(&t),
                Event::End(TagEnd::CodeBlock) => {
                    let (lang, buf) = (lang.clone(), std::mem::take(buf));
                    self.code = None;
                    for l in highlight(&buf, &lang) {
                        let mut spans = vec![Span::styled("  ", Style::default())];
                        spans.extend(l.spans);
                        self.lines.push(Line::from(spans));
                    }
                    self.blank();
                }
                _ => {}
            }
            return;
        }
        match ev {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(c) => {
                self.prefix();
                self.current
                    .push(Span::styled(c.to_string(), self.style().fg(Color::Yellow)));
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.blank();
                self.lines.push(Line::styled(
                    "─".repeat(40),
                    Style::default().fg(Color::DarkGray),
                ));
                self.blank();
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            Event::Html(h) | Event::InlineHtml(h) => self.text(&h),
            Event::FootnoteReference(f) => self.text(&format!("[{f}]")),
            Event::InlineMath(m) | Event::DisplayMath(m) => self.text(&m),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {}
            Tag::Heading { level, .. } => {
                self.blank();
                let color = match level {
                    HeadingLevel::H1 => Color::Magenta,
                    HeadingLevel::H2 => Color::Cyan,
                    _ => Color::Blue,
                };
                self.push_style(|s| s.fg(color).add_modifier(Modifier::BOLD));
                let hashes = "#".repeat(level as usize);
                self.current
                    .push(Span::styled(format!("{hashes} "), self.style()));
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.quote += 1;
                self.push_style(|s| s.add_modifier(Modifier::ITALIC));
            }
            Tag::CodeBlock(kind) => {
                self.blank();
                let lang = match kind {
                    CodeBlockKind::Fenced(l) => {
                        l.split(',').next().unwrap_or("").trim().to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.blank();
                } else {
                    self.flush();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "• ".to_string(),
                };
                self.marker = Some(marker);
            }
            Tag::Emphasis => self.push_style(|s| s.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|s| s.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(|s| s.add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { .. } => {
                self.push_style(|s| s.fg(Color::Blue).add_modifier(Modifier::UNDERLINED))
            }
            Tag::Image { .. } => self.push_style(|s| s.fg(Color::Blue)),
            Tag::Table(aligns) => {
                self.blank();
                self.table = Some(Table::new(aligns));
            }
            Tag::TableHead => self.push_style(|s| s.add_modifier(Modifier::BOLD)),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                if self.lists.is_empty() {
                    self.blank();
                } else {
                    self.flush();
                }
            }
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.blank();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote = self.quote.saturating_sub(1);
                self.styles.pop();
                self.blank();
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Item => self.flush(),
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Link
            | TagEnd::Image => {
                self.styles.pop();
            }
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.current);
                if let Some(t) = &mut self.table {
                    t.cell(cell);
                }
            }
            TagEnd::TableHead => {
                self.styles.pop();
                if let Some(t) = &mut self.table {
                    t.end_row(true);
                }
            }
            TagEnd::TableRow => {
                if let Some(t) = &mut self.table {
                    t.end_row(false);
                }
            }
            TagEnd::Table => {
                if let Some(t) = self.table.take() {
                    self.table_lines(&t);
                }
                self.blank();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn headings_lists_and_code_blocks() {
        let md = "# Title\n\nSome *emphasis* and `code`.\n\n- one\n- two\n  1. nested\n\n```rust\nfn main() {}\n```\n";
        let lines = render(md, 80);
        assert_eq!(
            plain(&lines),
            [
                "# Title",
                "",
                "Some emphasis and code.",
                "",
                "• one",
                "• two",
                "  1. nested",
                "",
                "  fn main() {}",
                "",
            ]
        );
        let code = &lines[8];
        assert!(
            code.spans
                .iter()
                .any(|s| matches!(s.style.fg, Some(Color::Rgb(..)))),
            "the code is highlighted: {code:?}"
        );
        assert!(
            lines[0].spans[0]
                .style
                .add_modifier
                .contains(Modifier::BOLD)
        );
    }

    fn width(s: &str) -> usize {
        unicode_width::UnicodeWidthStr::width(s)
    }

    #[test]
    fn a_table_is_laid_out_in_aligned_columns() {
        let md = "Before.\n\n| Name | Size |\n|------|-----:|\n| inventory.py | 12 |\n| a | 1234 |\n\nAfter.\n";
        let lines = render(md, 80);
        assert_eq!(
            plain(&lines),
            [
                "Before.",
                "",
                "Name         │ Size",
                "─────────────┼─────",
                "inventory.py │   12",
                "a            │ 1234",
                "",
                "After.",
                "",
            ]
        );
        assert!(
            lines[2].spans[0]
                .style
                .add_modifier
                .contains(Modifier::BOLD),
            "the header is bold: {:?}",
            lines[2]
        );
    }

    #[test]
    fn a_table_in_a_list_item_or_a_quote_keeps_its_indent() {
        let md = "- files:\n\n  | Name | Size |\n  |------|-----:|\n  | a.py | 12 |\n";
        let shown = plain(&render(md, 80));
        let table: Vec<&String> = shown.iter().filter(|l| l.contains('│')).collect();
        assert_eq!(table, ["  Name │ Size", "  a.py │   12"], "{shown:?}");
        assert!(shown.contains(&"  ─────┼─────".to_string()), "{shown:?}");

        let md = "> | Name | Size |\n> |------|-----:|\n> | a.py | 12 |\n";
        let shown = plain(&render(md, 80));
        let rows: Vec<&String> = shown
            .iter()
            .filter(|l| l.contains("Name") || l.contains("a.py"))
            .collect();
        assert_eq!(rows, ["│ Name │ Size", "│ a.py │   12"], "{shown:?}");
        // The table is laid out in the width the prefix leaves.
        let md = "- x\n\n  | Name | Notes |\n  |---|---|\n  | a | one two three four five six |\n";
        for line in plain(&render(md, 24)) {
            assert!(width(&line) <= 24, "{line:?}");
        }
    }

    #[test]
    fn cjk_cells_count_two_columns_each() {
        let md = "| 名前 | x |\n|---|---|\n| 東京都 | y |\n| ab | z |\n";
        let text = plain(&render(md, 80));
        assert_eq!(
            text[..4],
            ["名前   │ x", "───────┼──", "東京都 │ y", "ab     │ z"]
        );
        // Every separator sits in the same display column.
        let cols: Vec<usize> = text[..4]
            .iter()
            .filter_map(|l| l.find(['│', '┼']).map(|i| width(&l[..i])))
            .collect();
        assert_eq!(cols, [7, 7, 7, 7]);
    }

    #[test]
    fn a_table_wider_than_the_terminal_wraps_its_widest_cells() {
        let md = "| key | description |\n|---|---|\n| id | the identifier of the task as the store keeps it |\n| 東京 | 東京都の人口は多いです |\n";
        for w in [30usize, 20, 12, 5] {
            let text = plain(&render(md, w));
            for l in &text {
                assert!(width(l) <= w.max(10), "{l:?} is wider than {w}");
            }
            let cols: Vec<usize> = text
                .iter()
                .filter_map(|l| l.find(['│', '┼']).map(|i| width(&l[..i])))
                .collect();
            assert!(cols.windows(2).all(|p| p[0] == p[1]), "{text:#?}");
            // Nothing is lost: every word is still there.
            let all = text.join(" ");
            for word in ["identifier", "store", "keeps"] {
                assert!(w < 20 || all.contains(word), "{word} missing in {text:#?}");
            }
        }
        let text = plain(&render(md, 30));
        assert_eq!(text[0], "key  │ description");
        assert!(text[2].starts_with("id   │ the identifier of"), "{text:#?}");
    }
}
