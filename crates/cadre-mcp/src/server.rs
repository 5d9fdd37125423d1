//! One configured MCP server as cadre holds it: one shared connection, started on demand
//! (on the first call, or with the session), with what it offers (tools, whether it has
//! resources, prompts; remembered between sessions), the start rule (a server that failed or
//! exited is started again once, on the next call), and calls with a timeout, progress
//! forwarding and cancellation.

use crate::config::ServerConfig;
use crate::connection::{Connection, connect};
use futures::StreamExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, Prompt, ReadResourceRequestParams,
    ReadResourceResult, Request, Resource, ServerResult, Tool as McpToolInfo,
};
use rmcp::service::PeerRequestOptions;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// What a started server offers.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Offer {
    /// Its tools.
    pub tools: Vec<McpToolInfo>,
    /// Its resources (empty when it has none or does not support them).
    pub resources: Vec<Resource>,
    /// Its prompts.
    pub prompts: Vec<Prompt>,
}

/// The state of a server, as `cadre mcp list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Not started yet.
    Idle,
    /// Connected.
    Running,
    /// Stopped by cadre (its last user ended).
    Stopped,
    /// It failed to start or exited; `retry` says whether the next call tries again.
    Failed {
        /// Why.
        error: String,
        /// Whether the next call starts it again.
        retry: bool,
    },
    /// `enabled = false`.
    Disabled,
}

impl std::fmt::Display for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerState::Idle => f.write_str("not started"),
            ServerState::Running => f.write_str("running"),
            ServerState::Stopped => f.write_str("stopped"),
            ServerState::Failed { error, .. } => write!(f, "failed: {error}"),
            ServerState::Disabled => f.write_str("disabled"),
        }
    }
}

struct Inner {
    state: ServerState,
    conn: Option<Arc<Connection>>,
}

/// A progress notification of a call: `progress` of `total`, with the server's message.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Progress so far.
    pub progress: f64,
    /// The total, when the server knows it.
    pub total: Option<f64>,
    /// The server's message.
    pub message: Option<String>,
}

/// Why a call failed; every variant becomes a tool error the model reads.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The server is not running and could not be started.
    #[error(transparent)]
    Unavailable(#[from] StartError),
    /// The server exited or the connection broke during the call.
    #[error("{0}")]
    Lost(String),
    /// The server answered with a JSON-RPC error.
    #[error("{0}")]
    Server(String),
    /// The call took longer than the server's `tool_timeout_secs`.
    #[error("the call did not finish within {0} s (tool_timeout_secs); it was cancelled")]
    Timeout(f64),
    /// The caller cancelled it.
    #[error("cancelled")]
    Cancelled,
}

/// Why a server is not running for its caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// `enabled = false`.
    #[error("MCP server {server} is disabled (enabled = false)")]
    Disabled {
        /// The server.
        server: String,
    },
    /// It failed before and is not retried.
    #[error("MCP server {server} is not available: {reason}")]
    Unavailable {
        /// The server.
        server: String,
        /// Why it failed.
        reason: String,
    },
    /// cadre stopped it: the sub-agents it was declared for have ended.
    #[error("MCP server {server} is stopped: the sub-agents it was declared for have ended")]
    Stopped {
        /// The server.
        server: String,
    },
    /// Starting it failed just now.
    #[error("MCP server {server} failed to start: {reason}")]
    Failed {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
}

