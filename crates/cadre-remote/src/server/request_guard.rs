//! The checks `cadre serve` makes before any handler runs — the `Host` names this server, a
//! web page's `Origin` is allowed, the bearer token is valid — packaged for cadre's other
//! HTTP surfaces (`cadre mcp serve --http`), so both refuse the same requests the same way.

use super::ServeError;
use super::guard::{authorized, unauthorized};
use super::origin::{SiteRules, refusal};
use axum::extract::Request;
use axum::response::Response;
use std::net::SocketAddr;

/// Host, Origin and bearer-token checks for one listening address.
#[derive(Debug, Clone)]
pub struct RequestGuard {
    site: SiteRules,
    token: Option<String>,
    bound: Option<SocketAddr>,
}

impl RequestGuard {
    /// Checks for a server bound to `bound` (`None`: not known; then only the loopback names
    /// pass the `Host` check), requiring `token` when given; `allowed_origins` and
    /// `allowed_hosts` as `[serve]` spells them.
    pub fn new(
        token: Option<String>,
        allowed_origins: &[String],
        allowed_hosts: &[String],
        bound: Option<SocketAddr>,
    ) -> Result<Self, ServeError> {
        Ok(Self {
            site: SiteRules::new(allowed_origins, allowed_hosts)?,
            token,
            bound,
        })
    }

    /// The answer refusing `req` (400/403 for the site checks, 401 without a valid token),
    /// or `None` when it may go on.
    pub fn refusal(&self, req: &Request) -> Option<Response> {
        if let Some(r) = refusal(&self.site, req, self.bound) {
            return Some(r);
        }
        match &self.token {
            Some(token) if !authorized(req.headers(), token) => {
                tracing::debug!(path = %req.uri().path(), "refused: no valid bearer token");
                Some(unauthorized())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn req(host: &str, origin: Option<&str>, token: Option<&str>) -> Request {
        let mut b = Request::builder().uri("/mcp").header("host", host);
        if let Some(o) = origin {
            b = b.header("origin", o);
        }
        if let Some(t) = token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        b.body(Body::empty()).unwrap()
    }

    fn status(g: &RequestGuard, r: &Request) -> u16 {
        g.refusal(r).map_or(200, |r| r.status().as_u16())
    }

    #[test]
    fn the_serve_checks_in_one_place() {
        let bound = "127.0.0.1:7000".parse().ok();
        let open = RequestGuard::new(None, &[], &[], bound).unwrap();
        assert_eq!(status(&open, &req("127.0.0.1:7000", None, None)), 200);
        assert_eq!(status(&open, &req("evil.example:7000", None, None)), 403);
        let page = Some("http://evil.example");
        assert_eq!(status(&open, &req("localhost:7000", page, None)), 403);
        let origins = ["http://localhost:3000".to_string()];
        let locked = RequestGuard::new(Some("s3cret".into()), &origins, &[], bound).unwrap();
        let ok_page = Some("http://localhost:3000");
        assert_eq!(status(&locked, &req("localhost:7000", ok_page, None)), 401);
        assert_eq!(
            status(&locked, &req("localhost:7000", ok_page, Some("s3cret"))),
            200
        );
        // The site checks come first: a foreign Host learns nothing about the token.
        assert_eq!(
            status(&locked, &req("evil.example:7000", None, Some("s3cret"))),
            403
        );
        assert!(RequestGuard::new(None, &["nope".to_string()], &[], bound).is_err());
    }
}
