//! The store's error type.

use cadre_types::TaskStatus;

/// Why a store operation failed or was refused.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No task with this id.
    #[error("unknown task_id: {0}")]
    NotFound(String),
    /// The transition breaks the state rules; nothing was written.
    #[error("task {id} cannot go from {from} to {to}{}", if *cancel_requested { " (cancel requested)" } else { "" })]
    Refused {
        /// Task id.
        id: String,
        /// The status the record has.
        from: TaskStatus,
        /// The status that was asked for.
        to: TaskStatus,
        /// Whether the record's cancel flag is set.
        cancel_requested: bool,
    },
    /// A checkpoint append that does not continue the stored checkpoint, or whose task is
    /// unknown or has ended; nothing was written.
    #[error(
        "checkpoint of task {id} refused at message {start} of generation {generation}: the task is not active or its checkpoint does not end there"
    )]
    CheckpointRefused {
        /// Task id.
        id: String,
        /// The generation written to.
        generation: u64,
        /// Where the append started.
        start: u64,
    },
    /// The write carried an owner epoch the task has left behind: another node adopted it,
    /// and this writer is a stale owner. Nothing was written.
    #[error(
        "task {id} is owned by another node now (epoch {current}; this write was fenced at {epoch})"
    )]
    Fenced {
        /// Task id.
        id: String,
        /// The epoch the write carried.
        epoch: u64,
        /// The task's epoch.
        current: u64,
    },
    /// A task with this id already exists.
    #[error("task already exists: {0}")]
    DuplicateTask(String),
    /// The label is already used by a live child of the same parent session.
    #[error("Label already in use: {0}")]
    LabelInUse(String),
    /// A team write was refused (a full team or mailbox, an unknown recipient or board
    /// item, an oversized message); nothing was written. The text says which.
    #[error("{0}")]
    TeamRefused(String),
    /// A live child with this agent key already exists.
    #[error("live child already exists: {0}")]
    DuplicateLiveChild(String),
    /// The URL names no supported backend (the message never contains a password).
    #[error("unsupported store url {0:?}: expected sqlite://PATH or postgres://...")]
    BadUrl(String),
    /// The configuration is inconsistent.
    #[error("invalid [store] configuration: {0}")]
    Config(String),
    /// A stored value could not be read back.
    #[error("corrupt task record {id}: {reason}")]
    Corrupt {
        /// Task id (or table name when no id is known).
        id: String,
        /// What was wrong.
        reason: String,
    },
    /// Applying the schema failed.
    #[error("schema migration failed: {0}")]
    Migration(String),
    /// The database server could not be reached when the store was opened: nothing answers
    /// at `endpoint` (`host:port`), or it did not answer in time.
    #[error("store unreachable: {reason} at {endpoint}")]
    Unreachable {
        /// `host:port` (or the socket directory and port) that was being reached.
        endpoint: String,
        /// What happened: `connection refused`, `no answer within 5s`, …
        reason: String,
    },
    /// The database reported an error.
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// A SQLite connection of the store (its writer or a reader thread) reported an error.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A file-system operation failed (creating the database directory).
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl StoreError {
    /// True when a write was refused by the state rules or by its fencing epoch.
    pub fn is_refused(&self) -> bool {
        matches!(self, StoreError::Refused { .. } | StoreError::Fenced { .. })
    }

    /// True for a failure that may pass by itself (the database restarting or busy, a
    /// dropped connection, a full pool): the same write can be tried again. A refusal, an
    /// unknown id or a corrupt record is an answer, not a failure to retry.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Io(_) => true,
            StoreError::Db(e) => matches!(
                e,
                sqlx::Error::Io(_)
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::Protocol(_)
                    | sqlx::Error::PoolTimedOut
                    | sqlx::Error::Database(_)
                    | sqlx::Error::WorkerCrashed
            ),
            StoreError::Sqlite(e) => e
                .sqlite_error_code()
                .is_some_and(|c| c != rusqlite::ErrorCode::ConstraintViolation),
            _ => false,
        }
    }

    /// True when the database refused a write for a duplicate key.
    pub(crate) fn is_unique_violation(&self) -> bool {
        match self {
            StoreError::Db(sqlx::Error::Database(d)) => d.is_unique_violation(),
            StoreError::Sqlite(e) => matches!(
                e.sqlite_error().map(|f| f.extended_code),
                Some(
                    rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                        | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                )
            ),
            _ => false,
        }
    }

    /// True when the database refused a write for a row it refers to that does not exist.
    pub(crate) fn is_foreign_key_violation(&self) -> bool {
        match self {
            StoreError::Db(sqlx::Error::Database(d)) => d.is_foreign_key_violation(),
            StoreError::Sqlite(e) => {
                e.sqlite_error().map(|f| f.extended_code)
                    == Some(rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY)
            }
            _ => false,
        }
    }
}

/// Shorthand for results of store operations.
pub type StoreResult<T> = Result<T, StoreError>;
