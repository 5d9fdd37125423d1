//! The `[store]` configuration section.

use crate::error::StoreError;
use crate::node::NodeId;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Environment variable that overrides `[store] url`.
pub const STORE_URL_ENV: &str = "CADRE_STORE_URL";

/// Default heartbeat interval, seconds.
pub const DEFAULT_HEARTBEAT_SECS: u64 = 30;
/// Default sweep interval, seconds.
pub const DEFAULT_SWEEP_SECS: u64 = 300;
/// Default orphan timeout, seconds.
pub const DEFAULT_ORPHAN_TIMEOUT_SECS: u64 = 600;
/// Default time to reach a database server when the store is opened, seconds.
pub const DEFAULT_CONNECT_TIMEOUT_SECS: u64 = 5;
/// Default time a task's write is retried over a store failure before its end is spooled.
pub const DEFAULT_WRITE_RETRY_SECS: u64 = 120;

/// `[store]`: where tasks are kept and how liveness is tracked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `sqlite://PATH` or `postgres://...`; default: SQLite at `<workspace>/.cadre/cadre.db`.
    pub url: Option<String>,
    /// How often the owner beats its running tasks (default 30).
    pub heartbeat_secs: u64,
    /// How often the sweeper looks for orphans (default 300, jittered ±10%).
    pub sweep_secs: u64,
    /// A local task without a heartbeat for this long is failed as "executor lost" (default 600).
    pub orphan_timeout_secs: u64,
    /// How long opening a PostgreSQL store waits for the server before failing with what was
    /// being reached (default 5).
    pub connect_timeout_secs: u64,
    /// How long a task's write is retried over a store that fails (restarting, unreachable)
    /// before its end is kept in the local spool, `.cadre/spool/` (default 120).
    pub write_retry_secs: u64,
    /// Override the detected node id (`node-<hostname>-<workspace hash>`).
    pub node_id: Option<String>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: None,
            heartbeat_secs: DEFAULT_HEARTBEAT_SECS,
            sweep_secs: DEFAULT_SWEEP_SECS,
            orphan_timeout_secs: DEFAULT_ORPHAN_TIMEOUT_SECS,
            connect_timeout_secs: DEFAULT_CONNECT_TIMEOUT_SECS,
            write_retry_secs: DEFAULT_WRITE_RETRY_SECS,
            node_id: None,
        }
    }
}

impl StoreConfig {
    /// The default database file of a workspace: `<workspace>/.cadre/cadre.db`.
    pub fn default_sqlite_path(workspace: &Path) -> PathBuf {
        workspace.join(".cadre").join("cadre.db")
    }

    /// The URL to open: `CADRE_STORE_URL` if set and non-empty, else `url`, else the
    /// workspace's SQLite file.
    pub fn effective_url(&self, workspace: &Path) -> String {
        let from_env = std::env::var(STORE_URL_ENV).ok().filter(|s| !s.is_empty());
        self.url_with_env(workspace, from_env.as_deref())
    }

    /// Like [`StoreConfig::effective_url`] with the environment value passed in.
    pub fn url_with_env(&self, workspace: &Path, env_url: Option<&str>) -> String {
        if let Some(u) = env_url.or(self.url.as_deref()) {
            return u.to_string();
        }
        format!(
            "sqlite://{}",
            Self::default_sqlite_path(workspace).display()
        )
    }

    /// The node id: the override, or the one detected from host name and workspace.
    pub fn node_id(&self, workspace: &Path) -> NodeId {
        match &self.node_id {
            Some(id) => NodeId::new(id.clone()),
            None => NodeId::detect(workspace),
        }
    }

    /// Heartbeat interval.
    pub fn heartbeat_interval(&self) -> Duration {
        Duration::from_secs(self.heartbeat_secs)
    }

    /// Sweep interval.
    pub fn sweep_interval(&self) -> Duration {
        Duration::from_secs(self.sweep_secs)
    }

    /// Orphan timeout.
    pub fn orphan_timeout(&self) -> Duration {
        Duration::from_secs(self.orphan_timeout_secs)
    }

    /// How long opening the store waits for a database server.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.connect_timeout_secs)
    }

    /// How long a task's write is retried before its end is spooled.
    pub fn write_retry(&self) -> Duration {
        Duration::from_secs(self.write_retry_secs)
    }

    /// Check the values: intervals are positive and the orphan timeout is longer than two
    /// heartbeats (otherwise live tasks would be swept).
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.heartbeat_secs == 0
            || self.sweep_secs == 0
            || self.connect_timeout_secs == 0
            || self.write_retry_secs == 0
        {
            return Err(StoreError::Config(
                "heartbeat_secs, sweep_secs, connect_timeout_secs and write_retry_secs must be at least 1".into(),
            ));
        }
        if self.orphan_timeout_secs < self.heartbeat_secs.saturating_mul(2) {
            return Err(StoreError::Config(format!(
                "orphan_timeout_secs ({}) must be at least twice heartbeat_secs ({})",
                self.orphan_timeout_secs, self.heartbeat_secs
            )));
        }
        if self.node_id.as_deref().is_some_and(|n| n.trim().is_empty()) {
            return Err(StoreError::Config("node_id must not be empty".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_unknown_keys() {
        let c: StoreConfig = toml::from_str("").unwrap();
        assert_eq!(c, StoreConfig::default());
        assert_eq!(c.heartbeat_secs, 30);
        assert_eq!(c.orphan_timeout_secs, 600);
        c.validate().unwrap();
        assert!(toml::from_str::<StoreConfig>("urll = 'x'").is_err());
        let c: StoreConfig =
            toml::from_str("url = 'postgres://db/x'\nheartbeat_secs = 1\norphan_timeout_secs = 1")
                .unwrap();
        assert!(c.validate().is_err());
    }

    #[test]
    fn url_precedence() {
        let ws = Path::new("/w");
        let mut c = StoreConfig::default();
        assert_eq!(c.url_with_env(ws, None), "sqlite:///w/.cadre/cadre.db");
        c.url = Some("sqlite:///x.db".into());
        assert_eq!(c.url_with_env(ws, None), "sqlite:///x.db");
        assert_eq!(c.url_with_env(ws, Some("postgres://h/d")), "postgres://h/d");
        c.node_id = Some("n1".into());
        assert_eq!(c.node_id(ws).as_str(), "n1");
    }
}
