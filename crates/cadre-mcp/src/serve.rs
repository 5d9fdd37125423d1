//! `cadre mcp serve`: cadre's sub-agent runtime as MCP tools. The delegation tools the parent
//! model gets (`task`, `agent_spawn`, `agent_send`, `agent_list`, `agent_close`,
//! `task_output`, `task_cancel`, `task_list`) are offered with the same schemas and called as they are, so
//! replies are the same too. Each MCP session is one parent session of the runtime (its
//! tasks and live children are its own, and go into the task store); a call's children
//! report progress as `notifications/progress` on the call's token, and the client's
//! `notifications/cancelled` fires the call's cancellation token, which stops the child.

use cadre_subagents::SubagentRuntime;
use cadre_tools::{ApprovalHandler, RunContext, Tool, ToolContext, Workspace};
use cadre_types::{Event, EventEnvelope, EventSink, UpdateKind, new_session_id};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, Content, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ServerCapabilities,
    ServerInfo, Tool as McpToolInfo,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use tokio::sync::{mpsc, oneshot};

/// Progress notifications queued per call; more are dropped (the client sees the result).
const PROGRESS_QUEUE: usize = 64;
/// Characters of a child's tool arguments or result shown in a progress message.
const PROGRESS_TEXT_CHARS: usize = 200;

/// What every session of the server shares.
pub struct ServeContext {
    /// The runtime whose delegation tools are served. Held weakly: the runtime owns the
    /// tools, and the tools hold the runtime.
    pub runtime: Weak<SubagentRuntime>,
    /// Where children work.
    pub workspace: Arc<Workspace>,
    /// The model children inherit.
    pub model: String,
    /// Who answers children's approval requests (nobody can be asked over MCP).
    pub approvals: Arc<dyn ApprovalHandler>,
    /// The agent name recorded as the tasks' parent.
    pub parent_agent: String,
}

/// One MCP session: a handler per connection (stdio) or per HTTP session.
#[derive(Clone)]
pub struct McpSession {
    shared: Arc<ServeContext>,
    session_id: String,
    trace_id: String,
}

impl McpSession {
    /// A new session (a new parent session id in the runtime).
    pub fn new(shared: Arc<ServeContext>) -> Self {
        let session_id = new_session_id();
        let trace_id = session_id.replacen("s-", "", 1);
        Self {
            shared,
            session_id,
            trace_id,
        }
    }

    /// The runtime session id of this MCP session's parent.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        match self.shared.runtime.upgrade() {
            Some(rt) => rt.delegation_tools().iter().cloned().collect(),
            None => Vec::new(),
        }
    }
}

/// The MCP view of a cadre tool: name, description and input schema as the model sees them.
fn info(tool: &dyn Tool) -> McpToolInfo {
    let def = tool.definition();
    let schema = match def.parameters {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    McpToolInfo {
        name: def.name.into(),
        title: None,
        description: Some(def.description.into()),
        input_schema: Arc::new(schema),
        output_schema: None,
        annotations: None,
        execution: None,
        icons: None,
        meta: None,
    }
}

/// Turns the events of one call's children into progress notifications on its token.
struct ProgressSink {
    tx: mpsc::Sender<String>,
    /// Set when the call has answered: later events belong to no request.
    done: AtomicBool,
}

fn cut(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c == '\n' { ' ' } else { c })
        .take(PROGRESS_TEXT_CHARS)
        .collect();
    if text.chars().count() > PROGRESS_TEXT_CHARS {
        format!("{one_line}…")
    } else {
        one_line
    }
}

/// The progress message of an event, if it is worth one (streamed text is not).
fn progress_message(event: &Event) -> Option<String> {
    match event {
        Event::SubagentUpdate { update } => {
            let agent = &update.agent;
            let tool = update.tool.as_deref().unwrap_or("?");
            Some(match update.kind {
                UpdateKind::Start => format!("[{agent}] started"),
                UpdateKind::Resumed => format!("[{agent}] {}", cut(&update.text)),
                UpdateKind::ToolStart => format!(
                    "[{agent}] ▸ {tool}({})",
                    cadre_subagents::call_title(tool, &update.text, PROGRESS_TEXT_CHARS)
                ),
                UpdateKind::ToolResult => format!("[{agent}] ◂ {tool}: {}", cut(&update.text)),
                UpdateKind::Done => format!("[{agent}] done"),
                UpdateKind::Error => format!("[{agent}] error: {}", cut(&update.text)),
                UpdateKind::Cancelled => format!("[{agent}] cancelled"),
                UpdateKind::Compaction => format!("[{agent}] compacted: {}", cut(&update.text)),
                UpdateKind::Delta | UpdateKind::Thinking => return None,
            })
        }
        Event::Notice { message } => Some(cut(message)),
        _ => None,
    }
}

impl EventSink for ProgressSink {
    fn emit(&self, env: EventEnvelope) {
        if self.done.load(Ordering::Relaxed) {
            return;
        }
        if let Some(m) = progress_message(&env.event) {
            let _ = self.tx.try_send(m);
        }
    }
}

