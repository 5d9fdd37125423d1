//! Large tool outputs are written to a file under `.cadre/` and the model gets a pointer
//! with a preview, so nothing is silently truncated and the context stays small. Every
//! output gets a file of its own: call ids repeat, and two ids can sanitise to one name.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Default size above which an output is offloaded.
pub const DEFAULT_OFFLOAD_THRESHOLD: usize = 10_000;
const PREVIEW_HEAD: usize = 2_000;
const PREVIEW_TAIL: usize = 500;
/// The most of the call id kept, readable, in a file name.
const NAME_ID_CHARS: usize = 40;
/// How many taken names to step over before giving up (a resumed session's earlier files).
const MAX_NAME_ATTEMPTS: u32 = 100_000;

/// Stores oversized outputs under a directory.
#[derive(Debug, Clone)]
pub struct Offloader {
    dir: PathBuf,
    display_root: PathBuf,
    threshold: usize,
    /// The next sequence number of a file name, shared by clones.
    seq: Arc<AtomicU64>,
}

impl Offloader {
    /// Offload into `<workspace>/.cadre/tool-outputs/`, outputs above `threshold` bytes.
    pub fn new(workspace_root: &Path, threshold: usize) -> Self {
        Self {
            dir: workspace_root.join(".cadre").join("tool-outputs"),
            display_root: workspace_root.to_path_buf(),
            threshold,
            seq: Arc::new(AtomicU64::new(1)),
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
        let stored =
            std::fs::create_dir_all(&dir).and_then(|_| self.store(&dir, call_id, &content));
        let path = match stored {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, dir = %dir.display(), "could not offload tool output");
                return content;
            }
        };
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

impl Offloader {
    /// Write `content` to a new file under `dir`, `<seq>-<id>-<hash>.txt`: a sequence number
    /// from a counter the offloader's clones share, the call id made safe (and cut short)
    /// for reading, and a hash of the exact id. The file is created exclusively, so nothing
    /// is overwritten — not even the files an earlier process left for a resumed session.
    fn store(&self, dir: &Path, call_id: &str, content: &str) -> std::io::Result<PathBuf> {
        let readable: String = sanitize(call_id).chars().take(NAME_ID_CHARS).collect();
        let mut h = DefaultHasher::new();
        call_id.hash(&mut h);
        let tag = format!("{readable}-{:08x}", h.finish() as u32);
        for _ in 0..MAX_NAME_ATTEMPTS {
            let seq = self.seq.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!("{seq:04}-{tag}.txt"));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    f.write_all(content.as_bytes())?;
                    return Ok(path);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other("no free file name for the output"))
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
        let rel = pointed_to(&shown);
        assert!(
            rel.starts_with(".cadre/tool-outputs/s-1/0001-call_1-"),
            "{shown}"
        );
        assert!(shown.contains("50000 bytes"));
        let stored = std::fs::read_to_string(dir.path().join(rel)).unwrap();
        assert_eq!(stored, big);
        assert_eq!(off.apply("s-1", "c2", "bash", "small".into()), "small");
    }

    /// The file a pointer text names.
    fn pointed_to(shown: &str) -> &str {
        let rest = shown.split_once("saved in ").unwrap().1;
        rest.split_once(". Read").unwrap().0
    }

    #[test]
    fn outputs_never_overwrite_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let off = Offloader::new(dir.path(), 10);
        // Ids that sanitise alike, and an id repeated (also by a clone, and by a new
        // offloader for the same session, as after a restart).
        let restarted = Offloader::new(dir.path(), 10);
        let calls = [
            (&off, "x/y"),
            (&off, "x_y"),
            (&off, "dup"),
            (&off.clone(), "dup"),
            (&restarted, "dup"),
            (&restarted, "x/y"),
        ];
        let mut files = std::collections::HashSet::new();
        for (i, (o, id)) in calls.iter().enumerate() {
            let content = format!("output number {i} of {id}");
            let shown = o.apply("s-1", id, "bash", content.clone());
            let rel = pointed_to(&shown).to_string();
            assert!(files.insert(rel.clone()), "{rel} reused");
            assert_eq!(
                std::fs::read_to_string(dir.path().join(&rel)).unwrap(),
                content
            );
        }
        for rel in &files {
            let text = std::fs::read_to_string(dir.path().join(rel)).unwrap();
            assert!(text.starts_with("output number"), "{rel}: {text}");
        }
        let count = std::fs::read_dir(dir.path().join(".cadre/tool-outputs/s-1"))
            .unwrap()
            .count();
        assert_eq!(count, calls.len());
    }

    #[test]
    fn previews_cut_on_char_boundaries() {
        let s = "é".repeat(3000);
        assert!(prefix_at_char(&s, 2001).len() <= 2001);
        assert!(suffix_at_char(&s, 501).chars().all(|c| c == 'é'));
    }
}
