//! Sessions: the conversation of one agent, kept in memory and, when a directory is given,
//! appended as JSONL to `<dir>/<session_id>.jsonl` (one record per line) so it can be resumed.
//!
//! Records are buffered and written by [`Session::flush`], which the run loop calls before
//! every model request, once a reply is recorded (before any of its tool calls starts, and
//! before a finished run waits for background work) and when a run ends; dropping a session
//! flushes it too, and [`flush_open_transcripts`] flushes every session of the process (for
//! an exit that runs no destructors). A tool call's start is written at once, by the
//! session's [`CallJournal`]: after a crash, a call with a start and no result may have
//! acted, and one without a start never ran.

pub use crate::transcript::flush_open_transcripts;
mod saved;
use crate::transcript::{Transcript, poisoned, write_record};
use cadre_types::Message;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Why a session could not be created, read or written.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// File-system error.
    #[error("session file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line of the transcript is not a valid record.
    #[error("session file {path}, line {line}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The id is not a valid session id.
    #[error("invalid session id {0:?}")]
    BadId(String),
    /// No such session.
    #[error("no session {id} in {dir}")]
    NotFound {
        /// The id.
        id: String,
        /// Where it was looked for.
        dir: PathBuf,
    },
}

/// Facts about a session, written as the first record of its transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// The session id.
    pub id: String,
    /// The agent that owns it (`main` or a sub-agent name).
    pub agent: String,
    /// The model spec it started with.
    pub model: String,
    /// Creation time, Unix milliseconds.
    pub created_at: u64,
    /// The delegating parent's session, for sub-agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
}

/// A compaction as the transcript records it: the first `replaced` messages of the
/// conversation (as it stood) were replaced by `summary`. The replaced messages stay in the
/// file above this record, for audit; a reopened session continues from the compacted state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// How many leading messages the summary replaced.
    pub replaced: usize,
    /// The message that stands for them.
    pub summary: Message,
    /// Estimated tokens of the request before.
    pub tokens_before: u64,
    /// Estimated tokens of the request after.
    pub tokens_after: u64,
    /// The model that wrote the summary.
    pub model: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    Meta(SessionMeta),
    Message {
        message: Message,
    },
    /// A tool approved for the rest of the session; honoured on reopening only with a
    /// seal under the workspace's key (see `grant_seal`).
    Approval {
        tool: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seal: Option<String>,
    },
    Compaction(CompactionRecord),
    /// A tool call of the reply above started running (its result, when it has one, is a
    /// later message record).
    CallStarted {
        call_id: String,
    },
}

/// One conversation.
#[derive(Debug)]
pub struct Session {
    meta: SessionMeta,
    messages: Vec<Message>,
    approved: Arc<Mutex<HashSet<String>>>,
    /// Approvals already written to the transcript.
    persisted_approvals: HashSet<String>,
    file: Option<(PathBuf, Arc<Mutex<Transcript>>)>,
    /// Reopened from its transcript, and no run has continued it yet in this process.
    reopened: bool,
    /// Compactions applied to the conversation (those replayed on reopening included).
    compactions: u64,
    /// The tool calls recorded as started (those of the transcript included).
    started: Arc<Mutex<HashSet<String>>>,
}

/// Records that a tool call starts, before it runs: written to the transcript at once, not
/// at the next turn boundary, so that a crash while the call runs leaves its start on disk.
/// Shared by the calls of a turn, which start concurrently.
#[derive(Debug, Clone)]
pub(crate) struct CallJournal {
    file: Option<(PathBuf, Arc<Mutex<Transcript>>)>,
    started: Arc<Mutex<HashSet<String>>>,
}

impl CallJournal {
    /// Record that the call `call_id` starts now (durable when this returns).
    pub(crate) fn started(&self, call_id: &str) -> Result<(), SessionError> {
        if let Ok(mut s) = self.started.lock() {
            s.insert(call_id.to_string());
        }
        let record = Record::CallStarted {
            call_id: call_id.to_string(),
        };
        write_record(&self.file, &record, true)
    }
}

fn check_id(id: &str) -> Result<(), SessionError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(SessionError::BadId(id.to_string()))
    }
}

