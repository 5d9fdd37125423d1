//! Keeps web pages out of the server. A browser adds an `Origin` header to the cross-site
//! requests a page makes, so one whose origin is not in `allowed_origins` gets 403; a page
//! that rebinds its own DNS name to this machine sends that name as `Host`, so a `Host`
//! that does not name this server gets 403 too. Both apply to every request, with or
//! without a token, before anything else runs. Allowed origins get CORS answers (preflight
//! included), since a page can use the server only with them.

use super::ServeError;
use super::guard::error;
use super::state::State;
use axum::extract::{Request, State as AxumState};
use axum::http::uri::Authority;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

/// Names that always mean this machine.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// One `allowed_hosts` entry: a name, with or without a port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostRule {
    /// Lowercase; IPv6 literals keep their brackets.
    name: String,
    /// `None`: any port.
    port: Option<u16>,
}

/// The allowed origins and extra host names, checked once when the server is built.
#[derive(Debug, Clone, Default)]
pub(crate) struct SiteRules {
    /// Lowercase `scheme://host[:port]`.
    origins: Vec<String>,
    hosts: Vec<HostRule>,
}

fn invalid(key: &'static str, value: &str, reason: &str) -> ServeError {
    ServeError::InvalidSetting {
        key,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// `scheme://host[:port]` in lowercase, as browsers send it, or why not.
fn normalise_origin(raw: &str) -> Result<String, &'static str> {
    let s = raw.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, rest) = s
        .split_once("://")
        .ok_or("an origin is scheme://host[:port]")?;
    if !matches!(scheme, "http" | "https") {
        return Err("the scheme must be http or https");
    }
    let authority: Authority = rest
        .parse()
        .map_err(|_| "an origin is scheme://host[:port], with no path")?;
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return Err("an origin is scheme://host[:port], with no user part");
    }
    Ok(s)
}

fn host_rule(raw: &str) -> Result<HostRule, &'static str> {
    let authority: Authority = raw
        .trim()
        .parse()
        .map_err(|_| "a host is name or name:port")?;
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return Err("a host is name or name:port");
    }
    Ok(HostRule {
        name: authority.host().to_ascii_lowercase(),
        port: authority.port_u16(),
    })
}

impl SiteRules {
    /// Parse `allowed_origins` and `allowed_hosts`; a malformed entry is an error.
    pub(crate) fn new(origins: &[String], hosts: &[String]) -> Result<Self, ServeError> {
        let origins = origins
            .iter()
            .map(|o| normalise_origin(o).map_err(|r| invalid("allowed_origins", o, r)))
            .collect::<Result<_, _>>()?;
        let hosts = hosts
            .iter()
            .map(|h| host_rule(h).map_err(|r| invalid("allowed_hosts", h, r)))
            .collect::<Result<_, _>>()?;
        Ok(Self { origins, hosts })
    }

    /// Whether a page of `origin` may call the server.
    pub(crate) fn origin_allowed(&self, origin: &[u8]) -> bool {
        self.origins
            .iter()
            .any(|o| o.as_bytes().eq_ignore_ascii_case(origin))
    }

    /// Whether `host` (a `Host` header or a request target's authority) names this server,
    /// bound to `bound` (`None`: not known, the router is served by someone else).
    ///
    /// Allowed: `localhost`, `127.0.0.1` and `[::1]` with the bound port; the bound IP with
    /// its port; when bound to an unspecified address (`0.0.0.0`, `[::]`), any IP literal
    /// with the port (a rebinding page always sends a DNS name); and the `allowed_hosts`.
    pub(crate) fn host_allowed(&self, host: &str, bound: Option<SocketAddr>) -> bool {
        let Ok(authority) = host.parse::<Authority>() else {
            return false;
        };
        if authority.as_str().contains('@') {
            return false;
        }
        let name = authority.host().to_ascii_lowercase();
        let port = authority.port_u16();
        if self
            .hosts
            .iter()
            .any(|r| r.name == name && (r.port.is_none() || r.port == port))
        {
            return true;
        }
        let loopback = LOOPBACK_NAMES.contains(&name.as_str());
        let Some(bound) = bound else {
            return loopback;
        };
        if port.unwrap_or(80) != bound.port() {
            return false;
        }
        if loopback {
            return true;
        }
        let Ok(ip) = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        else {
            return false;
        };
        bound.ip().is_unspecified() || ip == bound.ip()
    }

    /// The CORS layer answering pages of the allowed origins (`None` when there are none).
    pub(crate) fn cors(&self) -> Option<CorsLayer> {
        if self.origins.is_empty() {
            return None;
        }
        let rules = self.clone();
        Some(
            CorsLayer::new()
                .allow_origin(AllowOrigin::predicate(move |o: &HeaderValue, _| {
                    rules.origin_allowed(o.as_bytes())
                }))
                .allow_methods([Method::GET, Method::POST])
                .allow_headers(AllowHeaders::mirror_request())
                .max_age(Duration::from_secs(600)),
        )
    }
}

