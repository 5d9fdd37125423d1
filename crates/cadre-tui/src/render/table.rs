//! Markdown tables laid out in aligned columns: a header, a separator and the rows, columns
//! sized by display width (a CJK character counts two). A table wider than the terminal has
//! its widest columns shrunk and their cells wrapped, so no line is wider than the frame.

use pulldown_cmark::Alignment;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Between two columns.
const SEP: &str = " │ ";
const SEP_WIDTH: usize = 3;

/// One cell: its styled characters (kept per character so cells wrap anywhere).
type Cell = Vec<(char, Style)>;

/// A table being collected from parser events, then laid out at a width.
#[derive(Debug, Default)]
pub struct Table {
    aligns: Vec<Alignment>,
    /// The header row first (when there is one), then the body rows.
    rows: Vec<Vec<Cell>>,
    has_head: bool,
    row: Vec<Cell>,
}

fn char_width(c: char) -> usize {
    c.width().unwrap_or(0)
}

fn cell_width(cell: &[(char, Style)]) -> usize {
    cell.iter().map(|(c, _)| char_width(*c)).sum()
}

impl Table {
    /// A table whose columns are aligned as `aligns` says.
    pub fn new(aligns: Vec<Alignment>) -> Self {
        Self {
            aligns,
            ..Self::default()
        }
    }

    /// A finished cell of the current row.
    pub fn cell(&mut self, spans: Vec<Span<'static>>) {
        let mut cell: Cell = Vec::new();
        for s in spans {
            // Control characters would move the cursor; a tab is one space here.
            cell.extend(
                s.content
                    .chars()
                    .map(|c| (if c.is_control() { ' ' } else { c }, s.style)),
            );
        }
        let start = cell
            .iter()
            .position(|(c, _)| *c != ' ')
            .unwrap_or(cell.len());
        cell.drain(..start);
        while cell.last().is_some_and(|(c, _)| *c == ' ') {
            cell.pop();
        }
        self.row.push(cell);
    }

    /// The current row is complete; `head` when it is the header.
    pub fn end_row(&mut self, head: bool) {
        if head {
            self.has_head = true;
        }
        self.rows.push(std::mem::take(&mut self.row));
    }

    /// The table as lines no wider than `width` (unless even one column per cell cannot fit).
    pub fn lines(&self, width: usize) -> Vec<Line<'static>> {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        if cols == 0 {
            return Vec::new();
        }
        let widths = column_widths(&self.rows, cols, width);
        let dim = Style::default().fg(Color::DarkGray);
        let mut out = Vec::new();
        for (i, row) in self.rows.iter().enumerate() {
            out.extend(self.row_lines(row, &widths, dim));
            if i == 0 && self.has_head {
                let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
                out.push(Line::from(Span::styled(rule.join("─┼─"), dim)));
            }
        }
        out
    }

    /// One row: each cell wrapped to its column, padded, side by side.
    fn row_lines(&self, row: &[Cell], widths: &[usize], dim: Style) -> Vec<Line<'static>> {
        let empty = Cell::new();
        let wrapped: Vec<Vec<Cell>> = widths
            .iter()
            .enumerate()
            .map(|(c, w)| wrap_cell(row.get(c).unwrap_or(&empty), *w))
            .collect();
        let height = wrapped.iter().map(Vec::len).max().unwrap_or(1).max(1);
        (0..height)
            .map(|r| {
                let mut spans: Vec<Span<'static>> = Vec::new();
                for (c, w) in widths.iter().enumerate() {
                    if c > 0 {
                        spans.push(Span::styled(SEP, dim));
                    }
                    let piece = wrapped[c].get(r).unwrap_or(&empty);
                    let pad = w.saturating_sub(cell_width(piece));
                    let (left, right) = match self.aligns.get(c) {
                        Some(Alignment::Right) => (pad, 0),
                        Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                        _ => (0, pad),
                    };
                    let last = c + 1 == widths.len();
                    if left > 0 {
                        spans.push(Span::raw(" ".repeat(left)));
                    }
                    spans.extend(to_spans(piece));
                    // No trailing blanks after the last column.
                    if right > 0 && !last {
                        spans.push(Span::raw(" ".repeat(right)));
                    }
                }
                Line::from(spans)
            })
            .collect()
    }
}

/// Natural column widths, then the widest shrunk one column at a time until the table fits
/// `width`; never below the widest single character of a column.
fn column_widths(rows: &[Vec<Cell>], cols: usize, width: usize) -> Vec<usize> {
    let mut widths = vec![1; cols];
    let mut floor = vec![1; cols];
    for row in rows {
        for (c, cell) in row.iter().enumerate() {
            widths[c] = widths[c].max(cell_width(cell));
            let widest = cell
                .iter()
                .map(|(ch, _)| char_width(*ch))
                .max()
                .unwrap_or(1);
            floor[c] = floor[c].max(widest);
        }
    }
    let room = width.saturating_sub(SEP_WIDTH * (cols - 1));
    let mut total: usize = widths.iter().sum();
    while total > room {
        let Some(c) = (0..cols)
            .filter(|&c| widths[c] > floor[c])
            .max_by_key(|&c| (widths[c], std::cmp::Reverse(c)))
        else {
            break;
        };
        // Shrink the widest straight down to the next widest (or as far as needed).
        let next = (0..cols)
            .filter(|&o| o != c && widths[o] < widths[c])
            .map(|o| widths[o])
            .max()
            .unwrap_or(floor[c])
            .max(floor[c]);
        let cut = (widths[c] - next).clamp(1, total - room);
        widths[c] -= cut;
        total -= cut;
    }
    widths
}

/// `cell` broken into pieces at most `width` wide: at the last space that fits, else anywhere.
fn wrap_cell(cell: &Cell, width: usize) -> Vec<Cell> {
    let mut out = Vec::new();
    let mut rest: &[(char, Style)] = cell;
    while cell_width(rest) > width {
        // The longest prefix that fits.
        let mut used = 0;
        let mut fit = 0;
        for (c, _) in rest {
            let w = char_width(*c);
            if used + w > width {
                break;
            }
            used += w;
            fit += 1;
        }
        let fit = fit.max(1);
        let brk = rest[..=fit.min(rest.len() - 1)]
            .iter()
            .rposition(|(c, _)| *c == ' ')
            .filter(|&p| p > 0);
        let (head, tail) = match brk {
            Some(p) => (&rest[..p], &rest[p + 1..]),
            None => rest.split_at(fit),
        };
        let mut head = head.to_vec();
        while head.last().is_some_and(|(c, _)| *c == ' ') {
            head.pop();
        }
        out.push(head);
        rest = tail;
        while rest.first().is_some_and(|(c, _)| *c == ' ') {
            rest = &rest[1..];
        }
    }
    if !rest.is_empty() || out.is_empty() {
        out.push(rest.to_vec());
    }
    out
}

/// Runs of equally styled characters as spans.
fn to_spans(cell: &Cell) -> Vec<Span<'static>> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut buf = String::new();
    let mut style = None;
    for (c, st) in cell {
        if style.is_some_and(|s| s != *st) {
            spans.push(Span::styled(
                std::mem::take(&mut buf),
                style.unwrap_or_default(),
            ));
        }
        style = Some(*st);
        buf.push(*c);
    }
    if !buf.is_empty() {
        spans.push(Span::styled(buf, style.unwrap_or_default()));
    }
    spans
}
