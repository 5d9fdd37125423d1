//! Word wrapping of styled lines to a width, done once per entry and width (the transcript
//! caches the result), so scrolling never re-wraps.

use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Wrap `line` to `width` columns, breaking at spaces where possible; continuation lines get
/// `indent` spaces.
pub fn wrap(line: Line<'static>, width: usize, indent: usize) -> Vec<Line<'static>> {
    let width = width.max(indent + 8);
    let total: usize = line
        .spans
        .iter()
        .flat_map(|s| s.content.chars())
        .map(|c| c.width().unwrap_or(0))
        .sum();
    if total <= width {
        return vec![line];
    }
    let style = line.style;
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut cur: Vec<Span<'static>> = Vec::new();
    let mut col = 0;
    // The last break opportunity in `cur`: (span index, byte offset after the space).
    let mut brk: Option<(usize, usize)> = None;
    let new_line = |out: &mut Vec<Line<'static>>, spans: Vec<Span<'static>>| {
        let mut l = Line::from(spans);
        l.style = style;
        out.push(l);
    };
    for span in line.spans {
        let st = span.style;
        let mut buf = String::new();
        for c in span.content.chars() {
            let w = c.width().unwrap_or(0);
            if col + w > width {
                // Move what follows the last break to the next line.
                let mut carry: Vec<Span<'static>> = Vec::new();
                if !buf.is_empty() {
                    cur.push(Span::styled(std::mem::take(&mut buf), st));
                }
                // Overflowing on a space breaks right there: carrying the words after an
                // earlier break and then dropping this space would glue two words together.
                let at = brk.take().filter(|_| c != ' ');
                if let Some((si, off)) = at {
                    let tail = cur.split_off(si + 1);
                    if let Some(s) = cur.get_mut(si) {
                        let rest = s.content[off..].to_string();
                        s.content = s.content[..off].trim_end().to_string().into();
                        if !rest.is_empty() {
                            carry.push(Span::styled(rest, s.style));
                        }
                    }
                    carry.extend(tail);
                }
                new_line(&mut out, std::mem::take(&mut cur));
                cur.push(Span::raw(" ".repeat(indent)));
                col = indent;
                for s in carry {
                    col += s
                        .content
                        .chars()
                        .map(|c| c.width().unwrap_or(0))
                        .sum::<usize>();
                    cur.push(s);
                }
                if c == ' ' {
                    continue;
                }
            }
            buf.push(c);
            col += w;
            if c == ' ' {
                // A break after this space: the span being built will be at index cur.len().
                brk = Some((cur.len(), buf.len()));
            }
        }
        if !buf.is_empty() {
            cur.push(Span::styled(buf, st));
        }
    }
    if !cur.is_empty() {
        new_line(&mut out, cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn wraps_at_spaces_and_breaks_long_words() {
        let l = Line::from(vec![Span::raw("the quick "), Span::raw("brown fox jumps")]);
        assert_eq!(text(&wrap(l, 10, 0)), ["the quick", "brown fox", "jumps"]);
        let l = Line::from("abcdefghijklmnopqrstuvwxyz");
        assert_eq!(
            text(&wrap(l, 10, 2)),
            ["abcdefghij", "  klmnopqr", "  stuvwxyz"]
        );
        // The overflowing character is the space after a full line.
        let l = Line::from("aaaa bbbb cccc");
        assert_eq!(text(&wrap(l, 9, 0)), ["aaaa bbbb", "cccc"]);
        let l = Line::from(vec![
            Span::raw("Ctrl+R search · Ctrl+T"),
            Span::raw(" tasks"),
        ]);
        assert_eq!(text(&wrap(l, 22, 0)), ["Ctrl+R search · Ctrl+T", "tasks"]);
        let short = Line::from("fits");
        assert_eq!(wrap(short.clone(), 10, 0), [short]);
    }
}
