//! Reading a sed script far enough to tell whether it runs commands: GNU sed's `e` command
//! and the `e` flag of `s` hand text to a shell. A script this reader cannot follow counts as
//! running commands. One pass over the script, so the work is linear in its length.

/// Whether `script` may run commands (or cannot be read).
pub(super) fn runs_commands(script: &str) -> bool {
    let b = script.as_bytes();
    let mut i = 0;
    loop {
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b';') {
            i += 1;
        }
        if i >= b.len() {
            return false;
        }
        let Some(at) = skip_address(b, i) else {
            return true;
        };
        i = at;
        let Some(&command) = b.get(i) else {
            return true;
        };
        i += 1;
        match command {
            b'e' => return true,
            b's' => {
                let Some(at) = skip_parts(b, i, 2) else {
                    return true;
                };
                i = at;
                // Flags run to the end of the command; `w FILE` takes the rest of the line.
                while i < b.len() && !matches!(b[i], b';' | b'\n' | b'}') {
                    match b[i] {
                        b'e' => return true,
                        b'w' => i = line_end(b, i),
                        _ => i += 1,
                    }
                }
            }
            b'y' => match skip_parts(b, i, 2) {
                Some(at) => i = at,
                None => return true,
            },
            // Text, file names and comments run to the end of the line.
            b'a' | b'i' | b'c' | b'r' | b'R' | b'w' | b'W' | b'#' => i = line_end(b, i),
            // Labels run to `;` or the end of the line.
            b'b' | b't' | b'T' | b':' => {
                while i < b.len() && !matches!(b[i], b';' | b'\n') {
                    i += 1;
                }
            }
            b'q' | b'Q' | b'l' | b'L' => {
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b' ') {
                    i += 1;
                }
            }
            b'{' | b'}' | b'=' | b'd' | b'D' | b'g' | b'G' | b'h' | b'H' | b'n' | b'N' | b'p'
            | b'P' | b'x' | b'z' | b'F' => {}
            _ => return true,
        }
    }
}

/// Past the address of a command at `i` (`1`, `$`, `/re/I`, `\%re%`, `1,+3`, `0~2`, `!`).
fn skip_address(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        match b.get(i)? {
            c if c.is_ascii_digit() => i += 1,
            b'$' | b',' | b'~' | b'+' | b'!' | b' ' | b'\t' | b'I' | b'M' => i += 1,
            b'/' => i = skip_delimited(b, i + 1, b'/', 1)?,
            // `\%re%`: a regular expression with a delimiter of its own.
            b'\\' => i = skip_parts(b, i + 1, 1)?,
            _ => return Some(i),
        }
    }
}

/// Past the `parts` parts of `s` or `y` at `i` (its delimiter is the byte at `i`).
fn skip_parts(b: &[u8], i: usize, parts: usize) -> Option<usize> {
    let delimiter = *b.get(i)?;
    skip_delimited(b, i + 1, delimiter, parts)
}

/// Past `parts` parts from `i`, each ended by `delimiter`, backslash escapes skipped; `None`
/// when the script ends first.
fn skip_delimited(b: &[u8], mut i: usize, delimiter: u8, mut parts: usize) -> Option<usize> {
    while parts > 0 {
        match *b.get(i)? {
            b'\\' => i += 2,
            c if c == delimiter => {
                parts -= 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    Some(i)
}

fn line_end(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|c| *c == b'\n')
        .map_or(b.len(), |p| i + p)
}

#[cfg(test)]
mod tests {
    use super::runs_commands;

    #[test]
    fn e_commands_and_flags_run_commands() {
        for script in [
            "e touch /tmp/p",
            "1e touch /tmp/p",
            "s/x/touch p/e",
            "s|x|y|ge",
            "p;e x",
            "/re/e x",
            "\\%re%e x",
            "/a/,/b/{s/x/y/;e x\n}",
            "s/x",
            "k",
            "y/ab/",
        ] {
            assert!(runs_commands(script), "{script:?}");
        }
        for script in [
            "1,5p",
            "s/a/b/g",
            "s/version/ver/",
            "/^$/d",
            "s/x/y/w out.txt",
            "y/abc/xyz/",
            "$!N;P;D",
            "/start/,/end/{s/e/E/g}",
            "s/\\/e/x/",
            "a extra text with e",
            "# a comment: e",
            ":loop\nb loop",
            "0~2d",
            "/re/I p",
            "",
        ] {
            assert!(!runs_commands(script), "{script:?}");
        }
    }
}