/// One server and its shared connection.
pub struct McpServer {
    cfg: ServerConfig,
    /// The sandbox its process runs in, when its configuration asks for one.
    sandbox: Option<Arc<cadre_sandbox::Sandbox>>,
    /// A sandbox was asked for without a launcher to apply it.
    unsandboxable: bool,
    inner: Mutex<Inner>,
    /// What it offered when it last started, in this session or (from the cache) before.
    offer: std::sync::Mutex<Option<Offer>>,
    /// Where that is kept between sessions.
    cache: Option<PathBuf>,
    /// For a server of sub-agents' definitions: how many children hold it. It starts only
    /// while one does, so a tool that outlived them cannot bring it back.
    holders: Option<Arc<AtomicUsize>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.cfg.name)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server that is not started yet, with no memory of earlier sessions.
    pub fn new(cfg: ServerConfig) -> Arc<Self> {
        Self::with_cache(cfg, None, None)
    }

    /// A server that is not started yet, offering what it offered when it last started, as
    /// kept in `cache` (refreshed on every start); its sandbox, if its configuration asks for
    /// one, goes through `launcher`.
    pub fn with_cache(
        cfg: ServerConfig,
        cache: Option<PathBuf>,
        launcher: Option<Arc<cadre_sandbox::Launcher>>,
    ) -> Arc<Self> {
        Self::build(cfg, cache, launcher, None)
    }

    /// As [`with_cache`](Self::with_cache), for a server that may start only while
    /// `holders` is above zero.
    pub(crate) fn held(
        cfg: ServerConfig,
        cache: Option<PathBuf>,
        launcher: Option<Arc<cadre_sandbox::Launcher>>,
        holders: Arc<AtomicUsize>,
    ) -> Arc<Self> {
        Self::build(cfg, cache, launcher, Some(holders))
    }

    fn build(
        cfg: ServerConfig,
        cache: Option<PathBuf>,
        launcher: Option<Arc<cadre_sandbox::Launcher>>,
        holders: Option<Arc<AtomicUsize>>,
    ) -> Arc<Self> {
        let offer = cache.as_deref().and_then(crate::cache::load);
        let sandbox = match (&cfg.sandbox, launcher) {
            // The protected paths stay read-only for the server as they do for `bash`: a
            // server in a writable sandbox must not rewrite cadre's configuration either.
            (Some(policy), Some(l)) => Some(Arc::new(
                cadre_sandbox::Sandbox::new(l, policy.clone()).protect(cfg.protected.clone()),
            )),
            _ => None,
        };
        let unsandboxable = cfg.sandbox.is_some() && sandbox.is_none();
        let state = if cfg.enabled {
            ServerState::Idle
        } else {
            ServerState::Disabled
        };
        Arc::new(Self {
            cfg,
            sandbox,
            unsandboxable,
            inner: Mutex::new(Inner { state, conn: None }),
            offer: std::sync::Mutex::new(offer),
            cache,
            holders,
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.cfg
    }

    /// For a stdio server of sub-agents' definitions: the sandbox its process runs in
    /// (`off` when none), which bounds the agents that may use its tools. `None` for the
    /// session's configured servers, shared by every agent as configured.
    pub(crate) fn process_sandbox(&self) -> Option<cadre_sandbox::SandboxPolicy> {
        self.holders.as_ref()?;
        match self.cfg.transport {
            crate::config::Transport::Stdio { .. } => {
                Some((self.cfg.sandbox.clone()).unwrap_or_else(cadre_sandbox::SandboxPolicy::off))
            }
            crate::config::Transport::Http { .. } => None,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    /// Its state now.
    pub async fn state(&self) -> ServerState {
        self.inner.lock().await.state.clone()
    }

    /// What it offered when it last started (nothing when cadre has never seen it start).
    pub fn offer(&self) -> Offer {
        self.offer
            .lock()
            .ok()
            .and_then(|o| o.clone())
            .unwrap_or_default()
    }

    /// True when cadre knows what it offers: it started in this session, or the cache
    /// remembers an earlier start.
    pub fn knows_offer(&self) -> bool {
        self.offer.lock().is_ok_and(|o| o.is_some())
    }

    /// The process id of a running stdio server.
    pub async fn pid(&self) -> Option<u32> {
        self.inner.lock().await.conn.as_ref().and_then(|c| c.pid)
    }

    /// Start it if it is not running, and list what it offers. A failed start is remembered
    /// (the next call of [`connection`](Self::connection) tries once more).
    pub async fn start(&self) -> Result<Offer, StartError> {
        self.connection().await?;
        Ok(self.offer())
    }

    /// The running connection, starting the server when it is idle or stopped, or when it
    /// failed and has a retry left.
    async fn connection(&self) -> Result<Arc<Connection>, StartError> {
        let mut inner = self.inner.lock().await;
        if let Some(c) = &inner.conn {
            if !c.is_closed() {
                return Ok(c.clone());
            }
            let said = c.stderr_summary();
            inner.conn = None;
            inner.state = ServerState::Failed {
                error: exited_message(&said),
                retry: true,
            };
        }
        match &inner.state {
            ServerState::Disabled => {
                return Err(StartError::Disabled {
                    server: self.cfg.name.clone(),
                });
            }
            ServerState::Failed {
                error,
                retry: false,
            } => {
                return Err(StartError::Unavailable {
                    server: self.cfg.name.clone(),
                    reason: error.clone(),
                });
            }
            _ => {}
        }
        if self
            .holders
            .as_ref()
            .is_some_and(|h| h.load(Ordering::SeqCst) == 0)
        {
            return Err(StartError::Stopped {
                server: self.cfg.name.clone(),
            });
        }
        let retrying = matches!(inner.state, ServerState::Failed { .. });
        match self.open().await {
            Ok((conn, offer)) => {
                if let Some(path) = &self.cache {
                    crate::cache::save(path, &offer);
                }
                if let Ok(mut o) = self.offer.lock() {
                    *o = Some(offer);
                }
                let conn = Arc::new(conn);
                inner.conn = Some(conn.clone());
                inner.state = ServerState::Running;
                Ok(conn)
            }
            Err(error) => {
                tracing::warn!(server = %self.cfg.name, %error, "MCP server failed to start");
                inner.state = ServerState::Failed {
                    error: error.clone(),
                    // A start that failed is retried once, on the next call.
                    retry: !retrying,
                };
                Err(StartError::Failed {
                    server: self.cfg.name.clone(),
                    reason: error,
                })
            }
        }
    }

    async fn open(&self) -> Result<(Connection, Offer), String> {
        if self.unsandboxable {
            return Err(
                "it asks for a sandbox, but no sandbox launcher is configured here".to_string(),
            );
        }
        let conn = connect(&self.cfg, self.sandbox.as_deref())
            .await
            .map_err(|e| e.to_string())?;
        let listing = async {
            let peer = conn.service.peer();
            let caps = peer.peer_info().map(|i| i.capabilities.clone());
            let tools = match caps.as_ref().map(|c| c.tools.is_some()) {
                Some(false) => Vec::new(),
                _ => peer
                    .list_all_tools()
                    .await
                    .map_err(|e| format!("tools/list failed: {e}"))?,
            };
            let resources = match caps.as_ref().map(|c| c.resources.is_some()) {
                Some(true) => peer.list_all_resources().await.unwrap_or_default(),
                _ => Vec::new(),
            };
            let prompts = match caps.as_ref().map(|c| c.prompts.is_some()) {
                Some(true) => peer.list_all_prompts().await.unwrap_or_default(),
                _ => Vec::new(),
            };
            Ok::<_, String>(Offer {
                tools,
                resources,
                prompts,
            })
        };
        match tokio::time::timeout(self.cfg.startup_timeout, listing).await {
            Ok(Ok(offer)) => Ok((conn, offer)),
            Ok(Err(e)) => {
                conn.stop().await;
                Err(e)
            }
            Err(_) => {
                conn.stop().await;
                Err(format!(
                    "did not list its tools within {} s (startup_timeout_secs)",
                    self.cfg.startup_timeout.as_secs_f64()
                ))
            }
        }
    }

    /// Stop the server (its process ends); the next call starts it again.
    pub async fn stop(&self) {
        let mut inner = self.inner.lock().await;
        let conn = inner.conn.take();
        if inner.state == ServerState::Running {
            inner.state = ServerState::Stopped;
        }
        drop(inner);
        if let Some(conn) = conn {
            match Arc::try_unwrap(conn) {
                Ok(c) => c.stop().await,
                // A call still holds it: cancel the session; the process ends with it.
                Err(shared) => shared.service.cancellation_token().cancel(),
            }
        }
    }

    /// After a call found the connection broken: mark the server failed (with one retry
    /// left) and say what it last printed.
    async fn lost(&self, conn: &Arc<Connection>) -> String {
        let said = conn.stderr_summary();
        let message = exited_message(&said);
        let mut inner = self.inner.lock().await;
        if inner.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            inner.conn = None;
            inner.state = ServerState::Failed {
                error: message.clone(),
                retry: true,
            };
        }
        tracing::warn!(server = %self.cfg.name, error = %message, "MCP server connection lost");
        format!(
            "MCP server {} {message}; cadre starts it again on the next call",
            self.cfg.name
        )
    }

    /// Call tool `tool` with `arguments`. Progress notifications go to `on_progress`;
    /// `cancel` sends `notifications/cancelled` and ends the call.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        cancel: &CancellationToken,
        on_progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<CallToolResult, CallError> {
        let request = ClientRequest::CallToolRequest(Request::new(CallToolRequestParams {
            meta: None,
            name: tool.to_string().into(),
            arguments,
            task: None,
        }));
        match self.request(request, cancel, on_progress).await? {
            ServerResult::CallToolResult(r) => Ok(r),
            other => Err(CallError::Server(format!(
                "unexpected answer to tools/call: {other:?}"
            ))),
        }
    }

    /// Read resource `uri`.
    pub async fn read_resource(
        &self,
        uri: &str,
        cancel: &CancellationToken,
    ) -> Result<ReadResourceResult, CallError> {
        let request = ClientRequest::ReadResourceRequest(Request::new(ReadResourceRequestParams {
            meta: None,
            uri: uri.to_string(),
        }));
        match self.request(request, cancel, &|_| {}).await? {
            ServerResult::ReadResourceResult(r) => Ok(r),
            other => Err(CallError::Server(format!(
                "unexpected answer to resources/read: {other:?}"
            ))),
        }
    }

    /// The resources it lists now (it is started if needed).
    pub async fn list_resources(&self) -> Result<Vec<Resource>, CallError> {
        let conn = self.connection().await.map_err(CallError::Unavailable)?;
        match conn.service.peer().list_all_resources().await {
            Ok(r) => Ok(r),
            Err(rmcp::ServiceError::TransportClosed) => {
                Err(CallError::Lost(self.lost(&conn).await))
            }
            Err(e) => Err(CallError::Server(e.to_string())),
        }
    }

    async fn request(
        &self,
        request: ClientRequest,
        cancel: &CancellationToken,
        on_progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<ServerResult, CallError> {
        if cancel.is_cancelled() {
            return Err(CallError::Cancelled);
        }
        let conn = tokio::select! {
            c = self.connection() => c.map_err(CallError::Unavailable)?,
            _ = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        let peer = conn.service.peer().clone();
        let Ok(handle) = peer
            .send_cancellable_request(request, trace_options())
            .await
        else {
            return Err(CallError::Lost(self.lost(&conn).await));
        };
        let mut progress = conn.progress.subscribe(handle.progress_token.clone()).await;
        let id = handle.id.clone();
        let mut rx = handle.rx;
        let timeout = tokio::time::sleep(self.cfg.tool_timeout);
        tokio::pin!(timeout);
        let reason = loop {
            tokio::select! {
                answer = &mut rx => {
                    return match answer {
                        Ok(Ok(r)) => Ok(r),
                        Ok(Err(rmcp::ServiceError::McpError(e))) => Err(CallError::Server(e.message.to_string())),
                        Ok(Err(rmcp::ServiceError::TransportClosed)) | Err(_) => {
                            Err(CallError::Lost(self.lost(&conn).await))
                        }
                        Ok(Err(e)) => Err(CallError::Server(e.to_string())),
                    };
                }
                Some(p) = progress.next() => on_progress(Progress {
                    progress: p.progress,
                    total: p.total,
                    message: p.message,
                }),
                _ = cancel.cancelled() => break "cancelled by the caller",
                _ = &mut timeout => break "timed out",
            }
        };
        let _ = peer
            .notify_cancelled(rmcp::model::CancelledNotificationParam {
                request_id: id,
                reason: Some(reason.to_string()),
            })
            .await;
        if cancel.is_cancelled() {
            Err(CallError::Cancelled)
        } else {
            Err(CallError::Timeout(self.cfg.tool_timeout.as_secs_f64()))
        }
    }
}

fn exited_message(said: &str) -> String {
    if said.is_empty() {
        "exited".to_string()
    } else {
        format!("exited (it said: {said})")
    }
}

/// The options of a request to a server: its `_meta` carries the W3C `traceparent` (and
/// `tracestate`) of the
/// span it is made in (the tool call's), as the MCP convention for trace context has it, so
/// a server that traces continues the caller's trace.
fn trace_options() -> PeerRequestOptions {
    let mut options = PeerRequestOptions::no_options();
    let fields = cadre_tools::otel::current_trace_fields();
    if !fields.is_empty() {
        let mut meta = rmcp::model::Meta::new();
        for (name, value) in fields {
            meta.0.insert(name.into(), value.into());
        }
        options.meta = Some(meta);
    }
    options
}
