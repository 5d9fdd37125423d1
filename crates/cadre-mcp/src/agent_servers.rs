//! The MCP servers sub-agents' definitions declare (`mcpServers`, Claude Code's form): a
//! configured server by name (the session's connection, shared with the parent), or a server
//! of the definition's own, checked like a configured one (same keys, `${VAR}` expansion at
//! start, cadre's secrets removed, its `sandbox`) and started for the children of that
//! definition only. Children that declare the same server share one process; when the last
//! of them ends, it is stopped, and it cannot be started again until another child holds it.

use crate::config::{ServerConfig, ServerEntry, Transport};
use crate::naming::server_part;
use crate::server::McpServer;
use crate::servers::McpServers;
use crate::tool::tools_of;
use async_trait::async_trait;
use cadre_sandbox::{SandboxMode, SandboxPolicy, SandboxSpec};
use cadre_subagents::{AgentMcpServer, AgentServers, ServerLease, ServerRequest};
use cadre_tools::SecretEnv;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The servers of definitions, for every child of a session. Implements [`AgentServers`].
pub struct AgentServerPool {
    /// The session's configured servers, which named entries refer to.
    configured: McpServers,
    workspace: PathBuf,
    secrets: SecretEnv,
    launcher: Option<Arc<cadre_sandbox::Launcher>>,
    /// Declared servers by name and entry as written; kept (with what they offered) after
    /// their last holder ends, so the next child starts the same one.
    /// Keyed by the sandbox and protected paths too: children in different sandboxes get
    /// different processes.
    declared: Mutex<HashMap<DeclaredKey, Declared>>,
}

impl std::fmt::Debug for AgentServerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentServerPool").finish_non_exhaustive()
    }
}

/// A declared server as written, with the sandbox and protected paths it runs under.
type DeclaredKey = (String, Option<SandboxPolicy>, Vec<PathBuf>);

#[derive(Clone)]
struct Declared {
    server: Arc<McpServer>,
    holders: Arc<AtomicUsize>,
}

/// What one lease holds: its declared servers, each released when the lease drops.
struct Hold(Vec<Declared>);

impl Drop for Hold {
    fn drop(&mut self) {
        for d in self.0.drain(..) {
            if d.holders.fetch_sub(1, Ordering::SeqCst) == 1 {
                // The last child using it ended: its process goes now.
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { d.server.stop().await });
                }
            }
        }
    }
}

impl AgentServerPool {
    /// A pool for a session whose configured servers are `configured`, in `workspace`;
    /// declared stdio servers start without `secrets` and, with a `sandbox`, through
    /// `launcher`, like configured ones.
    pub fn new(
        configured: McpServers,
        workspace: impl Into<PathBuf>,
        secrets: SecretEnv,
        launcher: Option<Arc<cadre_sandbox::Launcher>>,
    ) -> Self {
        Self {
            configured,
            workspace: workspace.into(),
            secrets,
            launcher,
            declared: Mutex::new(HashMap::new()),
        }
    }

    /// The declared server `name` of `request`'s definition, held once more; or the
    /// configured one when it is the same server (same name, same transport).
    fn hold_declared(
        &self,
        request: &ServerRequest<'_>,
        name: &str,
        entry: &serde_json::Value,
        hold: &mut Hold,
    ) -> Result<Arc<McpServer>, String> {
        let origin = format!("agent {}, {}", request.agent, request.origin);
        let parsed: ServerEntry = serde_json::from_value(entry.clone())
            .map_err(|e| format!("skipped MCP server {name} ({origin}): {e}"))?;
        let cfg = parsed
            .resolve(name, &origin, &self.workspace)
            .map_err(|e| format!("skipped {e}"))?;
        let sandbox = match cfg.transport {
            Transport::Stdio { .. } => confine(
                parsed.sandbox.as_ref(),
                cfg.sandbox.clone(),
                request.sandbox,
            )
            .map_err(|e| format!("skipped MCP server {name} ({origin}): {e}"))?,
            Transport::Http { .. } => cfg.sandbox.clone(),
        };
        let cfg = ServerConfig {
            secrets: self.secrets.clone(),
            sandbox,
            protected: request.protected.to_vec(),
            ..cfg
        };
        if let Some(same) = self.configured.get(name).filter(|c| {
            let c = c.config();
            c.transport == cfg.transport && c.sandbox == cfg.sandbox && c.protected == cfg.protected
        }) {
            return Ok(same.clone());
        }
        // Children with other protected lists (other roots) get their own process.
        let key = (
            format!("{name}\u{0}{entry}"),
            cfg.sandbox.clone(),
            cfg.protected.clone(),
        );
        let mut declared = self.declared.lock().map_err(|_| "poisoned".to_string())?;
        if !declared.contains_key(&key) {
            // The same server for children in other sandboxes (other worktrees): those no
            // child holds go, so the pool does not grow with every sandbox there was.
            declared.retain(|(k, _, _), d| *k != key.0 || d.holders.load(Ordering::SeqCst) > 0);
        }
        let d = declared
            .entry(key)
            .or_insert_with(|| {
                let holders = Arc::new(AtomicUsize::new(0));
                let cache = crate::cache::path(&self.workspace, &cfg);
                Declared {
                    server: McpServer::held(
                        cfg,
                        Some(cache),
                        self.launcher.clone(),
                        holders.clone(),
                    ),
                    holders,
                }
            })
            .clone();
        d.holders.fetch_add(1, Ordering::SeqCst);
        hold.0.push(d.clone());
        Ok(d.server)
    }
}

