//! The local spool of task ends the store could not take. When the store stays down past
//! the write-retry window, a task's end is kept in `.cadre/spool/` (one file per task,
//! written atomically) and in memory, so this process still reads the task as it ended;
//! the spool is written to the store as soon as the store answers again, and at the next
//! start (before restart recovery, which would otherwise fail the task as left by a dead
//! process). A spooled end is never relabelled: the store takes it as it was, or keeps an
//! end it already had.

use cadre_store::{StoreError, TaskRecord, TaskStore, Transition};
use cadre_types::{TaskStatus, Usage, unix_millis};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The most ends kept at once (a store down for long with a wide fan-out).
pub const MAX_SPOOLED: usize = 1_000;
/// The most result text one spooled end keeps (cut at a character boundary beyond, with a
/// note); with [`MAX_SPOOLED`] this bounds the spool.
pub const MAX_SPOOLED_RESULT: usize = 1 << 20;
/// How often a spool with ends in it is offered to the store.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// What a spool file's name ends with; a file that cannot be read is renamed with
/// [`UNREADABLE`] after it, kept for a person and never retried.
const SUFFIX: &str = ".json";
const UNREADABLE: &str = ".unreadable";

/// One end as kept on disk: the transition the store could not take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SpooledEnd {
    task_id: String,
    status: TaskStatus,
    result: Option<String>,
    error: Option<String>,
    end_state: Option<String>,
    usage: Option<Usage>,
    // Absent from ends spooled before turns were recorded.
    #[serde(default)]
    turns: Option<u64>,
    epoch: Option<u64>,
}

impl SpooledEnd {
    fn new(task_id: &str, t: &Transition) -> Self {
        SpooledEnd {
            task_id: task_id.to_string(),
            status: t.to,
            result: t.result.clone().map(cut_result),
            error: t.error.clone(),
            end_state: t.end_state.clone(),
            usage: t.usage,
            turns: t.turns,
            epoch: t.epoch,
        }
    }

    fn transition(&self) -> Transition {
        Transition {
            to: self.status,
            result: self.result.clone(),
            error: self.error.clone(),
            end_state: self.end_state.clone(),
            usage: self.usage,
            turns: self.turns,
            epoch: self.epoch,
            // A spooled end is not taken with its write: a waiter reads it from the spool.
            deliver: false,
        }
    }
}

/// `result`, cut to [`MAX_SPOOLED_RESULT`] bytes with a note when longer.
fn cut_result(mut result: String) -> String {
    if result.len() > MAX_SPOOLED_RESULT {
        let mut at = MAX_SPOOLED_RESULT;
        while !result.is_char_boundary(at) {
            at -= 1;
        }
        let total = result.len();
        result.truncate(at);
        result.push_str(&format!(
            "\n[cut at {at} of {total} bytes: the task store was down when the task ended]"
        ));
    }
    result
}

/// Why an end could not be spooled.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// The spool holds as many ends as it may ([`MAX_SPOOLED`]).
    #[error("the spool {0} is full (its ends wait for the store)")]
    Full(PathBuf),
    /// The file could not be written.
    #[error("cannot write the spool {path}: {source}")]
    Io {
        /// The spool file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// What a pass over the spool did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flushed {
    /// Ends the store took (or already had an end for).
    pub written: usize,
    /// Ends still waiting (the store is still down).
    pub left: usize,
}

/// The spool of one workspace. Share the `Arc`.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    /// The records of ends kept here, as this process reads them until the store has them.
    held: Mutex<HashMap<String, TaskRecord>>,
    /// Woken when an end is kept.
    kept: Notify,
    /// The most ends kept at once ([`MAX_SPOOLED`]).
    capacity: usize,
}

impl Spool {
    /// The spool in `dir` (created when the first end is kept).
    pub fn new(dir: impl Into<PathBuf>) -> Arc<Self> {
        Arc::new(Spool {
            dir: dir.into(),
            held: Mutex::default(),
            kept: Notify::new(),
            capacity: MAX_SPOOLED,
        })
    }

    /// The spool directory of a workspace: `.cadre/spool/`.
    pub fn dir_of(workspace: &Path) -> PathBuf {
        workspace.join(".cadre").join("spool")
    }