/// Why a request must not reach a handler (`Host` not naming this server, bound to
/// `bound`; `Origin` of a page not allowed), as the answer to send; `None` when it may.
pub(crate) fn refusal(
    rules: &SiteRules,
    req: &Request,
    bound: Option<SocketAddr>,
) -> Option<Response> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    let Some(host) = host else {
        return Some(error(
            StatusCode::BAD_REQUEST,
            "a Host header naming this server is required",
        ));
    };
    // An absolute request target (`POST http://name/ HTTP/1.1`) names the host too.
    let target = req.uri().authority().map(Authority::as_str);
    if !rules.host_allowed(host, bound) || target.is_some_and(|t| !rules.host_allowed(t, bound)) {
        tracing::debug!(host, "refused: the Host does not name this server");
        return Some(error(
            StatusCode::FORBIDDEN,
            "forbidden: the Host header does not name this server (serve.allowed_hosts)",
        ));
    }
    if let Some(origin) = req.headers().get(header::ORIGIN)
        && !rules.origin_allowed(origin.as_bytes())
    {
        tracing::debug!(origin = ?origin, "refused: origin not allowed");
        return Some(error(
            StatusCode::FORBIDDEN,
            "forbidden: requests from web pages of this origin are not allowed (serve.allowed_origins)",
        ));
    }
    None
}

/// The middleware in front of every route.
pub(crate) async fn check(
    AxumState(state): AxumState<Arc<State>>,
    req: Request,
    next: Next,
) -> Response {
    match refusal(&state.site, &req, state.local_addr()) {
        Some(refused) => refused,
        None => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(origins: &[&str], hosts: &[&str]) -> SiteRules {
        let o: Vec<String> = origins
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        let h: Vec<String> = hosts.iter().map(std::string::ToString::to_string).collect();
        SiteRules::new(&o, &h).unwrap()
    }

    #[test]
    fn hosts_must_name_this_server() {
        let r = rules(&[], &["cadre.example.com", "proxy.lan:9000"]);
        let lo: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let lan: SocketAddr = "192.168.1.5:8080".parse().unwrap();
        let table: &[(&str, SocketAddr, bool)] = &[
            ("127.0.0.1:8080", lo, true),
            ("localhost:8080", lo, true),
            ("LOCALHOST:8080", lo, true),
            ("[::1]:8080", lo, true),
            ("localhost", lo, false),
            ("localhost:8081", lo, false),
            ("evil.example:8080", lo, false),
            ("localhost.evil.example:8080", lo, false),
            ("user@localhost:8080", lo, false),
            ("", lo, false),
            ("192.168.1.5:8080", lo, false),
            ("192.168.1.5:8080", lan, true),
            ("192.168.1.6:8080", lan, false),
            ("10.0.0.7:8080", any, true),
            ("[fe80::1]:8080", any, true),
            ("10.0.0.7:9090", any, false),
            ("my-laptop:8080", any, false),
            ("cadre.example.com", any, true),
            ("cadre.example.com:443", lo, true),
            ("proxy.lan:9000", lo, true),
            ("proxy.lan:9001", lo, false),
        ];
        for (host, bound, want) in table {
            assert_eq!(
                r.host_allowed(host, Some(*bound)),
                *want,
                "{host} on {bound}"
            );
        }
        let port80: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(r.host_allowed("localhost", Some(port80)));
        // Served by someone else: loopback names on any port.
        assert!(r.host_allowed("127.0.0.1:1234", None));
        assert!(!r.host_allowed("evil.example:1234", None));
    }

    #[test]
    fn origins_match_exactly() {
        let r = rules(&["https://App.Example.com/", "http://localhost:3000"], &[]);
        assert!(r.origin_allowed(b"https://app.example.com"));
        assert!(r.origin_allowed(b"http://localhost:3000"));
        assert!(!r.origin_allowed(b"http://app.example.com"));
        assert!(!r.origin_allowed(b"https://app.example.com.evil.example"));
        assert!(!r.origin_allowed(b"null"));
        assert!(!rules(&[], &[]).origin_allowed(b"http://localhost:3000"));
    }

    #[test]
    fn malformed_settings_are_refused() {
        for bad in ["app.example.com", "ftp://x", "https://a/b", "https://u@a"] {
            let e = SiteRules::new(&[bad.to_string()], &[]).unwrap_err();
            assert!(e.to_string().contains("allowed_origins"), "{bad}: {e}");
        }
        for bad in ["", "a b", "x:y:z"] {
            assert!(SiteRules::new(&[], &[bad.to_string()]).is_err(), "{bad}");
        }
    }
}
