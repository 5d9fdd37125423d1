//! The input history file (`.cadre/history`): one entry per line, newlines and backslashes
//! escaped, newest last. Bounded when read; rewritten to its last entries when it grew long.

use crate::model::input::MAX_HISTORY;
use std::io::Write;
use std::path::Path;

/// Largest history file read.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

fn escape(entry: &str) -> String {
    entry.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The entries of `path`, oldest first (none when it is missing or unreadable).
pub fn load(path: &Path) -> Vec<String> {
    let Ok(text) = cadre_tools::read_to_string_capped(path, MAX_FILE_BYTES) else {
        return Vec::new();
    };
    let all: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(unescape)
        .collect();
    let keep = all.len().saturating_sub(MAX_HISTORY);
    let entries = all[keep..].to_vec();
    if keep > MAX_HISTORY {
        // The file holds twice what is used: write back the part that is.
        let body: String = entries.iter().map(|e| escape(e) + "\n").collect();
        if let Err(e) = std::fs::write(path, body) {
            tracing::warn!(path = %path.display(), error = %e, "cannot shorten the history file");
        }
    }
    entries
}

/// Append one entry.
pub fn append(path: &Path, entry: &str) {
    let result = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        })
        .and_then(|mut f| writeln!(f, "{}", escape(entry)));
    if let Err(e) = result {
        tracing::warn!(path = %path.display(), error = %e, "cannot write the history file");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_with_newlines_and_the_file_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".cadre/history");
        append(&path, "one");
        append(&path, "two\nlines \\n literal");
        assert_eq!(load(&path), ["one", "two\nlines \\n literal"]);
        for i in 0..(3 * MAX_HISTORY) {
            append(&path, &i.to_string());
        }
        let entries = load(&path);
        assert_eq!(entries.len(), MAX_HISTORY);
        assert_eq!(entries.last().map(String::as_str), Some("2999"));
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert_eq!(lines, MAX_HISTORY, "the file was shortened");
    }
}
