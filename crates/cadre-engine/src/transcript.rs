//! Session transcripts: the JSONL file of one session and the records buffered for it,
//! and every transcript the process holds open (so that an exit that runs no destructors
//! can still write what they buffered).

use crate::session::SessionError;
use serde::Serialize;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// Buffered records beyond this are written at once, whatever the turn.
const FLUSH_AT: usize = 64 * 1024;
/// A buffer that grew larger than this is given back after a flush.
const KEEP_CAPACITY: usize = 16 * 1024;

/// A session's JSONL file and the records not written to it yet.
#[derive(Debug)]
pub(crate) struct Transcript {
    path: PathBuf,
    file: File,
    pending: Vec<u8>,
    /// Its entry in [`OPEN`].
    key: u64,
}

/// Every transcript of the process, for [`flush_open_transcripts`].
static OPEN: LazyLock<Mutex<HashMap<u64, Weak<Mutex<Transcript>>>>> = LazyLock::new(Mutex::default);
static NEXT_KEY: AtomicU64 = AtomicU64::new(0);

impl Transcript {
    /// `file` at `path`, registered as open.
    pub(crate) fn register(path: PathBuf, file: File) -> Arc<Mutex<Transcript>> {
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let t = Arc::new(Mutex::new(Transcript {
            path,
            file,
            pending: Vec::new(),
            key,
        }));
        if let Ok(mut open) = OPEN.lock() {
            open.insert(key, Arc::downgrade(&t));
        }
        t
    }

    fn io(&self, source: std::io::Error) -> SessionError {
        SessionError::Io {
            path: self.path.clone(),
            source,
        }
    }

    pub(crate) fn flush(&mut self) -> Result<(), SessionError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let written = self.file.write_all(&self.pending);
        self.pending.clear();
        if self.pending.capacity() > KEEP_CAPACITY {
            self.pending = Vec::new();
        }
        written.map_err(|e| self.io(e))
    }
}

impl Drop for Transcript {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::warn!("{e}");
        }
        if let Ok(mut open) = OPEN.lock() {
            open.remove(&self.key);
        }
    }
}

/// Write what every open session of this process has buffered: for an exit that runs no
/// destructors (`std::process::exit`). Errors are logged.
pub fn flush_open_transcripts() {
    let open: Vec<_> = match OPEN.lock() {
        Ok(open) => open.values().filter_map(Weak::upgrade).collect(),
        Err(_) => return,
    };
    for t in open {
        if let Ok(mut t) = t.lock()
            && let Err(e) = t.flush()
        {
            tracing::warn!("{e}");
        }
    }
}

/// Buffer `record` in `file`'s transcript (none: a session in memory), and write what is
/// buffered when `now` or when the buffer is full.
pub(crate) fn write_record<R: Serialize>(
    file: &Option<(PathBuf, Arc<Mutex<Transcript>>)>,
    record: &R,
    now: bool,
) -> Result<(), SessionError> {
    let Some((path, transcript)) = file else {
        return Ok(());
    };
    let Ok(mut t) = transcript.lock() else {
        return Err(poisoned(path));
    };
    let start = t.pending.len();
    if let Err(e) = serde_json::to_writer(&mut t.pending, record) {
        t.pending.truncate(start);
        return Err(SessionError::Corrupt {
            path: path.clone(),
            line: 0,
            message: e.to_string(),
        });
    }
    t.pending.push(b'\n');
    if now || t.pending.len() >= FLUSH_AT {
        t.flush()?;
    }
    Ok(())
}

/// A transcript whose lock a panicking writer left behind.
pub(crate) fn poisoned(path: &Path) -> SessionError {
    SessionError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other("the transcript's writer panicked"),
    }
}
