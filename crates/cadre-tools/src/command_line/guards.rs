//! Checks on a line's text before the parser sees it: shapes that make brush-parser
//! backtrack exponentially, loop for good or panic (most found by fuzzing) are refused, so
//! a parse always ends quickly.

use super::{MAX_LINE_BYTES, MAX_NESTING, MAX_SUBSCRIPT_NESTING};

/// Why `text` must not be handed to the parser, if it must not.
pub(super) fn refusal(text: &str) -> Option<String> {
    if text.len() > MAX_LINE_BYTES {
        return Some(format!("the command is longer than {MAX_LINE_BYTES} bytes"));
    }
    let why = if nesting(text) > MAX_NESTING {
        "the command nests brackets too deeply"
    } else if subscript_nesting(text) > MAX_SUBSCRIPT_NESTING {
        "the command nests array subscripts too deeply"
    } else if unclosed_subscript(text) {
        // The parser backtracks over each one (six in a word took 13 s; found by
        // fuzzing), and the shell refuses them anyway ("bad substitution").
        "an array subscript is not closed before its `}`"
    } else if text
        .chars()
        .any(|c| c.is_control() && c != '\t' && c != '\n')
    {
        // No shell command needs them, and the parser loops on some (a form feed after
        // `<<`, found by fuzzing).
        "the command contains control characters"
    } else if oversized_fd(text) {
        "a redirection names a file descriptor number that is too large"
    } else if risky_heredoc(text) {
        // The tokenizer loops for good on these (`<<$( ;$((<<f)` and `$(<<  `, found
        // by fuzzing and by review).
        "a here-document's delimiter is missing, blank or a substitution"
    } else {
        return None;
    };
    Some(why.to_string())
}

/// The deepest nesting of brackets in `text`, counted without regard to quoting (an upper
/// bound of what the parser recurses into).
fn nesting(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for b in text.bytes() {
        match b {
            b'(' | b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            b'`' => max = max.max(depth + 1),
            _ => {}
        }
    }
    max
}

/// The deepest nesting of array subscripts opened by a parameter expansion (`${name[`),
/// counted without regard to quoting, as `nesting` is.
fn subscript_nesting(text: &str) -> usize {
    let bytes = text.as_bytes();
    // One entry per open bracket: whether it opened a subscript. Bounded by the line's
    // length, which is checked first.
    let mut open: Vec<bool> = Vec::new();
    let (mut depth, mut max) = (0usize, 0usize);
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'[' => {
                let subscript = opens_subscript(&bytes[..i]);
                open.push(subscript);
                if subscript {
                    depth += 1;
                    max = max.max(depth);
                }
            }
            b'(' | b'{' => open.push(false),
            b')' | b'}' | b']' => depth -= usize::from(open.pop() == Some(true)),
            _ => {}
        }
    }
    max
}

/// Array subscripts (`${NAME[`) a line may open; past it the line is refused rather than
/// scanned for their ends (the scan of each runs to its end).
const MAX_SUBSCRIPTS: usize = 64;

/// True when an array subscript opened by `${NAME[` meets the `}` of its expansion (at its
/// own depth of braces and brackets) before its `]`, or the end of the line, or when the
/// line opens more than [`MAX_SUBSCRIPTS`]. Counted without regard to quoting.
fn unclosed_subscript(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut opened = 0usize;
    for i in 0..bytes.len() {
        if bytes[i] != b'[' || !opens_subscript(&bytes[..i]) {
            continue;
        }
        opened += 1;
        if opened > MAX_SUBSCRIPTS {
            return true;
        }
        let mut depth = 0usize;
        let mut closed = false;
        for &b in &bytes[i + 1..] {
            match b {
                b'{' | b'[' => depth += 1,
                b']' if depth == 0 => {
                    closed = true;
                    break;
                }
                b'}' if depth == 0 => break,
                b'}' | b']' => depth -= 1,
                _ => {}
            }
        }
        if !closed {
            return true;
        }
    }
    false
}

/// True when `before` ends in `${NAME` (or `${#NAME`, `${!NAME`, `${ NAME`), so that a `[`
/// after it opens an array subscript.
fn opens_subscript(before: &[u8]) -> bool {
    let name = before
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    if name == 0 {
        return false;
    }
    let mut rest = &before[..before.len() - name];
    // `${#a[@]}` and `${!a[@]}`, and the parser's reading of `${ a[` (which the shell
    // refuses): a subscript all the same (found by fuzzing).
    if let Some(r) = rest.strip_suffix(b"#").or_else(|| rest.strip_suffix(b"!")) {
        rest = r;
    }
    let blanks = rest
        .iter()
        .rev()
        .take_while(|b| **b == b' ' || **b == b'\t')
        .count();
    rest[..rest.len() - blanks].ends_with(b"${")
}

