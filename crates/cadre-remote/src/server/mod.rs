//! `cadre serve`: an HTTP server that exposes a runtime's agents to remote callers over A2A
//! (JSON-RPC at `POST /` and `POST /a2a`, card at `GET /.well-known/agent-card.json`) and
//! over the task protocol (`/tasks`).
//!
//! Every served task is a foreground child of one server-side parent run, started through
//! the [`SubagentRuntime`], so it is an ordinary task of the runtime's tracker. Every request
//! must name this server as its `Host` and may carry only an allowed `Origin` (web pages are
//! kept out); requests other than the card need the bearer token when one is configured and
//! POSTs need a JSON body; connections, bodies, waits and running tasks are bounded.
//! `/healthz` and `/readyz` answer load balancers without a token. On shutdown the server
//! drains: not ready, new tasks refused, running tasks given a grace period; then durable
//! tasks are handed to other nodes through the store, the rest cancelled, and it stops
//! accepting.
//!
//! ```no_run
//! # async fn demo(runtime: std::sync::Arc<cadre_subagents::SubagentRuntime>) -> Result<(), cadre_remote::ServeError> {
//! use cadre_remote::{ServeOptions, Server};
//! let server = Server::new(runtime, "openai:gpt-4o-mini", ServeOptions::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! server.serve(listener, async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```

mod approval;
mod book;
mod guard;
mod health;
mod launch;
mod listen;
mod origin;
mod request_guard;
mod rpc;
mod sink;
mod slots;
mod state;
mod stream;
mod task_api;
mod trace;

use crate::a2a::card::CARD_PATH;
use axum::Router;
use axum::routing::{get, post};
use cadre_subagents::SubagentRuntime;
pub use request_guard::RequestGuard;
use state::State;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

pub use crate::a2a::parts::AnswerForm;
pub use approval::ApprovalPolicy;

/// How a served agent's answers reach an A2A caller (`[serve.agents.NAME]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnswerStyle {
    /// Whether the answer is text or spells A2A parts (default text).
    pub form: AnswerForm,
    /// Answer a blocking `SendMessage` whose task completed with a Message (the answer's
    /// parts, in the task's context) instead of the Task; streams, non-blocking sends and
    /// tasks that did not complete still get the task.
    pub message: bool,
}

