//! The caller's trace continued: every request to the protected routes runs in a SERVER
//! span whose parent is the W3C `traceparent` it carried (with its `tracestate`), so the agents it starts hang under
//! the caller's span (in the caller's trace) in any backend both export to.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// Run the request in its span (see the module documentation).
pub(crate) async fn continue_caller(req: Request, next: Next) -> Response {
    let traceparent = header(&req, "traceparent");
    let tracestate = header(&req, "tracestate");
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("", MatchedPath::as_str)
        .to_string();
    let span = cadre_tools::otel::served(
        req.method().as_str(),
        &route,
        traceparent.as_deref(),
        tracestate.as_deref(),
    );
    next.run(req).instrument(span).await
}

/// Header `name` of `req` as text, when present and visible ASCII.
fn header(req: &Request, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
