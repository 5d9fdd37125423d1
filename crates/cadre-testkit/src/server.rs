//! The mock model server: an axum app on `127.0.0.1` (random port) serving the OpenAI
//! (`/v1/chat/completions`, `/chat/completions`) and Anthropic (`/v1/messages`) endpoints
//! from queues of scripted replies, recording what it receives.

use crate::reply::{MockReply, ReplyBody, StreamEnd};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use axum::routing::post;
use axum::serve::ListenerExt;
use serde_json::Value;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Pending connections the listener queues (the kernel caps it at `net.core.somaxconn`).
const LISTEN_BACKLOG: u32 = 8192;

/// Which protocol a request used (by its path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/chat/completions` or `POST /chat/completions`.
    OpenAi,
    /// `POST /v1/messages`.
    Anthropic,
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// Which endpoint was called.
    pub api: Api,
    /// The request path, e.g. `/v1/messages`.
    pub path: String,
    /// The request headers.
    pub headers: HeaderMap,
    /// The body parsed as JSON (`Value::Null` when it is not JSON).
    pub body: Value,
    /// The body exactly as sent (for byte-level checks such as a stable prompt prefix).
    pub raw: Bytes,
    /// When the request arrived.
    pub received_at: Instant,
}

impl RecordedRequest {
    /// A header's value as text, if present and valid UTF-8 (name is case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// True when the body asks for a streamed reply (`"stream": true`).
    pub fn wants_stream(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
    }
}

/// Computes the reply for a request when its queue is empty. Called on the server's
/// tasks; keep it cheap for benchmarks.
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> MockReply + Send + Sync>;

struct Shared {
    openai: Mutex<VecDeque<MockReply>>,
    anthropic: Mutex<VecDeque<MockReply>>,
    responder: RwLock<Option<Responder>>,
    recording: AtomicBool,
    requests: Mutex<Vec<RecordedRequest>>,
    count: AtomicUsize,
    shutdown: watch::Receiver<bool>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running mock server. Stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl MockServer {
    /// Start a server that answers from the queues only; with an empty queue it answers
    /// `501` with a message saying no reply was scripted.
    pub async fn start() -> std::io::Result<MockServer> {
        Self::launch(None).await
    }

    /// Start a server that answers from the queues first and then from `responder`.
    pub async fn start_with(responder: Responder) -> std::io::Result<MockServer> {
        Self::launch(Some(responder)).await
    }

    async fn launch(responder: Option<Responder>) -> std::io::Result<MockServer> {
        // A deep accept queue: a fan-out opens thousands of connections at once, and the
        // default backlog (1024) overflows, so the kernel drops SYNs and resets connections.
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let listener = socket.listen(LISTEN_BACKLOG)?;
        let addr = listener.local_addr()?;
        let (tx, rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            openai: Mutex::new(VecDeque::new()),
            anthropic: Mutex::new(VecDeque::new()),
            responder: RwLock::new(responder),
            recording: AtomicBool::new(true),
            requests: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
            shutdown: rx.clone(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/chat/completions", post(handle))
            .route("/v1/messages", post(handle))
            // Real providers take large contexts; the fan-out benchmark's parent request with
            // 10 000 tool results is tens of MiB.
            .layer(axum::extract::DefaultBodyLimit::max(512 * 1024 * 1024))
            .with_state(shared.clone());
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let mut stop = rx;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await;
        });
        Ok(MockServer {
            addr,
            shared,
            shutdown: tx,
            task,
        })
    }

    /// `http://127.0.0.1:PORT` — the base for Anthropic clients, and for OpenAI clients
    /// that append `/chat/completions` (served too).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1` — the usual OpenAI base URL.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queue a reply for the next OpenAI-style request.
    pub fn push_openai(&self, reply: MockReply) {
        lock(&self.shared.openai).push_back(reply);
    }

    /// Queue a reply for the next Anthropic-style request.
    pub fn push_anthropic(&self, reply: MockReply) {
        lock(&self.shared.anthropic).push_back(reply);
    }

    /// Answer requests whose queue is empty with `responder` (replacing any previous one).
    pub fn set_responder(&self, responder: Responder) {
        if let Ok(mut r) = self.shared.responder.write() {
            *r = Some(responder);
        }
    }

    /// Answer requests whose queue is empty with a copy of `reply`.
    pub fn set_default_reply(&self, reply: MockReply) {
        self.set_responder(Arc::new(move |_| reply.clone()));
    }

    /// Keep (default) or stop keeping received requests; counting goes on either way.
    pub fn set_recording(&self, on: bool) {
        self.shared.recording.store(on, Ordering::Relaxed);
    }

    /// The requests received so far, oldest first (while recording was on).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Forget the recorded requests.
    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }

