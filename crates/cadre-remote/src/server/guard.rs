//! The middleware in front of every protected route: bearer-token check (constant time; the
//! token is never logged), a JSON `Content-Type` on every POST (a page can send `text/plain`
//! cross-site without asking the browser first; JSON needs a CORS preflight), the body size
//! limit and the time budget of requests that do not wait for a task.

use super::state::State;
use crate::jsonrpc::{self, ErrorKind, RpcError, RpcId};
use axum::body::Body;
use axum::extract::{Request, State as AxumState};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// A JSON error response `{"error": message}`.
pub(crate) fn error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({"error": message}))).into_response()
}

/// True when the `Authorization` header carries `token` as a bearer token.
pub(crate) fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some((scheme, given)) = value.trim().split_once(' ') else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return false;
    }
    // Lengths are not secret; the bytes are compared in constant time.
    bool::from(given.trim().as_bytes().ct_eq(token.as_bytes()))
}

pub(crate) fn unauthorized() -> Response {
    let mut r = error(
        StatusCode::UNAUTHORIZED,
        "unauthorized: a valid bearer token is required (Authorization: Bearer <token>)",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"cadre\""),
    );
    r
}

/// Whether a `Content-Type` value is JSON: `application/json` or `application/<x>+json`,
/// parameters (`; charset=utf-8`) allowed.
fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|sub| sub.ends_with("+json"))
}

/// The answer to a POST without a JSON body: for the JSON-RPC endpoint a JSON-RPC error
/// (A2A's ContentTypeNotSupported, id `null`: the body is not read), else `{"error"}`.
fn not_json(path: &str, content_type: Option<&str>) -> Response {
    let message = "POST bodies must be JSON: send Content-Type: application/json";
    if !is_rpc(path) {
        return error(StatusCode::UNSUPPORTED_MEDIA_TYPE, message);
    }
    let e = RpcError::new(ErrorKind::ContentTypeNotSupported, message)
        .with("contentType", content_type.unwrap_or(""));
    (
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        axum::Json(jsonrpc::failure(&RpcId::Null, &e)),
    )
        .into_response()
}

/// The JSON-RPC endpoint's paths.
fn is_rpc(path: &str) -> bool {
    path == "/" || path == "/a2a"
}

fn too_large(limit: usize) -> Response {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("request body is larger than {limit} bytes (serve.max_body_bytes)"),
    )
}

fn is_length_limit(e: &axum::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.to_string().contains("length limit") {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Requests whose handlers wait for tasks and bound the wait themselves.
fn waits(method: &Method, path: &str) -> bool {
    (method == Method::GET && path.ends_with("/wait")) || (method == Method::POST && is_rpc(path))
}

/// Auth, content type, body limit and time budget.
pub(crate) async fn guard(
    AxumState(state): AxumState<Arc<State>>,
    req: Request,
    next: Next,
) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if let Some(token) = &state.opts.token
        && !authorized(req.headers(), token)
    {
        tracing::debug!(%method, %path, "refused: no valid bearer token");
        return unauthorized();
    }
    if method == Method::POST {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if !content_type.is_some_and(is_json) {
            tracing::debug!(%method, %path, ?content_type, "refused: not a JSON body");
            return not_json(&path, content_type);
        }
    }
    let limit = state.opts.max_body_bytes;
    let budget = state.opts.request_timeout;
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large(limit);
    }
    let bytes = match tokio::time::timeout(budget, axum::body::to_bytes(body, limit)).await {
        Err(_) => {
            return error(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
            );
        }
        Ok(Err(e)) if is_length_limit(&e) => return too_large(limit),
        Ok(Err(_)) => return error(StatusCode::BAD_REQUEST, "cannot read the request body"),
        Ok(Ok(b)) => b,
    };
    tracing::debug!(%method, %path, bytes = bytes.len(), "request");
    let req = Request::from_parts(parts, Body::from(bytes));
    if waits(&method, &path) {
        return next.run(req).await;
    }
    match tokio::time::timeout(budget, next.run(req)).await {
        Ok(r) => r,
        Err(_) => {
            let mut r = error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the request took longer than serve.request_timeout_secs",
            );
            r.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(super::health::RETRY_AFTER_SECS),
            );
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_checked() {
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "s3cret"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret"),
        );
        assert!(authorized(&h, "s3cret"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer  s3cret "),
        );
        assert!(authorized(&h, "s3cret"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cre"),
        );
        assert!(!authorized(&h, "s3cret"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic s3cret"),
        );
        assert!(!authorized(&h, "s3cret"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("s3cret"));
        assert!(!authorized(&h, "s3cret"));
    }

    #[test]
    fn only_json_content_types_pass() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/a2a+json",
        ] {
            assert!(is_json(ok), "{ok}");
        }
        for bad in [
            "text/plain",
            "text/plain; charset=application/json",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
            "application/jsonx",
            "text/json+json",
            "",
        ] {
            assert!(!is_json(bad), "{bad}");
        }
    }
}
