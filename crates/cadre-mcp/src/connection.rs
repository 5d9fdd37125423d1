//! One live connection to an MCP server: starting it (a child process over stdio, or
//! streamable HTTP), the client handler that routes progress notifications to the call
//! that asked for them, the tail of a stdio server's stderr (for error messages), and
//! stopping it.

use crate::config::{ServerConfig, Transport};
use cadre_types::env_ref::expand_env;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    ClientCapabilities, ClientInfo, Implementation, ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient};
use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Lines of a stdio server's stderr kept for error messages.
const STDERR_LINES: usize = 8;
/// Characters kept per stderr line.
const STDERR_LINE_CHARS: usize = 300;

/// The client side of one connection: answers the server's requests with the defaults
/// and hands progress notifications to the waiting call.
#[derive(Clone)]
pub(crate) struct Handler {
    pub progress: ProgressDispatcher,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.handle_notification(params).await;
    }

    fn get_info(&self) -> ClientInfo {
        ClientInfo {
            meta: None,
            protocol_version: ProtocolVersion::default(),
            capabilities: ClientCapabilities::default(),
            client_info: Implementation {
                name: "cadre".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                ..Implementation::default()
            },
        }
    }
}

/// The last lines a stdio server wrote to stderr.
#[derive(Debug, Default)]
pub(crate) struct StderrTail {
    lines: VecDeque<String>,
}

impl StderrTail {
    fn push(&mut self, line: &str) {
        if self.lines.len() >= STDERR_LINES {
            self.lines.pop_front();
        }
        self.lines
            .push_back(line.chars().take(STDERR_LINE_CHARS).collect());
    }

    /// The kept lines, oldest first, joined with ` | `.
    pub fn summary(&self) -> String {
        self.lines
            .iter()
            .filter(|l| !l.trim().is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

/// A started server.
pub(crate) struct Connection {
    pub service: RunningService<RoleClient, Handler>,
    pub progress: ProgressDispatcher,
    /// The process id of a stdio server.
    pub pid: Option<u32>,
    pub stderr: Arc<Mutex<StderrTail>>,
}

impl Connection {
    /// What the server last said on stderr, for error messages (empty for HTTP servers).
    pub fn stderr_summary(&self) -> String {
        self.stderr.lock().map(|t| t.summary()).unwrap_or_default()
    }

    /// True once the transport is gone (the process exited, the HTTP session ended).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed()
    }

    /// Stop the server: close the session and, for a stdio server, end its process group
    /// (servers started through `npx` or a shell have children of their own).
    pub async fn stop(mut self) {
        let _ = self
            .service
            .close_with_timeout(std::time::Duration::from_secs(2))
            .await;
        #[cfg(unix)]
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            use nix::sys::signal::{Signal, killpg};
            let _ = killpg(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
            cadre_sandbox::tether::release_group(pid.unsigned_abs());
        }
    }
}

/// Why an MCP server could not be connected.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A `${VAR}` in its entry could not be expanded.
    #[error("MCP server {server}: {what}: {reason}")]
    Expand {
        /// The server.
        server: String,
        /// Which part of the entry (`command`, `env NAME`, `header NAME`, ...).
        what: String,
        /// Why.
        reason: String,
    },
    /// Its entry cannot be used as written (a header that is not valid HTTP, ...).
    #[error("MCP server {server}: {reason}")]
    Entry {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// Its process could not be started (in its sandbox, when it has one).
    #[error("cannot start `{program}`{}: {reason}", if *.sandboxed { " in its sandbox" } else { "" })]
    Start {
        /// The program.
        program: String,
        /// Whether it was to run in a sandbox.
        sandboxed: bool,
        /// Why.
        reason: String,
    },
    /// It started but did not complete the MCP handshake.
    #[error("`{program}` did not complete the MCP handshake: {reason}{}", said.as_deref().map(|s| format!("; it said: {s}")).unwrap_or_default())]
    Handshake {
        /// The program.
        program: String,
        /// Why.
        reason: String,
        /// The end of what it wrote to stderr, if anything.
        said: Option<String>,
    },
    /// An HTTP server did not answer the handshake.
    #[error("cannot connect to {url}: {reason}")]
    Http {
        /// Its URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// It did not start within its start-up timeout.
    #[error("did not start within {} s (startup_timeout_secs)", .0.as_secs_f64())]
    Timeout(std::time::Duration),
}

fn expand(server: &str, what: &str, value: &str) -> Result<String, ConnectError> {
    expand_env(value).map_err(|e| ConnectError::Expand {
        server: server.to_string(),
        what: what.to_string(),
        reason: e.to_string(),
    })
}

/// The variables a stdio server's `env` sets: they are added to cadre's environment minus
/// cadre's secrets, so a secret reaches a server only when its entry names it.
fn child_env(
    cfg: &ServerConfig,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, ConnectError> {
    env.iter()
        .map(|(k, v)| Ok((k.clone(), expand(&cfg.name, &format!("env {k}"), v)?)))
        .collect()
}

async fn connect_stdio(
    cfg: &ServerConfig,
    handler: Handler,
    sandbox: Option<&cadre_sandbox::Sandbox>,
    command: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    cwd: Option<&std::path::Path>,
) -> Result<Connection, ConnectError> {
    let program = expand(&cfg.name, "command", command)?;
    let mut cmd = match sandbox {
        Some(s) => {
            tokio::process::Command::from(s.command(&program).map_err(|e| ConnectError::Start {
                program: program.clone(),
                sandboxed: true,
                reason: e.to_string(),
            })?)
        }
        None => tokio::process::Command::new(&program),
    };
    cfg.secrets.apply(cmd.as_std_mut());
    for a in args {
        cmd.arg(expand(&cfg.name, "args", a)?);
    }
    for (k, v) in child_env(cfg, env)? {
        cmd.env(k, v);
    }
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    #[cfg(unix)]
    cmd.process_group(0);
    cmd.kill_on_drop(true);
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ConnectError::Start {
            program: program.clone(),
            sandboxed: sandbox.is_some(),
            reason: e.to_string(),
        })?;
    let pid = transport.id();
    // Its group dies with cadre, even when cadre is killed.
    if let Some(pid) = pid {
        cadre_sandbox::tether::watch_group(pid);
    }
    let tail = Arc::new(Mutex::new(StderrTail::default()));
    if let Some(stderr) = stderr {
        let tail = tail.clone();
        let name = cfg.name.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(server = %name, "{line}");
                if let Ok(mut t) = tail.lock() {
                    t.push(&line);
                }
            }
        });
    }
    let progress = handler.progress.clone();
    match handler.serve(transport).await {
        Ok(service) => Ok(Connection {
            service,
            progress,
            pid,
            stderr: tail,
        }),
        Err(e) => {
            let said = tail.lock().map(|t| t.summary()).unwrap_or_default();
            Err(ConnectError::Handshake {
                program,
                reason: e.to_string(),
                said: (!said.is_empty()).then_some(said),
            })
        }
    }
}

