//! The configured MCP servers of a session: built from the configuration files, started
//! with the session (`startup = "eager"`, or while their tools are unknown; each within its
//! own start-up timeout; a failure is a warning naming the server) or on their first call,
//! offering their tools to the main agent and, through narrowing, to every sub-agent, and
//! stopped when the session ends.

use crate::config::{ConfigError, ServerConfig, ServerEntry, Startup};
use crate::naming::server_part;
use crate::server::McpServer;
use crate::tool::tools_of;
use cadre_tools::{SecretEnv, Tool};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A server that could not be started, for the warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    /// The server.
    pub server: String,
    /// Why, naming the server (`MCP server X failed to start: ...`).
    pub error: String,
}

impl std::fmt::Display for StartFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error)
    }
}

/// The servers of a session.
#[derive(Debug, Default, Clone)]
pub struct McpServers {
    servers: Vec<Arc<McpServer>>,
    errors: Vec<ConfigError>,
}

impl McpServers {
    /// Servers from configuration entries `(name, entry, origin)`, in order, whose stdio
    /// processes start without `secrets`; an entry that cannot be used, or whose tool names
    /// would collide with an earlier server's, is an error in [`errors`](Self::errors) and
    /// left out.
    pub fn from_entries(
        entries: impl IntoIterator<Item = (String, ServerEntry, String)>,
        workspace: &Path,
        secrets: &SecretEnv,
    ) -> Self {
        let protected = cadre_tools::protected_roots(workspace);
        Self::from_entries_with(entries, workspace, secrets, None, protected)
    }

    /// As [`from_entries`](Self::from_entries), with the launcher that applies the sandbox of
    /// servers that ask for one (without it, such a server refuses to start), and the
    /// locations that stay read-only inside it (the built-in ones and any configured).
    pub fn from_entries_with(
        entries: impl IntoIterator<Item = (String, ServerEntry, String)>,
        workspace: &Path,
        secrets: &SecretEnv,
        launcher: Option<Arc<cadre_sandbox::Launcher>>,
        protected: Vec<PathBuf>,
    ) -> Self {
        let mut out = Self::default();
        let mut parts: HashMap<String, String> = HashMap::new();
        for (name, entry, origin) in entries {
            let cfg = match entry.resolve(&name, &origin, workspace) {
                Ok(c) => ServerConfig {
                    secrets: secrets.clone(),
                    protected: protected.clone(),
                    ..c
                },
                Err(e) => {
                    out.errors.push(e);
                    continue;
                }
            };
            let part = server_part(&name);
            if let Some(first) = parts.get(&part) {
                out.errors.push(ConfigError {
                    server: name.clone(),
                    origin,
                    message: format!(
                        "its tools would be named like those of server {first} (mcp__{part}__...); rename one of them"
                    ),
                });
                continue;
            }
            parts.insert(part, name);
            let cache = crate::cache::path(workspace, &cfg);
            out.servers
                .push(McpServer::with_cache(cfg, Some(cache), launcher.clone()));
        }
        out
    }

    /// Servers from ready configurations.
    pub fn from_configs(configs: impl IntoIterator<Item = ServerConfig>) -> Self {
        Self {
            servers: configs.into_iter().map(McpServer::new).collect(),
            errors: Vec::new(),
        }
    }

    /// Entries that could not be used.
    pub fn errors(&self) -> &[ConfigError] {
        &self.errors
    }

    /// The servers, in configuration order.
    pub fn servers(&self) -> &[Arc<McpServer>] {
        &self.servers
    }

    /// A server by name.
    pub fn get(&self, name: &str) -> Option<&Arc<McpServer>> {
        self.servers.iter().find(|s| s.name() == name)
    }

    /// True when no server is configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Start every enabled server at once (`cadre mcp list`); the ones that failed.
    pub async fn start_all(&self) -> Vec<StartFailure> {
        self.start_where(|_| true).await
    }

    /// Start what a session needs from the start, at once: the servers with
    /// `startup = "eager"`, and the lazy ones whose tools cadre has not seen yet (the model's
    /// first request must list them). The others start on their first call. The ones that
    /// failed.
    pub async fn start_session(&self) -> Vec<StartFailure> {
        self.start_where(|s| s.config().startup == Startup::Eager || !s.knows_offer())
            .await
    }

    async fn start_where(&self, pick: impl Fn(&McpServer) -> bool) -> Vec<StartFailure> {
        let starts = self
            .servers
            .iter()
            .filter(|s| s.config().enabled && pick(s))
            .map(|s| async move {
                s.start().await.err().map(|error| StartFailure {
                    server: s.name().to_string(),
                    error: error.to_string(),
                })
            });
        futures::future::join_all(starts)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// The cadre tools of the servers whose offer is known (started, or remembered).
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.servers.iter().flat_map(tools_of).collect()
    }

    /// Stop every server.
    pub async fn stop_all(&self) {
        futures::future::join_all(self.servers.iter().map(|s| s.stop())).await;
    }
}