/// Send queued progress messages as notifications until `stop` fires; then send what is
/// still queued (so every update precedes the result) and end.
async fn forward_progress(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut rx: mpsc::Receiver<String>,
    stop: oneshot::Receiver<()>,
) {
    let mut n: u64 = 0;
    let send = |n: u64, message: String| {
        let peer = peer.clone();
        let token = token.clone();
        async move {
            let _ = peer
                .notify_progress(ProgressNotificationParam {
                    progress_token: token,
                    progress: n as f64,
                    total: None,
                    message: Some(message),
                })
                .await;
        }
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            m = rx.recv() => match m {
                Some(message) => {
                    n += 1;
                    send(n, message).await;
                }
                None => return,
            },
            _ = &mut stop => break,
        }
    }
    while let Ok(message) = rx.try_recv() {
        n += 1;
        send(n, message).await;
    }
}

impl ServerHandler for McpSession {
    fn get_info(&self) -> ServerInfo {
        ServerInfo {
            protocol_version: Default::default(),
            capabilities: ServerCapabilities::builder().enable_tools().build(),
            server_info: Implementation {
                name: "cadre".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                ..Implementation::default()
            },
            instructions: Some(
                "cadre's sub-agents: `task` runs one and returns its answer; `agent_spawn` and `agent_send` keep one for several messages; `task_output`, `task_list` and `task_cancel` follow background work.".into(),
            ),
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult {
            meta: None,
            next_cursor: None,
            tools: self.tools().iter().map(|t| info(t.as_ref())).collect(),
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(runtime) = self.shared.runtime.upgrade() else {
            return Err(ErrorData::internal_error("cadre is shutting down", None));
        };
        let tools = self.tools();
        let Some(tool) = tools.iter().find(|t| t.name() == request.name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {}", request.name),
                None,
            ));
        };
        let (tx, rx) = mpsc::channel(PROGRESS_QUEUE);
        let sink = Arc::new(ProgressSink {
            tx,
            done: AtomicBool::new(false),
        });
        let (stop, stopped) = oneshot::channel();
        let forwarder = context
            .meta
            .get_progress_token()
            .map(|token| tokio::spawn(forward_progress(context.peer.clone(), token, rx, stopped)));
        let run = Arc::new(RunContext {
            session_id: self.session_id.clone(),
            agent: self.shared.parent_agent.clone(),
            model: self.shared.model.clone(),
            task_id: None,
            user_id: None,
            parent_session_id: None,
            depth: 0,
            tool_grant: cadre_tools::ToolGrant::unrestricted(),
            budget: cadre_tools::Budget::unlimited(),
            trace_id: self.trace_id.clone(),
            events: sink.clone(),
            approvals: self.shared.approvals.clone(),
        });
        let ctx = ToolContext {
            call_id: format!("mcp-{}", context.id),
            workspace: self.shared.workspace.clone(),
            cancel: context.ct.clone(),
            run,
            // Children narrow from the main agent's tools, as for `cadre serve`.
            tools: Arc::new(runtime.top_level_tools()),
            // The delegation tools read no files; each child hides what its own rules deny.
            hidden: Default::default(),
        };
        let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let out = tool.call(args, &ctx).await;
        // Later events (of background children) belong to no request.
        sink.done.store(true, Ordering::Relaxed);
        let _ = stop.send(());
        if let Some(f) = forwarder {
            let _ = f.await;
        }
        Ok(match out {
            Ok(o) if o.is_error => CallToolResult::error(vec![Content::text(o.content)]),
            Ok(o) => CallToolResult::success(vec![Content::text(o.content)]),
            Err(e) => CallToolResult::error(vec![Content::text(e.to_string())]),
        })
    }
}

/// Serve one MCP session over this process's stdin and stdout until the client closes it.
pub async fn serve_stdio(shared: Arc<ServeContext>) -> std::io::Result<()> {
    use rmcp::ServiceExt;
    let session = McpSession::new(shared);
    let (transport, writing) =
        crate::stdio::LineTransport::new(tokio::io::stdin(), tokio::io::stdout());
    let running = session
        .serve(transport)
        .await
        .map_err(|e| std::io::Error::other(format!("MCP handshake on stdio failed: {e}")))?;
    let ended = running.waiting().await;
    // The transport is gone with the session: let the writer put out what is queued.
    let _ = writing.await;
    ended.map_err(|e| std::io::Error::other(format!("MCP session ended abnormally: {e}")))?;
    Ok(())
}

/// A POST body that is not JSON gets `400` with a JSON-RPC `-32700` reply (a line nested
/// deeper than the parser's 128 levels is not JSON either); the session is untouched. The
/// server library would otherwise answer with a plain-text error no JSON-RPC client reads.
async fn refuse_unparsable(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    // The body limit layer outside this one bounds what is buffered here; reading fails
    // when the body goes past it (or the client goes away, and then reads no answer).
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return axum::http::StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    if let Err(e) = serde_json::from_slice::<serde_json::Value>(&bytes) {
        let reply = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": -32700, "message": format!("Parse error: {e}")},
        });
        return (axum::http::StatusCode::BAD_REQUEST, axum::Json(reply)).into_response();
    }
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}

/// The streamable HTTP endpoint `/mcp` (one MCP session per HTTP session), behind `guard`
/// (the Host, Origin and bearer-token checks of `cadre serve`) and a body limit.
pub fn http_router(
    shared: Arc<ServeContext>,
    guard: cadre_remote::RequestGuard,
    max_body_bytes: usize,
) -> axum::Router {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let service = StreamableHttpService::new(
        move || Ok(McpSession::new(shared.clone())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let guard = Arc::new(guard);
    axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(refuse_unparsable))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            max_body_bytes,
        ))
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let guard = guard.clone();
                async move {
                    match guard.refusal(&req) {
                        Some(refused) => refused,
                        None => next.run(req).await,
                    }
                }
            },
        ))
}
