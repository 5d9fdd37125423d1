//! The saved sessions of a directory: which are offered for resuming, what titles them,
//! and removing one nothing was sent in.

use super::{Record, Session, check_id};
use cadre_types::Message;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// How a compaction's summary message starts; it stands for prompts, it is not one.
const SUMMARY_TAG: &str = "<conversation-summary>";

impl Session {
    /// Remove the transcript of a session nothing was sent in (it holds only its facts), so
    /// an opened-and-left session is not offered for resuming. True when it was removed.
    pub fn discard_if_empty(&self) -> bool {
        self.messages.is_empty() && self.path().is_some_and(|p| std::fs::remove_file(p).is_ok())
    }

    /// Leave this session for `next`: its transcript is removed when nothing was sent in it,
    /// unless `next` is this very session reopened (removing it then would lose what the
    /// reopened one writes). True when it was removed.
    pub fn leave_for(&self, next: &Session) -> bool {
        self.id() != next.id() && self.discard_if_empty()
    }

    /// The first prompt of the session saved as `id` under `dir`, to title it by. Read from
    /// the transcript, which keeps the messages a compaction replaced: a compacted session is
    /// still titled by what the person first asked, not by the summary. `None` when it has
    /// no prompt or cannot be read.
    pub fn first_prompt(dir: &Path, id: &str) -> Option<String> {
        let path = Self::existing_path(dir, id).ok()?;
        let reader = BufReader::new(File::open(path).ok()?);
        reader
            .lines()
            .map_while(Result::ok)
            .find_map(|line| match serde_json::from_str::<Record>(&line).ok()? {
                Record::Message {
                    message: Message::User { content },
                } if !content.trim_start().starts_with(SUMMARY_TAG) => Some(content),
                _ => None,
            })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{CompactionRecord, SessionMeta};

    #[test]
    fn leaving_an_empty_session_for_itself_keeps_its_transcript() {
        let dir = tempfile::tempdir().unwrap();
        let meta = |id: &str| SessionMeta {
            id: id.into(),
            agent: "main".into(),
            model: "scripted:x".into(),
            created_at: 1,
            parent_session_id: None,
        };
        let mut empty = Session::create(dir.path(), meta("s-empty")).unwrap();
        empty.flush().unwrap();
        let path = empty.path().unwrap().to_path_buf();
        let again = Session::open(dir.path(), "s-empty").unwrap();
        assert!(!empty.leave_for(&again));
        assert!(path.exists(), "the reopened session's transcript is kept");
        let other = Session::create(dir.path(), meta("s-other")).unwrap();
        assert!(empty.leave_for(&other));
        assert!(
            !path.exists(),
            "an empty session left for another is removed"
        );
    }

    #[test]
    fn a_compacted_session_is_titled_by_its_first_prompt_not_the_summary() {
        let dir = tempfile::tempdir().unwrap();
        let meta = SessionMeta {
            id: "s-compacted".into(),
            agent: "main".into(),
            model: "scripted:x".into(),
            created_at: 1,
            parent_session_id: None,
        };
        let mut s = Session::create(dir.path(), meta).unwrap();
        assert_eq!(Session::first_prompt(dir.path(), "s-compacted"), None);
        s.push(Message::user("map the inventory module")).unwrap();
        s.push(Message::assistant("it has two files")).unwrap();
        s.compact(CompactionRecord {
            replaced: 2,
            summary: Message::user(format!("{SUMMARY_TAG}\nThe user asked for a map.")),
            tokens_before: 10,
            tokens_after: 5,
            model: "scripted:x".into(),
        })
        .unwrap();
        s.push(Message::user("now the report")).unwrap();
        s.flush().unwrap();
        assert!(s.messages()[0].text().starts_with(SUMMARY_TAG));
        assert_eq!(
            Session::first_prompt(dir.path(), "s-compacted").as_deref(),
            Some("map the inventory module")
        );
        // Hostile ids are refused, not read.
        assert_eq!(Session::first_prompt(dir.path(), "../s-compacted"), None);
    }
}
