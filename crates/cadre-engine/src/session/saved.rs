//! The saved sessions of a directory: which are offered for resuming, and removing one
//! nothing was sent in.

use super::{Session, check_id};
use std::path::Path;

impl Session {
    /// Remove the transcript of a session nothing was sent in (it holds only its facts), so
    /// an opened-and-left session is not offered for resuming. True when it was removed.
    pub fn discard_if_empty(&self) -> bool {
        self.messages.is_empty() && self.path().is_some_and(|p| std::fs::remove_file(p).is_ok())
    }

    /// The saved top-level sessions (`s-…`) under `dir`, most recently changed first, as
    /// (id, last change). Sub-agent sessions are left out. An unreadable directory has none.
    pub fn list_saved(dir: &Path) -> Vec<(String, std::time::SystemTime)> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut out: Vec<(String, std::time::SystemTime)> = entries
            .filter_map(std::result::Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let id = name.strip_suffix(".jsonl")?;
                if !id.starts_with("s-") || check_id(id).is_err() {
                    return None;
                }
                let modified = e.metadata().and_then(|m| m.modified()).ok()?;
                Some((id.to_string(), modified))
            })
            .collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }
}
