//! cadre's persistent task store.
//!
//! Task records (the sub-agent runtime's tasks) and live children are kept in memory
//! ([`MemoryStore`], for library users who want no persistence) or in SQL: an
//! embedded SQLite file by default (`<workspace>/.cadre/cadre.db`, WAL, safe for several
//! processes on one machine) or a PostgreSQL database shared by several nodes. The state
//! rules are enforced by the database with conditional updates, completions are delivered
//! exactly once, owners beat their tasks, a sweeper fails orphans, a restarted node fails
//! what its dead predecessor left running, and any node can cancel or wait for any task.
//!
//! Start with [`open`] (or [`open_config`]) and use the [`TaskStore`] trait; see
//! `docs/store.md` for the schema and semantics.

mod background;
mod config;
mod error;
mod memory;
mod memory_teams;
mod model;
mod node;
mod redact;
mod retry;
mod sql;
mod store;
mod team;
#[cfg(feature = "testing")]
pub mod testing;

pub use background::{
    BeatSource, Heartbeater, Maintenance, RunningIds, Sweeper, jittered, start_maintenance,
};
pub use cadre_types::{TaskOutcome, TaskStatus, end_state_text};
pub use config::{
    DEFAULT_HEARTBEAT_SECS, DEFAULT_ORPHAN_TIMEOUT_SECS, DEFAULT_SWEEP_SECS, STORE_URL_ENV,
    StoreConfig,
};
pub use error::{StoreError, StoreResult};
pub use memory::{DEFAULT_RETENTION, MemoryStore};
pub use model::{
    BackgroundSummary, Checkpoint, LiveChildEntry, NewTask, OrphanPolicy, ServedTurn, TaskFilter,
    TaskOwner, TaskRecord, Transition, Transport,
};
pub use node::{NodeId, current_instance, hostname, instance_alive};
pub use redact::{REDACTED, has_env_reference, redact_headers, redact_url};
pub use retry::{
    CREATE_RETRY_FOR, RETRY_FOR, create_live_retrying, create_retrying, transition_retrying,
    transition_returning_retrying,
};
pub use sql::schema::{Migration, POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS};
pub use sql::{
    Backend, DEFAULT_POLL_INTERVAL, ReadStats, SQLITE_BUSY_TIMEOUT, SqlStore, WriteStats,
    executor_died_message, executor_lost_message, open, open_config, open_postgres, open_sqlite,
};
pub use store::{CancelWatch, TaskStore};
pub use team::{
    BoardItem, BoardStatus, BoardUpdate, EVERYONE, LEAD, MAX_TEAM_MESSAGE_BYTES, NewMember,
    TeamKey, TeamMember, TeamMessage, TeamStore,
};