async fn connect_http(
    cfg: &ServerConfig,
    handler: Handler,
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<Connection, ConnectError> {
    let url = expand(&cfg.name, "url", url)?;
    let entry = |reason: String| ConnectError::Entry {
        server: cfg.name.clone(),
        reason,
    };
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let value = expand(&cfg.name, &format!("header {k}"), v)?;
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| entry(format!("`{k}` is not a valid header name")))?;
        let mut value = HeaderValue::from_str(&value)
            .map_err(|_| entry(format!("header {k} has a value that is not valid in HTTP")))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    let client = reqwest::Client::builder()
        .default_headers(map)
        .connect_timeout(cfg.startup_timeout)
        .user_agent(concat!("cadre/", env!("CARGO_PKG_VERSION")))
        .redirect(cadre_llm::redirects::same_origin_redirects())
        .build()
        .map_err(|e| entry(format!("HTTP client: {e}")))?;
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(url.clone()),
    );
    let progress = handler.progress.clone();
    let service = handler
        .serve(transport)
        .await
        .map_err(|e| ConnectError::Http {
            url: url.clone(),
            reason: e.to_string(),
        })?;
    Ok(Connection {
        service,
        progress,
        pid: None,
        stderr: Arc::new(Mutex::new(StderrTail::default())),
    })
}

/// Start the server of `cfg` and complete the MCP handshake, within its start-up timeout.
pub(crate) async fn connect(
    cfg: &ServerConfig,
    sandbox: Option<&cadre_sandbox::Sandbox>,
) -> Result<Connection, ConnectError> {
    let handler = Handler {
        progress: ProgressDispatcher::new(),
    };
    let start = async {
        match &cfg.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => connect_stdio(cfg, handler, sandbox, command, args, env, cwd.as_deref()).await,
            Transport::Http { url, headers } => connect_http(cfg, handler, url, headers).await,
        }
    };
    match tokio::time::timeout(cfg.startup_timeout, start).await {
        Ok(r) => r,
        Err(_) => Err(ConnectError::Timeout(cfg.startup_timeout)),
    }
}