    fn held(&self) -> MutexGuard<'_, HashMap<String, TaskRecord>> {
        match self.held.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Keep the end `t` of task `id`, which the store did not take: on disk (atomically:
    /// a temporary file renamed into place, synced) and, when `base` (the task as created)
    /// is given, in memory as the ended record this process reads meanwhile.
    pub fn keep(
        &self,
        id: &str,
        t: &Transition,
        base: Option<&TaskRecord>,
    ) -> Result<(), SpoolError> {
        let end = SpooledEnd::new(id, t);
        let path = self.path_of(id);
        let io = |source| SpoolError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        if !path.exists() && self.files().len() >= self.capacity {
            return Err(SpoolError::Full(self.dir.clone()));
        }
        let text = serde_json::to_vec(&end).map_err(|e| io(e.into()))?;
        write_atomically(&path, &text).map_err(io)?;
        if let Some(base) = base {
            self.held().insert(id.to_string(), ended(base, &end));
        }
        self.kept.notify_one();
        Ok(())
    }

    /// The ended record of task `id`, while its end waits here for the store.
    pub fn record(&self, id: &str) -> Option<TaskRecord> {
        self.held().get(id).cloned()
    }

    /// The ended records of `session`'s tasks waiting here.
    pub fn records_of(&self, session: &str) -> Vec<TaskRecord> {
        self.held()
            .values()
            .filter(|r| r.parent_session_id == session)
            .cloned()
            .collect()
    }

    fn path_of(&self, id: &str) -> PathBuf {
        // Task ids are `task_<uuid>`; anything else is kept under a name that cannot escape.
        let safe: String = id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(format!("{safe}{SUFFIX}"))
    }

    /// The spool files, oldest name first.
    fn files(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(std::result::Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .filter(|p| p.to_str().is_some_and(|s| s.ends_with(SUFFIX)))
            .collect();
        files.sort();
        files
    }

    /// Offer every spooled end to the store, once. An end the store takes, or refuses
    /// because it holds an end already (or another node owns the task now, or it is gone),
    /// leaves the spool; a transient failure stops the pass (the store is still down).
    pub async fn flush(&self, store: &dyn TaskStore) -> Flushed {
        let files = self.files();
        let mut done = Flushed::default();
        for (i, path) in files.iter().enumerate() {
            let end = match read_end(path) {
                Ok(end) => end,
                Err(e) => {
                    tracing::error!(file = %path.display(), error = %e, "spool: unreadable end, kept aside");
                    let mut aside = path.clone().into_os_string();
                    aside.push(UNREADABLE);
                    let _ = std::fs::rename(path, aside);
                    continue;
                }
            };
            let id = &end.task_id;
            match store.transition(id, end.transition()).await {
                Ok(()) => {
                    tracing::info!(task = %id, status = %end.status, "spool: end written to the store")
                }
                Err(e) if e.is_transient() => {
                    done.left = files.len() - i;
                    return done;
                }
                Err(StoreError::Refused { from, .. }) if from.is_terminal() => {
                    tracing::warn!(task = %id, stored = %from, spooled = %end.status, "spool: the store holds another end; it stands");
                }
                Err(e) => {
                    tracing::warn!(task = %id, error = %e, "spool: the store refused the end; dropped");
                }
            }
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!(file = %path.display(), error = %e, "spool: cannot remove a written end");
            }
            self.held().remove(id);
            done.written += 1;
        }
        done
    }

    /// Offer the spool to `store` whenever an end is kept and every [`FLUSH_EVERY`] while
    /// ends wait, until `stop`.
    pub fn spawn_flusher(self: &Arc<Self>, store: Arc<dyn TaskStore>, stop: CancellationToken) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let spool = self.clone();
        handle.spawn(async move {
            loop {
                let kept = spool.kept.notified();
                tokio::pin!(kept);
                kept.as_mut().enable();
                let left = if spool.files().is_empty() {
                    0
                } else {
                    spool.flush(store.as_ref()).await.left
                };
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = &mut kept => {}
                    _ = tokio::time::sleep(FLUSH_EVERY), if left > 0 => {}
                }
            }
        });
    }
}

