//! The caller's trace continued: every request to the protected routes runs in a SERVER
//! span whose parent is the W3C `traceparent` it carried, so the agents it starts hang under
//! the caller's span (in the caller's trace) in any backend both export to.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// Run the request in its span (see the module documentation).
pub(crate) async fn continue_caller(req: Request, next: Next) -> Response {
    let traceparent = req
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("", MatchedPath::as_str)
        .to_string();
    let span = cadre_tools::otel::served(req.method().as_str(), &route, traceparent.as_deref());
    next.run(req).instrument(span).await
}
