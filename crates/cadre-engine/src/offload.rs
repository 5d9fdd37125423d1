//! Large tool outputs are written to a file under `.cadre/` and the model gets a pointer
//! with a preview, so nothing is silently truncated and the context stays small.

use std::path::{Path, PathBuf};

/// Default size above which an output is offloaded.
pub const DEFAULT_OFFLOAD_THRESHOLD: usize = 10_000;
const PREVIEW_HEAD: usize = 2_000;
const PREVIEW_TAIL: usize = 500;

/// Stores oversized outputs under a directory.
#[derive(Debug, Clone)]
pub struct Offloader {
    dir: PathBuf,
    display_root: PathBuf,
    threshold: usize,
}

impl Offloader {
    /// Offload into `<workspace>/.cadre/tool-outputs/`, outputs above `threshold` bytes.
    pub fn new(workspace_root: &Path, threshold: usize) -> Self {
        Self {
            dir: workspace_root.join(".cadre").join("tool-outputs"),
            display_root: workspace_root.to_path_buf(),
            threshold,
        }
    }

    /// The size threshold in bytes.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// Return `content` unchanged when small; else store it and return the pointer text.
    /// If the file cannot be written, the full content is returned (never truncated).
    pub fn apply(&self, session_id: &str, call_id: &str, tool: &str, content: String) -> String {
        if content.len() <= self.threshold {
            return content;
        }
        let dir = self.dir.join(sanitize(session_id));
        let path = dir.join(format!("{}.txt", sanitize(call_id)));
        let written = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, &content));
        if let Err(e) = written {
            tracing::warn!(error = %e, path = %path.display(), "could not offload tool output");
            return content;
        }
        let shown = path
            .strip_prefix(&self.display_root)
            .unwrap_or(&path)
            .display()
            .to_string();
        let head = prefix_at_char(&content, PREVIEW_HEAD);
        let tail = suffix_at_char(&content, PREVIEW_TAIL);
        let lines = content.lines().count();
        format!(
            "[{tool} output was {} bytes ({lines} lines); the full output is saved in {shown}. \
             Read it with read_file (offset/limit) or search it with grep.]\n\
             --- first {} bytes ---\n{head}\n--- last {} bytes ---\n{tail}",
            content.len(),
            head.len(),
            tail.len()
        )
    }
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn prefix_at_char(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn suffix_at_char(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_output_is_stored_whole_and_pointed_to() {
        let dir = tempfile::tempdir().unwrap();
        let off = Offloader::new(dir.path(), DEFAULT_OFFLOAD_THRESHOLD);
        let big: String = (0..50_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let shown = off.apply("s-1", "call/1", "bash", big.clone());
        assert!(shown.len() < 4_000);
        assert!(
            shown.contains(".cadre/tool-outputs/s-1/call_1.txt"),
            "{shown}"
        );
        assert!(shown.contains("50000 bytes"));
        let stored =
            std::fs::read_to_string(dir.path().join(".cadre/tool-outputs/s-1/call_1.txt")).unwrap();
        assert_eq!(stored, big);
        assert_eq!(off.apply("s-1", "c2", "bash", "small".into()), "small");
    }

    #[test]
    fn previews_cut_on_char_boundaries() {
        let s = "é".repeat(3000);
        assert!(prefix_at_char(&s, 2001).len() <= 2001);
        assert!(suffix_at_char(&s, 501).chars().all(|c| c == 'é'));
    }
}