/// True when a run of digits right before `<` or `>` is too long for a file descriptor
/// number (the shell's `2>` form): the parser panics on one that overflows an `i32`.
fn oversized_fd(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut run = 0usize;
    for &b in bytes {
        if b.is_ascii_digit() {
            run += 1;
        } else {
            if (b == b'<' || b == b'>') && run > 9 {
                return true;
            }
            run = 0;
        }
    }
    false
}

/// True when a here-document operator (`<<` or `<<-`, not the here-string `<<<`) is
/// followed by what the tokenizer loops on without end. Every such input fuzzing found
/// leaves a here-document open at the end of the text (`<<$( ;$((<<f)`, `$(<<  `,
/// `cat <<"" `), so a line is refused when a here-document's body does not end within it
/// (no later line is its delimiter), and also when the delimiter is missing or empty once
/// unquoted (`""`), when two or more blanks follow `<<` (inside `$(…)` a blank becomes an
/// empty delimiter), or when the delimiter holds a substitution (`$(`, `$[`, a backquote;
/// the shell takes it literally, so no script means one). A body is skipped, so what it
/// holds is not read as operators, and a `<<` inside `((…))` / `$((…))` is taken for a
/// shift, which needs no body (the other checks still apply: `$((1 << $(nproc)))` is
/// refused, and only asked about). Counted without regard to quoting, as `nesting` is: a
/// quoted `<<` refuses a command that would have parsed, never the reverse.
fn risky_heredoc(text: &str) -> bool {
    let bytes = text.as_bytes();
    let is_blank = |b: &u8| *b == b' ' || *b == b'\t';
    // Where the bodies of the current line's here-documents end: the scan goes on there
    // after the line's newline.
    let mut bodies_end: Option<usize> = None;
    // Open arithmetic (`((`, `$((`): a `<<` in it is a shift.
    let mut arithmetic = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\n' {
            i = bodies_end.take().unwrap_or(i + 1);
            continue;
        }
        if bytes[i..].starts_with(b"((") {
            arithmetic += 1;
            i += 2;
            continue;
        }
        if arithmetic > 0 && bytes[i..].starts_with(b"))") {
            arithmetic -= 1;
            i += 2;
            continue;
        }
        if bytes[i] != b'<' {
            i += 1;
            continue;
        }
        // The tokenizer splits a run of `<` greedily (`<<<<<` is `<<<` then `<<`): no
        // script writes four or more, `<<<` is a here-string, `<<` a here-document.
        let run = bytes[i..].iter().take_while(|b| **b == b'<').count();
        match run {
            1 | 3 => {
                i += run;
                continue;
            }
            2 => {}
            _ => return true,
        }
        let mut j = i + 2;
        let strip_tabs = bytes.get(j) == Some(&b'-');
        if strip_tabs {
            j += 1;
        }
        let blanks = bytes[j..].iter().take_while(|b| is_blank(b)).count();
        j += blanks;
        let len = bytes[j..]
            .iter()
            .take_while(|b| !matches!(b, b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>'))
            .count();
        let word = &bytes[j..j + len];
        let delimiter: Vec<u8> = word
            .iter()
            .copied()
            .filter(|b| !matches!(b, b'"' | b'\'' | b'\\'))
            .collect();
        if blanks >= 2 || delimiter.is_empty() || has_substitution(word) {
            return true;
        }
        if arithmetic > 0 {
            // Likely a shift, which has no body; the checks above still hold, since the
            // count ignores quoting (a quoted `((` must not hide a here-document).
            i = j + len;
            continue;
        }
        let line_end = bytes[j..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |p| j + p);
        let body_start = bodies_end.unwrap_or(line_end + 1).max(line_end + 1);
        match body_end(bytes, body_start, &delimiter, strip_tabs) {
            Some(end) => bodies_end = Some(end),
            None => return true,
        }
        i = j + len;
    }
    false
}

/// True when a here-document's delimiter word holds `$(`, `$[` or a backquote.
fn has_substitution(word: &[u8]) -> bool {
    word.iter()
        .enumerate()
        .any(|(k, &b)| b == b'`' || (k > 0 && word[k - 1] == b'$' && (b == b'(' || b == b'[')))
}

/// Where a here-document body starting at `start` ends (just after its delimiter line), or
/// `None` when no line from there on is `delimiter` (with leading tabs removed for `<<-`).
fn body_end(bytes: &[u8], start: usize, delimiter: &[u8], strip_tabs: bool) -> Option<usize> {
    let mut at = start;
    while at < bytes.len() {
        let end = bytes[at..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |p| at + p);
        let mut line = &bytes[at..end];
        if strip_tabs {
            let tabs = line.iter().take_while(|b| **b == b'\t').count();
            line = &line[tabs..];
        }
        if line == delimiter {
            return Some(end.min(bytes.len()));
        }
        at = end + 1;
    }
    None
}