    /// How many requests arrived in total (recorded or not).
    pub fn request_count(&self) -> usize {
        self.shared.count.load(Ordering::Relaxed)
    }

    /// Scripted replies not used yet, as (OpenAI, Anthropic) queue lengths.
    pub fn pending_replies(&self) -> (usize, usize) {
        (
            lock(&self.shared.openai).len(),
            lock(&self.shared.anthropic).len(),
        )
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        self.task.abort();
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let api = if path == "/v1/messages" {
        Api::Anthropic
    } else {
        Api::OpenAi
    };
    let request = RecordedRequest {
        api,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        raw: body,
        path,
        headers,
        received_at: Instant::now(),
    };
    shared.count.fetch_add(1, Ordering::Relaxed);
    let queued = match api {
        Api::OpenAi => lock(&shared.openai).pop_front(),
        Api::Anthropic => lock(&shared.anthropic).pop_front(),
    };
    let reply = match queued {
        Some(r) => r,
        None => {
            let responder = shared.responder.read().ok().and_then(|r| r.clone());
            match responder {
                Some(f) => f(&request),
                None => MockReply::openai_error(
                    501,
                    &format!("cadre-testkit: no reply scripted for POST {}", request.path),
                    None,
                ),
            }
        }
    };
    let wants_stream = request.wants_stream();
    if shared.recording.load(Ordering::Relaxed) {
        lock(&shared.requests).push(request);
    }
    render(reply, wants_stream, shared.shutdown.clone()).await
}

/// Turn a reply into an HTTP response, applying its delay and stream faults.
async fn render(reply: MockReply, wants_stream: bool, shutdown: watch::Receiver<bool>) -> Response {
    let mut reply = reply;
    while let ReplyBody::ByStream { streaming, plain } = reply.body {
        reply = if wants_stream { *streaming } else { *plain };
    }
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let body = match reply.body {
        ReplyBody::Full(bytes) => Body::from(bytes),
        ReplyBody::Chunks { chunks, gap, end } => {
            Body::from_stream(frames(chunks, gap, end, shutdown))
        }
        ReplyBody::ByStream { .. } => Body::empty(),
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    for (name, value) in &reply.headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().insert(n, v);
        }
    }
    response
}

/// The frames of a chunked body, then its ending.
fn frames(
    chunks: Vec<Bytes>,
    gap: Duration,
    end: StreamEnd,
    shutdown: watch::Receiver<bool>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let last = chunks.last().cloned();
    let state = (chunks.into_iter(), gap, end, shutdown, 0usize, false);
    futures::stream::unfold(
        state,
        move |(mut it, gap, end, mut shutdown, sent, over)| {
            let last = last.clone();
            async move {
                if over {
                    return None;
                }
                let next = match (it.next(), end, last) {
                    (Some(chunk), _, _) => Some(chunk),
                    (None, StreamEnd::RepeatLast, Some(last)) => Some(last),
                    _ => None,
                };
                if let Some(chunk) = next {
                    if sent > 0 {
                        if gap.is_zero() {
                            // Returning Pending once makes hyper flush: each frame is its own write.
                            tokio::task::yield_now().await;
                        } else {
                            tokio::time::sleep(gap).await;
                        }
                    }
                    return Some((Ok(chunk), (it, gap, end, shutdown, sent + 1, false)));
                }
                match end {
                    StreamEnd::Finish => None,
                    StreamEnd::Cut => {
                        // Let the frames already written reach the client before the reset.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        let err = std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "cut");
                        Some((Err(err), (it, gap, end, shutdown, sent, true)))
                    }
                    StreamEnd::Stall | StreamEnd::RepeatLast => {
                        let _ = shutdown.wait_for(|s| *s).await;
                        let err = std::io::Error::other("server stopped");
                        Some((Err(err), (it, gap, end, shutdown, sent, true)))
                    }
                }
            }
        },
    )
}