/// Settings of the server.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The bearer token every request but the agent card must carry (`None`: no auth).
    pub token: Option<String>,
    /// Largest request body accepted (default 1 MiB); larger ones get 413.
    pub max_body_bytes: usize,
    /// Tasks running at once (default 64); more get 429 / a "busy" JSON-RPC error.
    pub max_concurrent_tasks: usize,
    /// Largest task input (the message text) accepted, in bytes (default 256 KiB); larger
    /// ones get 413 / an "invalid params" JSON-RPC error.
    pub max_input_bytes: usize,
    /// About how many bytes of caller-sent text (inputs, chosen ids) the server remembers
    /// for finished tasks, and again for idle A2A conversations (default 64 MiB); beyond
    /// that the oldest are forgotten.
    pub max_remembered_input_bytes: usize,
    /// How long running tasks may finish after a shutdown signal (default 10 s).
    pub grace: Duration,
    /// Budget of requests that do not wait for a task, body reading included (default 30 s).
    pub request_timeout: Duration,
    /// Longest wait of a blocking `SendMessage` or a `/wait` (default 300 s); the task keeps
    /// running after it.
    pub max_wait: Duration,
    /// The agent used when a request names none (default `general-purpose`, else the first).
    pub default_agent: Option<String>,
    /// The agents to expose (default: every agent of the registry).
    pub expose: Option<Vec<String>>,
    /// How approval requests are answered (default: [`ApprovalPolicy::Ask`] when a token is
    /// set, so only authenticated callers are asked, else [`ApprovalPolicy::Deny`]).
    pub approvals: Option<ApprovalPolicy>,
    /// How long an asked caller has to answer before the call is denied (default 300 s).
    pub approval_timeout: Duration,
    /// How each agent's answers are delivered over A2A (default: text, in a task).
    pub answers: std::collections::BTreeMap<String, AnswerStyle>,
    /// The name in the agent card.
    pub name: String,
    /// The version in the agent card.
    pub version: String,
    /// Origins (`scheme://host[:port]`) whose web pages may call the server; a request with
    /// any other `Origin` header gets 403 (default: none).
    pub allowed_origins: Vec<String>,
    /// Names the `Host` header may carry besides this server's own address and the loopback
    /// names (`name`: any port, or `name:port`), e.g. behind a reverse proxy (default: none).
    pub allowed_hosts: Vec<String>,
    /// A connection must send a complete request head within this long of opening or of
    /// finishing its previous exchange, else it is closed (default 15 s): this closes idle
    /// keep-alive connections and slow-header clients alike.
    pub idle_timeout: Duration,
    /// A connection that has not yet made an authenticated request (one carrying the
    /// token, or any complete request when no token is set) gets only this long (default
    /// 3 s) to send a complete request head after opening or after its previous exchange.
    pub unauthenticated_timeout: Duration,
    /// Connections open at once (default 512, never more than half the open-file limit).
    /// When none is free, an idle connection is closed to make room (unauthenticated ones
    /// first, the longest idle first); when every one is answering a request, later ones
    /// wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Connections open at once from one IP address (default: `max_connections`, so no cap
    /// of its own; at most `max_connections`). A peer at its cap sheds its own idle
    /// unauthenticated connections; otherwise its new connections wait for one of its slots.
    /// Off by default because a burst of one client's new connections cannot be told from
    /// silent ones before they are read, and all local clients share one address.
    pub max_connections_per_peer: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            token: None,
            max_body_bytes: 1024 * 1024,
            max_concurrent_tasks: 64,
            max_input_bytes: 256 * 1024,
            max_remembered_input_bytes: 64 * 1024 * 1024,
            grace: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_wait: Duration::from_secs(300),
            default_agent: None,
            expose: None,
            approvals: None,
            approval_timeout: Duration::from_secs(300),
            answers: Default::default(),
            name: "cadre".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            idle_timeout: Duration::from_secs(15),
            unauthenticated_timeout: Duration::from_secs(3),
            max_connections: 512,
            max_connections_per_peer: 512,
        }
    }
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Nothing to serve.
    #[error("no agents to serve (the registry is empty or `expose` matches none)")]
    NoAgents,
    /// `expose` or `default_agent` names an agent the registry lacks.
    #[error("unknown agent `{name}` in the serve settings; available: {available}")]
    UnknownAgent {
        /// The name.
        name: String,
        /// The registry's agents.
        available: String,
    },
    /// A setting is malformed.
    #[error("invalid serve.{key} entry `{value}`: {reason}")]
    InvalidSetting {
        /// The setting.
        key: &'static str,
        /// The entry.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Binding or serving failed.
    #[error("server I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// The server. Build with [`Server::new`], run with [`Server::serve`].
pub struct Server {
    state: Arc<State>,
}

impl Server {
    /// A server for `runtime`'s agents; `model` is the model spec children inherit.
    pub fn new(
        runtime: Arc<SubagentRuntime>,
        model: &str,
        opts: ServeOptions,
    ) -> Result<Self, ServeError> {
        Ok(Self {
            state: State::new(runtime, model, opts)?,
        })
    }

    /// The exposed agents, in registry order.
    pub fn agents(&self) -> Vec<String> {
        self.state.skills.iter().map(|s| s.name.clone()).collect()
    }

    /// The session id of the server-side parent run: every served task is its child, so
    /// `runtime.tasks_of(id)` lists them.
    pub fn session_id(&self) -> &str {
        &self.state.parent.run.session_id
    }

    /// Who answers the agents' approval requests (the setting, resolved).
    pub fn approvals(&self) -> ApprovalPolicy {
        self.state.approvals
    }

    /// The parent of tasks this server adopts from a lost node
    /// ([`SubagentRuntime::start_adopting`]): the server's own, answering approvals as for
    /// a task-protocol caller (nobody can be asked).
    pub fn adopting_parent(&self) -> cadre_subagents::Parent {
        self.state.parent_for(None)
    }

    /// The agent used when a request names none.
    pub fn default_agent(&self) -> &str {
        &self.state.default_agent
    }

    /// The HTTP routes (for embedding, or for tests that serve it themselves). Served by
    /// someone else, the server does not know its port, so the `Host` check accepts the
    /// loopback names on any port (and `allowed_hosts`).
    pub fn router(&self) -> Router {
        let protected = Router::new()
            .route("/", post(rpc::handle))
            .route("/a2a", post(rpc::handle))
            .route("/tasks", post(task_api::submit))
            .route("/tasks/{id}", get(task_api::get_task))
            .route("/tasks/{id}/wait", get(task_api::wait))
            .route("/tasks/{id}/cancel", post(task_api::cancel))
            .route_layer(axum::middleware::from_fn_with_state(
                self.state.clone(),
                guard::guard,
            ))
            .route_layer(axum::middleware::from_fn(trace::continue_caller));
        let mut app = Router::new()
            .route(CARD_PATH, get(rpc::card))
            .route("/healthz", get(health::healthz))
            .route("/readyz", get(health::readyz))
            .merge(protected);
        if let Some(cors) = self.state.site.cors() {
            app = app.layer(cors);
        }
        app.layer(axum::middleware::from_fn_with_state(
            self.state.clone(),
            origin::check,
        ))
        .with_state(self.state.clone())
    }

    /// Serve on `listener` until `shutdown` resolves; then drain: refuse new tasks (still
    /// answering everything else), let running tasks finish within the grace period, hand
    /// the durable ones still running to other nodes, cancel the rest, stop accepting and
    /// return once they have ended.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let state = self.state.clone();
        if let Ok(addr) = listener.local_addr() {
            state.set_local_addr(addr);
        }
        let stop_accepting = tokio_util::sync::CancellationToken::new();
        let stop = stop_accepting.clone();
        let app = self.router();
        let limits = listen::Limits {
            idle_timeout: state.opts.idle_timeout,
            unauthenticated_timeout: state.opts.unauthenticated_timeout,
            max_connections: state.opts.max_connections,
            max_connections_per_peer: state.opts.max_connections_per_peer,
            token: state.opts.token.as_deref().map(Arc::from),
        };
        let mut server = tokio::spawn(listen::serve(listener, app, limits, stop));
        let prober = AbortOnDrop(tokio::spawn(health::probe_loop(state.clone())));
        tokio::select! {
            ended = &mut server => {
                return match ended {
                    Ok(r) => r.map_err(ServeError::Io),
                    Err(e) => Err(ServeError::Io(std::io::Error::other(e.to_string()))),
                };
            }
            _ = shutdown => {}
        }
        let running = state.unfinished().len();
        tracing::info!(
            running,
            grace_secs = state.opts.grace.as_secs(),
            "draining: not ready, new tasks refused, running ones may finish"
        );
        // Still listening while draining: a load balancer's probe hears 503 at once, new
        // submissions get 503 with Retry-After (it sends them elsewhere), and callers of
        // running tasks can still follow them.
        state.draining.cancel();
        // Nobody will answer the questions now: deny them so their tasks can finish.
        for task in state.book.list() {
            task.gate.close();
        }
        if tokio::time::timeout(state.opts.grace, state.wait_idle())
            .await
            .is_err()
        {
            hand_over(&state).await;
            let left = state.unfinished().len();
            tracing::warn!(left, "grace period over: cancelling the remaining tasks");
            state.hard_stop.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(5), state.wait_idle()).await;
        }
        stop_accepting.cancel();
        drop(prober);
        // Connections still open (a stream whose client went quiet) get a short last chance.
        match tokio::time::timeout(Duration::from_secs(5), &mut server).await {
            Ok(Ok(r)) => r.map_err(ServeError::Io),
            Ok(Err(e)) => Err(ServeError::Io(std::io::Error::other(e.to_string()))),
            Err(_) => {
                server.abort();
                Ok(())
            }
        }
    }
}

/// At the end of the grace period: the durable tasks (`on_orphan = "resume"`) this process
/// still runs are released in the store, so another node adopts each at once from its
/// checkpoint; their cancellation here is then refused by the store (fenced), not recorded.
async fn hand_over(state: &State) {
    match state.runtime.store().release_owned().await {
        Ok(ids) if ids.is_empty() => {}
        Ok(ids) => tracing::info!(count = ids.len(), "handed over to other nodes: {ids:?}"),
        Err(e) => {
            tracing::warn!(error = %e, "store: cannot hand the running tasks over; they are adopted after the orphan timeout")
        }
    }
}

/// A spawned task that ends with its owner (the store probe ends with `serve`).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