/// Write `bytes` to `path` through a synced temporary file renamed into place, so a reader
/// (or a crash) sees the old file or the new one, never half of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        // The rename itself is durable once the directory is synced.
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Read one spool file (at most a spooled end's size).
fn read_end(path: &Path) -> Result<SpooledEnd, String> {
    use std::io::Read;
    let limit = (MAX_SPOOLED_RESULT as u64) * 2 + 64 * 1024;
    let mut text = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit + 1).read_to_end(&mut text))
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > limit {
        return Err(format!("larger than {limit} bytes"));
    }
    serde_json::from_slice(&text).map_err(|e| e.to_string())
}

/// `base` ended as `end` says.
fn ended(base: &TaskRecord, end: &SpooledEnd) -> TaskRecord {
    let mut r = base.clone();
    r.status = end.status;
    if end.result.is_some() {
        r.result = end.result.clone();
    }
    if end.error.is_some() {
        r.error = end.error.clone();
    }
    if end.end_state.is_some() {
        r.end_state = end.end_state.clone();
    }
    if let Some(u) = end.usage {
        r.usage = u;
    }
    r.updated_at = unix_millis();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_store::{MemoryStore, NewTask, NodeId};

    #[test]
    fn a_long_result_is_cut_with_a_note() {
        let long = "é".repeat(MAX_SPOOLED_RESULT);
        let cut = cut_result(long);
        assert!(cut.len() < MAX_SPOOLED_RESULT + 200);
        assert!(
            cut.ends_with("the task store was down when the task ended]"),
            "{}",
            &cut[cut.len() - 100..]
        );
        assert_eq!(cut_result("short".into()), "short");
    }

    #[tokio::test]
    async fn a_kept_end_is_read_here_and_written_once_the_store_answers() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path().join("spool"));
        let store = MemoryStore::new(NodeId::new("n"));
        let base = store.create(&NewTask::new("w", "s", "p")).await.unwrap();
        let t = Transition::completed("the answer");
        spool.keep(&base.id, &t, Some(&base)).unwrap();
        let held = spool.record(&base.id).unwrap();
        assert_eq!(held.status, TaskStatus::Completed);
        assert_eq!(held.result.as_deref(), Some("the answer"));
        assert_eq!(spool.records_of("s").len(), 1);
        // On disk whole, with no temporary file left.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("spool"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![format!("{}.json", base.id)]);

        // A fresh spool on the same directory (the next start) writes it.
        let again = Spool::new(dir.path().join("spool"));
        let done = again.flush(&store).await;
        assert_eq!(
            done,
            Flushed {
                written: 1,
                left: 0
            }
        );
        let stored = store.get(&base.id).await.unwrap().unwrap();
        assert_eq!(stored.status, TaskStatus::Completed);
        assert_eq!(stored.result.as_deref(), Some("the answer"));
        assert_eq!(stored.end_state.as_deref(), Some("completed"));
        assert!(again.files().is_empty());
    }

    #[tokio::test]
    async fn an_end_the_store_already_has_stands() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path());
        let store = MemoryStore::new(NodeId::new("n"));
        let base = store.create(&NewTask::new("w", "s", "p")).await.unwrap();
        store
            .transition(&base.id, Transition::failed("executor lost"))
            .await
            .unwrap();
        spool
            .keep(&base.id, &Transition::completed("late"), Some(&base))
            .unwrap();
        assert_eq!(
            spool.flush(&store).await,
            Flushed {
                written: 1,
                left: 0
            }
        );
        let stored = store.get(&base.id).await.unwrap().unwrap();
        assert_eq!(stored.status, TaskStatus::Failed);
        assert!(spool.record(&base.id).is_none());
    }

    #[tokio::test]
    async fn an_unreadable_file_is_kept_aside() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("task_x.json"), "{not json").unwrap();
        let spool = Spool::new(dir.path());
        let store = MemoryStore::new(NodeId::new("n"));
        assert_eq!(spool.flush(&store).await, Flushed::default());
        assert!(dir.path().join("task_x.json.unreadable").exists());
        assert!(spool.files().is_empty());
    }

    #[test]
    fn the_spool_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool {
            capacity: 5,
            ..Arc::into_inner(Spool::new(dir.path())).unwrap()
        };
        let t = Transition::completed("x");
        for i in 0..5 {
            spool.keep(&format!("task_{i:05}"), &t, None).unwrap();
        }
        assert!(matches!(
            spool.keep("task_more", &t, None),
            Err(SpoolError::Full(_))
        ));
        // The same task again replaces its file.
        spool.keep("task_00001", &t, None).unwrap();
    }
}