impl Session {
    /// A session kept in memory only.
    pub fn in_memory(meta: SessionMeta) -> Self {
        Self {
            meta,
            messages: Vec::new(),
            approved: Arc::default(),
            persisted_approvals: HashSet::new(),
            file: None,
            reopened: false,
            compactions: 0,
            started: Arc::default(),
        }
    }

    /// A new session persisted under `dir` (created if needed).
    pub fn create(dir: &Path, meta: SessionMeta) -> Result<Self, SessionError> {
        check_id(&meta.id)?;
        let path = dir.join(format!("{}.jsonl", meta.id));
        let io = |source| SessionError::Io {
            path: path.clone(),
            source,
        };
        let open = || OpenOptions::new().create_new(true).append(true).open(&path);
        // The directory usually exists: made only when the file cannot be created without.
        let file = match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir).map_err(io)?;
                open()
            }
            other => other,
        }
        .map_err(io)?;
        let transcript = Transcript::register(path.clone(), file);
        let mut s = Self {
            meta: meta.clone(),
            messages: Vec::new(),
            approved: Arc::default(),
            persisted_approvals: HashSet::new(),
            file: Some((path, transcript)),
            reopened: false,
            compactions: 0,
            started: Arc::default(),
        };
        s.write(&Record::Meta(meta))?;
        Ok(s)
    }

    /// The transcript of session `id` under `dir`, which must exist.
    fn existing_path(dir: &Path, id: &str) -> Result<PathBuf, SessionError> {
        check_id(id)?;
        let path = dir.join(format!("{id}.jsonl"));
        if !path.exists() {
            return Err(SessionError::NotFound {
                id: id.to_string(),
                dir: dir.to_path_buf(),
            });
        }
        Ok(path)
    }

    /// The facts of a persisted session (its first record), without reading its messages.
    pub fn read_meta(dir: &Path, id: &str) -> Result<SessionMeta, SessionError> {
        let path = Self::existing_path(dir, id)?;
        let io = |source| SessionError::Io {
            path: path.clone(),
            source,
        };
        let reader = BufReader::new(File::open(&path).map_err(io)?);
        let corrupt = |line: usize, message: String| SessionError::Corrupt {
            path: path.clone(),
            line,
            message,
        };
        for (i, line) in reader.lines().enumerate() {
            let line = line.map_err(io)?;
            if line.trim().is_empty() {
                continue;
            }
            return match serde_json::from_str::<Record>(&line) {
                Ok(Record::Meta(m)) => Ok(m),
                Ok(_) => Err(corrupt(i + 1, "missing meta record".into())),
                Err(e) => Err(corrupt(i + 1, e.to_string())),
            };
        }
        Err(corrupt(1, "missing meta record".into()))
    }

    /// Reopen a persisted session to continue it: its history comes back exactly.
    pub fn open(dir: &Path, id: &str) -> Result<Self, SessionError> {
        let path = Self::existing_path(dir, id)?;
        let io = |source| SessionError::Io {
            path: path.clone(),
            source,
        };
        let reader = BufReader::new(File::open(&path).map_err(io)?);
        let mut meta = None;
        let mut messages = Vec::new();
        let mut grants = Vec::new();
        let mut compactions = 0;
        let mut started = HashSet::new();
        for (i, line) in reader.lines().enumerate() {
            let line = line.map_err(io)?;
            if line.trim().is_empty() {
                continue;
            }
            let corrupt = |message: String| SessionError::Corrupt {
                path: path.clone(),
                line: i + 1,
                message,
            };
            match serde_json::from_str::<Record>(&line).map_err(|e| corrupt(e.to_string()))? {
                Record::Meta(m) => meta = Some(m),
                Record::Message { message } => messages.push(message),
                Record::Approval { tool, seal } => grants.push((tool, seal)),
                Record::Compaction(c) => {
                    if c.replaced > messages.len() {
                        return Err(corrupt(format!(
                            "a compaction replaces {} messages of {}",
                            c.replaced,
                            messages.len()
                        )));
                    }
                    messages.splice(..c.replaced, [c.summary]);
                    compactions += 1;
                }
                Record::CallStarted { call_id } => {
                    started.insert(call_id);
                }
            }
        }
        let meta = meta.ok_or_else(|| SessionError::Corrupt {
            path: path.clone(),
            line: 1,
            message: "missing meta record".into(),
        })?;
        let approved = crate::grant_seal::honoured(dir, &meta.id, grants);
        let file = OpenOptions::new().append(true).open(&path).map_err(io)?;
        let transcript = Transcript::register(path.clone(), file);
        Ok(Self {
            reopened: !messages.is_empty(),
            meta,
            messages,
            persisted_approvals: approved.clone(),
            approved: Arc::new(Mutex::new(approved)),
            file: Some((path, transcript)),
            compactions,
            started: Arc::new(Mutex::new(started)),
        })
    }

    /// True once, for the first run of a session reopened with a history: that run restates
    /// the state earlier calls left (the plan), which later runs in the same process do not.
    pub fn take_reopened(&mut self) -> bool {
        std::mem::take(&mut self.reopened)
    }

    /// Buffer `record` (written by the next [`flush`](Self::flush), or now when the buffer
    /// is full).
    fn write(&mut self, record: &Record) -> Result<(), SessionError> {
        write_record(&self.file, record, false)
    }

    /// The journal the tool calls of this session's runs record their starts in.
    pub(crate) fn journal(&self) -> CallJournal {
        CallJournal {
            file: self.file.clone(),
            started: self.started.clone(),
        }
    }

    /// True when the tool call `call_id` was recorded as started (in this process or in the
    /// transcript it was reopened from).
    pub fn call_started(&self, call_id: &str) -> bool {
        self.started
            .lock()
            .map(|s| s.contains(call_id))
            .unwrap_or(true)
    }

    /// Write the buffered records to the transcript (nothing to do in memory).
    pub fn flush(&mut self) -> Result<(), SessionError> {
        match &self.file {
            Some((path, transcript)) => match transcript.lock() {
                Ok(mut t) => t.flush(),
                Err(_) => Err(poisoned(path)),
            },
            None => Ok(()),
        }
    }

    /// Append a message (and persist it).
    pub fn push(&mut self, message: Message) -> Result<(), SessionError> {
        self.write(&Record::Message {
            message: message.clone(),
        })?;
        self.messages.push(message);
        Ok(())
    }

    /// Replace the first `record.replaced` messages by `record.summary`, recording the
    /// compaction in the transcript (the replaced messages stay in the file above it).
    pub fn compact(&mut self, record: CompactionRecord) -> Result<(), SessionError> {
        if record.replaced > self.messages.len() {
            return Err(SessionError::Corrupt {
                path: self.path().map(Path::to_path_buf).unwrap_or_default(),
                line: 0,
                message: format!(
                    "a compaction cannot replace {} messages of {}",
                    record.replaced,
                    self.messages.len()
                ),
            });
        }
        let (replaced, summary) = (record.replaced, record.summary.clone());
        self.write(&Record::Compaction(record))?;
        self.messages.splice(..replaced, [summary]);
        self.compactions += 1;
        Ok(())
    }

    /// Remember that a human approved `tool` for the rest of this session.
    pub fn approve_tool(&mut self, tool: &str) -> Result<(), SessionError> {
        if let Ok(mut a) = self.approved.lock() {
            a.insert(tool.to_string());
        }
        let dir = (self.file.as_ref()).and_then(|(p, _)| p.parent().map(Path::to_path_buf));
        if let Some(dir) = dir
            && self.persisted_approvals.insert(tool.to_string())
        {
            let seal = crate::grant_seal::seal_grant(&dir, &self.meta.id, tool);
            self.write(&Record::Approval {
                tool: tool.to_string(),
                seal,
            })?;
        }
        Ok(())
    }

    /// The tools approved for this session (shared view, read during a turn).
    pub fn approved_tools(&self) -> Arc<Mutex<HashSet<String>>> {
        self.approved.clone()
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// The session's facts.
    pub fn meta(&self) -> &SessionMeta {
        &self.meta
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// How many compactions the conversation has had: a change means its head was
    /// replaced, so it no longer extends an earlier copy.
    pub fn compactions(&self) -> u64 {
        self.compactions
    }

    /// The transcript file, when persisted.
    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|(p, _)| p.as_path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_types::ToolCall;

    #[test]
    fn saved_sessions_are_listed_newest_first_without_sub_agent_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let old = Session::create(dir.path(), meta("s-old")).unwrap();
        let _child = Session::create(dir.path(), meta("sub-x")).unwrap();
        let new = Session::create(dir.path(), meta("s-new")).unwrap();
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .append(true)
            .open(old.path().unwrap())
            .unwrap()
            .set_modified(past)
            .unwrap();
        drop(new);
        let ids: Vec<String> = Session::list_saved(dir.path())
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ids, ["s-new", "s-old"]);
        assert!(Session::list_saved(&dir.path().join("missing")).is_empty());
    }

    fn meta(id: &str) -> SessionMeta {
        SessionMeta {
            id: id.into(),
            agent: "main".into(),
            model: "scripted:x".into(),
            created_at: 1,
            parent_session_id: None,
        }
    }

    #[test]
    fn persisted_session_resumes_with_identical_history() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Session::create(dir.path(), meta("s-abc")).unwrap();
        let history = vec![
            Message::user("hello \"world\"\nline two"),
            Message::Assistant {
                content: "calling".into(),
                thinking: Some("think".into()),
                thinking_signature: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"ls\"}".into(),
                }],
            },
            Message::Tool {
                tool_call_id: "c1".into(),
                name: "bash".into(),
                content: "a\nb".into(),
                is_error: false,
                images: Vec::new(),
            },
            Message::assistant("done ✓"),
        ];
        for m in &history {
            s.push(m.clone()).unwrap();
        }
        s.approve_tool("bash").unwrap();
        drop(s);
        assert_eq!(
            Session::read_meta(dir.path(), "s-abc").unwrap(),
            meta("s-abc")
        );
        let mut back = Session::open(dir.path(), "s-abc").unwrap();
        assert_eq!(back.messages(), history.as_slice());
        assert_eq!(back.meta(), &meta("s-abc"));
        assert!(back.approved_tools().lock().unwrap().contains("bash"));
        assert!(back.take_reopened(), "the first run restates");
        assert!(!back.take_reopened(), "later runs do not");
        back.push(Message::user("more")).unwrap();
        // Written at the next turn boundary (a flush).
        back.flush().unwrap();
        let again = Session::open(dir.path(), "s-abc").unwrap();
        assert_eq!(again.messages().len(), 5);
    }

    #[test]
    fn a_reopened_compacted_session_continues_from_the_summary() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Session::create(dir.path(), meta("s-c")).unwrap();
        for m in ["one", "two", "three", "four"] {
            s.push(Message::user(m)).unwrap();
        }
        s.compact(CompactionRecord {
            replaced: 3,
            summary: Message::user("summary of one to three"),
            tokens_before: 40,
            tokens_after: 10,
            model: "scripted:x".into(),
        })
        .unwrap();
        s.push(Message::user("five")).unwrap();
        let expected = vec![
            Message::user("summary of one to three"),
            Message::user("four"),
            Message::user("five"),
        ];
        assert_eq!(s.messages(), expected.as_slice());
        drop(s);
        let back = Session::open(dir.path(), "s-c").unwrap();
        assert_eq!(back.messages(), expected.as_slice());
        // The original turns stay in the file for audit.
        let text = std::fs::read_to_string(back.path().unwrap()).unwrap();
        assert!(text.contains("\"two\"") && text.contains("\"kind\":\"compaction\""));
    }

    #[test]
    fn records_reach_the_file_at_a_flush_an_exit_flush_or_a_drop() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Session::create(dir.path(), meta("s-f")).unwrap();
        s.push(Message::user("one")).unwrap();
        let path = s.path().unwrap().to_path_buf();
        let lines = || std::fs::read_to_string(&path).unwrap().lines().count();
        assert_eq!(lines(), 0, "buffered until a turn boundary");
        s.flush().unwrap();
        assert_eq!(lines(), 2);
        s.push(Message::user("two")).unwrap();
        flush_open_transcripts();
        assert_eq!(lines(), 3, "an exit that runs no destructors writes it too");
        s.push(Message::user("three")).unwrap();
        drop(s);
        assert_eq!(lines(), 4);
        let back = Session::open(dir.path(), "s-f").unwrap();
        assert_eq!(back.messages().len(), 3);
    }

    #[test]
    fn bad_ids_and_missing_sessions_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            Session::open(dir.path(), "../etc/passwd"),
            Err(SessionError::BadId(_))
        ));
        assert!(matches!(
            Session::open(dir.path(), "s-none"),
            Err(SessionError::NotFound { .. })
        ));
    }
}
