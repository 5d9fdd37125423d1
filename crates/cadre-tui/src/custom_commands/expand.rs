//! Expanding a command's body: arguments substituted, then split into text, shell commands
//! (`!cmd` lines and Claude Code's inline "!`cmd`") and file includes (`@path`), which a
//! [`Resolve`] fills in.

use super::Resolve;

/// A part of an expanded body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text kept as it is.
    Text(String),
    /// A command for `bash`, replaced by its output.
    Shell(String),
    /// `@path`: replaced by the file's contents; kept as written when there is no such file.
    Include(String),
}

/// `body` with `$ARGUMENTS` replaced by `args` and `$1`…`$9` by its words (quotes group
/// words), split into pieces. A body without any placeholder gets non-empty arguments
/// appended as `ARGUMENTS: …`, as Claude Code does, so they are never lost.
pub fn expand(body: &str, args: &str) -> Vec<Piece> {
    let args = args.trim();
    let words = words_of(args);
    let mut text = String::with_capacity(body.len() + args.len());
    let mut used = false;
    let mut rest = body;
    while let Some(i) = rest.find('$') {
        text.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            text.push_str(args);
            used = true;
            rest = tail;
        } else if let Some(d) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
            let n = (d as usize) - ('1' as usize);
            text.push_str(words.get(n).map_or("", String::as_str));
            used = true;
            rest = &after[1..];
        } else {
            text.push('$');
            rest = after;
        }
    }
    text.push_str(rest);
    if !used && !args.is_empty() {
        text.push_str("\n\nARGUMENTS: ");
        text.push_str(args);
    }
    split_pieces(&text)
}

/// Whitespace-separated words, `"…"` and `'…'` grouping.
fn words_of(args: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in args.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        words.push(cur);
    }
    words
}

fn split_pieces(text: &str) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    let mut push_text = |out: &mut Vec<Piece>, s: &str| {
        if s.is_empty() {
            return;
        }
        if let Some(Piece::Text(t)) = out.last_mut() {
            t.push_str(s);
        } else {
            out.push(Piece::Text(s.to_string()));
        }
    };
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let trimmed = body.trim_start();
        if let Some(cmd) = trimmed.strip_prefix('!')
            && !cmd.starts_with('`')
            && !cmd.trim().is_empty()
        {
            out.push(Piece::Shell(cmd.trim().to_string()));
            push_text(&mut out, &line[body.len()..]);
            continue;
        }
        split_inline(line, &mut out, &mut push_text);
    }
    out
}

/// Inline "!`cmd`" and `@path` in one line.
fn split_inline(
    line: &str,
    out: &mut Vec<Piece>,
    push_text: &mut impl FnMut(&mut Vec<Piece>, &str),
) {
    let mut rest = line;
    loop {
        let bang = rest.find("!`");
        let at = find_include(rest);
        match (bang, at) {
            (Some(b), a) if a.is_none_or(|(a, _)| b < a) => {
                let after = &rest[b + 2..];
                match after.find('`') {
                    Some(end) if end > 0 => {
                        push_text(out, &rest[..b]);
                        out.push(Piece::Shell(after[..end].to_string()));
                        rest = &after[end + 1..];
                    }
                    _ => {
                        push_text(out, &rest[..b + 2]);
                        rest = after;
                    }
                }
            }
            (_, Some((a, len))) => {
                push_text(out, &rest[..a]);
                out.push(Piece::Include(rest[a + 1..a + len].to_string()));
                rest = &rest[a + len..];
            }
            _ => {
                push_text(out, rest);
                return;
            }
        }
    }
}

/// Where the next `@path` starts (at the line's start or after whitespace) and its length
/// with the `@`; trailing punctuation is not part of the path.
fn find_include(s: &str) -> Option<(usize, usize)> {
    let mut prev_space = true;
    for (i, c) in s.char_indices() {
        if c == '@' && prev_space {
            let tail = &s[i + 1..];
            let end = tail.find(char::is_whitespace).unwrap_or(tail.len());
            let path = tail[..end].trim_end_matches(['.', ',', ';', ':', ')', '!', '?']);
            if !path.is_empty() && !path.contains('@') {
                return Some((i, path.len() + 1));
            }
        }
        prev_space = c.is_whitespace();
    }
    None
}

/// The pieces as one prompt, with shell output and file contents filled in by `resolver`.
pub async fn render(pieces: &[Piece], resolver: &dyn Resolve) -> String {
    let mut out = String::new();
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Shell(cmd) => out.push_str(resolver.shell(cmd).await.trim_end()),
            Piece::Include(path) => match resolver.include(path).await {
                Some(text) => out.push_str(&format!(
                    "\n<file path=\"{path}\">\n{}\n</file>\n",
                    text.trim_end()
                )),
                None => {
                    out.push('@');
                    out.push_str(path);
                }
            },
        }
    }
    out
}
