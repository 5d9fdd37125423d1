//! Large results: a task's result above a size is kept whole in
//! `.cadre/results/<task id>.md`, and the parent model sees its head, its size and the
//! path, so nothing is cut without saying where the rest is.

use crate::tools::task::xml_escape;
use std::path::{Path, PathBuf};

/// Default size above which a result goes to a file (32 KiB).
pub const DEFAULT_MAX_RESULT_BYTES: usize = 32 * 1024;
/// How much of a stored result the parent sees in its tool result or delivery.
const HEAD_BYTES: usize = 4 * 1024;

/// A result as the parent model is shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownResult {
    /// The text shown (the whole result, or its head).
    pub text: String,
    /// Where the whole result is, and its size in bytes, when only the head is shown.
    pub file: Option<(PathBuf, usize)>,
}

impl ShownResult {
    /// The result's part of a task envelope: `<task_result>…</task_result>`, then, for a
    /// stored result, a `<result_file>` element that says where the rest is.
    pub fn envelope(&self) -> String {
        let mut s = format!("<task_result>{}</task_result>", xml_escape(&self.text));
        if let Some((path, bytes)) = &self.file {
            let path = xml_escape(&path.display().to_string());
            s.push_str(&format!(
                "<result_file path=\"{path}\" bytes=\"{bytes}\">The result is {bytes} bytes; \
                 the first {} are shown above. Read the whole result with read_file.</result_file>",
                self.text.len()
            ));
        }
        s
    }
}

/// The result of task `task_id` as the parent sees it: whole up to `max_bytes`, else
/// written to `<dir>/<task_id>.md` (once) and shown by its head (4 KiB, or `max_bytes`
/// when that is smaller). If the file cannot be
/// written, the whole result is shown: never lose it.
pub fn shown_result(result: &str, task_id: &str, dir: &Path, max_bytes: usize) -> ShownResult {
    let whole = || ShownResult {
        text: result.to_string(),
        file: None,
    };
    let safe_id = !task_id.is_empty()
        && task_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if result.len() <= max_bytes || !safe_id {
        return whole();
    }
    let path = dir.join(format!("{task_id}.md"));
    let stored = std::fs::metadata(&path).is_ok_and(|m| m.len() == result.len() as u64);
    if !stored {
        let written = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, result));
        if let Err(e) = written {
            tracing::warn!(task = task_id, path = %path.display(), error = %e, "cannot store a large result; passing it whole");
            return whole();
        }
    }
    // The head never exceeds the limit itself: with a limit below HEAD_BYTES the parent
    // would otherwise get the whole result and a file besides.
    let mut end = HEAD_BYTES.min(max_bytes).min(result.len());
    while !result.is_char_boundary(end) {
        end -= 1;
    }
    ShownResult {
        text: result[..end].to_string(),
        file: Some((path, result.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_results_pass_whole_and_large_ones_are_stored_and_referenced() {
        let dir = tempfile::tempdir().unwrap();
        let small = shown_result("short", "task_1", dir.path(), 100);
        assert_eq!(small.text, "short");
        assert!(small.file.is_none());
        let big = "ü".repeat(60_000);
        let shown = shown_result(&big, "task_2", dir.path(), DEFAULT_MAX_RESULT_BYTES);
        let (path, bytes) = shown.file.clone().unwrap();
        assert_eq!(bytes, big.len());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), big);
        assert!(shown.text.len() <= HEAD_BYTES && big.starts_with(&shown.text));
        let env = shown.envelope();
        assert!(env.contains(&format!("bytes=\"{}\"", big.len())), "{env}");
        assert!(env.contains("task_2.md"));
        // Shown again (task_output after the delivery): the same file, not rewritten.
        assert_eq!(
            shown_result(&big, "task_2", dir.path(), DEFAULT_MAX_RESULT_BYTES),
            shown
        );
    }

    #[test]
    fn the_head_of_a_stored_result_is_never_above_a_small_limit() {
        let dir = tempfile::tempdir().unwrap();
        let big = "é".repeat(300);
        let shown = shown_result(&big, "task_4", dir.path(), 201);
        assert!(shown.file.is_some());
        assert!(shown.text.len() <= 201, "{}", shown.text.len());
        assert_eq!(shown.text.len(), 200, "cut on a char boundary");
        assert!(big.starts_with(&shown.text));
    }

    #[test]
    fn a_result_that_cannot_be_stored_is_passed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "x").unwrap();
        let big = "a".repeat(100);
        let shown = shown_result(&big, "task_3", &blocker.join("sub"), 10);
        assert_eq!(shown.text, big);
        assert!(shown.file.is_none());
    }
}
