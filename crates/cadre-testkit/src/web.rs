//! [`WebServer`]: a plain local web server for the tools that reach the web (`web_fetch`, HTTP
//! search backends). It serves fixed pages by path, on `127.0.0.1` (random port), and records
//! what it was asked.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;

/// What the server answers on one path.
#[derive(Debug, Clone)]
pub struct WebPage {
    status: u16,
    headers: Vec<(String, String)>,
    body: Bytes,
}

impl WebPage {
    /// A `200` with this content type and body.
    pub fn new(content_type: &str, body: impl Into<Bytes>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into(),
        }
    }

    /// A `200` HTML page.
    pub fn html(body: impl Into<Bytes>) -> Self {
        Self::new("text/html; charset=utf-8", body)
    }

    /// A `200` JSON document.
    pub fn json(value: &serde_json::Value) -> Self {
        Self::new("application/json", value.to_string())
    }

    /// A `302` to `location` (absolute, or relative to the page).
    pub fn redirect(location: &str) -> Self {
        Self {
            status: 302,
            headers: vec![("location".into(), location.into())],
            body: Bytes::new(),
        }
    }

    /// A `200` with no `Content-Type` at all.
    pub fn untyped(body: impl Into<Bytes>) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// The same page with another status.
    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// The same page with one more header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct WebRequest {
    /// The path and query, e.g. `/search?q=rust`.
    pub path_and_query: String,
    /// The request headers.
    pub headers: HeaderMap,
}

impl WebRequest {
    /// A header's value as text, if present and valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

#[derive(Default)]
struct Shared {
    pages: Mutex<HashMap<String, WebPage>>,
    requests: Mutex<Vec<WebRequest>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running web server. Stops when dropped.
pub struct WebServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
}

impl std::fmt::Debug for WebServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebServer")
            .field("addr", &self.addr)
            .finish()
    }
}

async fn serve(State(shared): State<Arc<Shared>>, uri: Uri, headers: HeaderMap) -> Response {
    lock(&shared.requests).push(WebRequest {
        path_and_query: uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| uri.path().to_string()),
        headers,
    });
    let page = lock(&shared.pages).get(uri.path()).cloned();
    let page = page.unwrap_or_else(|| WebPage::new("text/plain", "no such page").status(404));
    let mut resp = Response::new(Body::from(page.body));
    *resp.status_mut() = StatusCode::from_u16(page.status).unwrap_or(StatusCode::OK);
    for (name, value) in &page.headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            resp.headers_mut().append(n, v);
        }
    }
    resp
}

impl WebServer {
    /// Start a server with no pages (every path answers `404`).
    pub async fn start() -> std::io::Result<WebServer> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let app = Router::new().fallback(serve).with_state(shared.clone());
        let (tx, mut rx) = watch::channel(false);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.wait_for(|s| *s).await;
                })
                .await;
        });
        Ok(WebServer {
            addr,
            shared,
            shutdown: tx,
        })
    }

    /// Serve `page` on `path` (matched exactly, query ignored), replacing any earlier one.
    pub fn page(&self, path: &str, page: WebPage) {
        lock(&self.shared.pages).insert(path.to_string(), page);
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The requests received so far, oldest first.
    pub fn requests(&self) -> Vec<WebRequest> {
        lock(&self.shared.requests).clone()
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}