/// The sandbox a declared stdio server runs in, never wider than `child`'s, the sandbox of
/// the child that starts it: with no `sandbox` of its own (`own`) it runs in the child's;
/// with one it runs in that one narrowed to the child's writable directories. Asking for a
/// wider mode, or the network where the child has none, is refused: the server would
/// escape the child's sandbox, and silently narrowed it would fail in ways hard to trace.
/// `resolved` is `own` resolved against the workspace (none for `off`).
fn confine(
    own: Option<&SandboxSpec>,
    resolved: Option<SandboxPolicy>,
    child: &SandboxPolicy,
) -> Result<Option<SandboxPolicy>, String> {
    if child.is_off() {
        return Ok(resolved);
    }
    if own.is_none() {
        return Ok(Some(child.clone()));
    }
    let network = if child.network { "with" } else { "without" };
    let wider = |what: String| {
        Err(format!(
            "its `sandbox` asks for {what}, but the agent's children run in a {} sandbox {network} the network, and a server declared in an agent file runs no wider than the child that starts it; narrow the server's `sandbox` (or leave it out to use the child's), or widen the agent's own `sandbox:`",
            child.mode
        ))
    };
    match resolved {
        None => wider(format!("`{}`", SandboxMode::Off)),
        Some(p) if p.mode > child.mode => wider(format!("`{}`", p.mode)),
        Some(p) if p.network && !child.network => wider("the network".to_string()),
        Some(p) => Ok(Some(p.within(child))),
    }
}

#[async_trait]
impl AgentServers for AgentServerPool {
    async fn acquire(&self, request: ServerRequest<'_>) -> ServerLease {
        let mut tools = Vec::new();
        let mut warnings = Vec::new();
        let mut hold = Hold(Vec::new());
        let mut parts: HashMap<String, String> = HashMap::new();
        for s in request.servers {
            let part = server_part(s.name());
            if let Some(first) = parts.get(&part) {
                warnings.push(format!(
                    "skipped MCP server {}: its tools would be named like those of server {first} (mcp__{part}__...); rename one of them",
                    s.name()
                ));
                continue;
            }
            parts.insert(part, s.name().to_string());
            let server = match s {
                AgentMcpServer::Named(name) => match self.configured.get(name) {
                    Some(server) => server.clone(),
                    None => {
                        warnings.push(format!(
                            "`mcpServers` names MCP server {name}, which is not configured (.mcp.json or [mcp_servers.{name}])"
                        ));
                        continue;
                    }
                },
                AgentMcpServer::Inline { name, entry } => {
                    match self.hold_declared(&request, name, entry, &mut hold) {
                        Ok(server) => server,
                        Err(e) => {
                            warnings.push(e);
                            continue;
                        }
                    }
                }
            };
            if !server.config().enabled {
                continue;
            }
            // Its tools must be in the child's first request: one cadre has never seen
            // start starts now, the others on their first call.
            if !server.knows_offer()
                && let Err(e) = server.start().await
            {
                warnings.push(e.to_string());
            }
            tools.extend(tools_of(&server));
        }
        ServerLease::new(tools, warnings, hold)
    }
}
