//! One bounded GET: only `http`/`https`, every hop's address checked (IP literals here, names
//! by the guarded resolver), redirects followed by hand up to a limit, and the body read up
//! to a byte cap. No proxy, so the check applies to the connection actually made.

use super::address::{AddressPolicy, AddressRefused, GuardedResolver};
use super::content::{Kind, declared_kind, media_type};
use reqwest::header::{CONTENT_TYPE, LOCATION};
use reqwest::{Client, StatusCode, Url};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// The bounds of a fetch.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Redirects followed at most.
    pub max_redirects: usize,
    /// Body bytes read at most; the rest is not downloaded.
    pub max_bytes: usize,
    /// Time to connect to one host.
    pub connect_timeout: Duration,
}

/// A fetched body, read up to the cap.
#[derive(Debug)]
pub struct Fetched {
    /// The URL the body came from (after redirects).
    pub url: Url,
    /// The final status.
    pub status: StatusCode,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body, at most `max_bytes`.
    pub body: Vec<u8>,
    /// True when the body was longer than the cap.
    pub truncated: bool,
}

/// Why a fetch failed, in words for the model.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Not an absolute http(s) URL.
    #[error("{0}")]
    BadUrl(String),
    /// The address is not allowed.
    #[error(transparent)]
    Refused(#[from] AddressRefused),
    /// More redirects than allowed.
    #[error("more than {0} redirects")]
    TooManyRedirects(usize),
    /// The server declared a type that is not text.
    #[error("{0}")]
    Binary(String),
    /// Connecting, sending or reading failed.
    #[error("{0}")]
    Http(String),
}

/// A client whose every connection goes through the address check.
pub fn client(
    policy: AddressPolicy,
    limits: &Limits,
    pinned: &[(String, SocketAddr)],
) -> Result<Client, reqwest::Error> {
    let mut b = Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(limits.connect_timeout)
        .dns_resolver(Arc::new(GuardedResolver(policy)))
        .user_agent(concat!("cadre/", env!("CARGO_PKG_VERSION"), " (web_fetch)"));
    for (host, addr) in pinned {
        b = b.resolve(host, *addr);
    }
    b.build()
}

/// Parse and check a URL the model gave (or a redirect named).
pub fn checked_url(
    raw: &str,
    base: Option<&Url>,
    policy: AddressPolicy,
) -> Result<Url, FetchError> {
    let url = match base {
        Some(b) => b.join(raw),
        None => Url::parse(raw),
    }
    .map_err(|e| FetchError::BadUrl(format!("`{raw}` is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FetchError::BadUrl(format!(
            "`{url}`: only http and https URLs are fetched"
        )));
    }
    let host = url
        .host_str()
        .ok_or_else(|| FetchError::BadUrl(format!("`{url}` has no host")))?;
    // A name is checked on what it resolves to, when it is connected to; an address is
    // checked here, since no resolver sees it. `url` has normalised every spelling
    // (`0x7f.1`, `2130706433`, `[::ffff:7f00:1]`) to the address it means.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        policy.check(host, ip)?;
    }
    Ok(url)
}

/// The address refusal somewhere in an error's sources, if that is why it failed.
fn refusal(err: &reqwest::Error) -> Option<&AddressRefused> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(r) = e.downcast_ref::<AddressRefused>() {
            return Some(r);
        }
        source = e.source();
    }
    None
}

fn http_error(url: &Url, err: &reqwest::Error) -> FetchError {
    match refusal(err) {
        Some(r) => FetchError::Refused(AddressRefused {
            host: r.host.clone(),
            addr: r.addr,
            kind: r.kind,
        }),
        None => {
            let mut text = format!("fetching {url} failed: {err}");
            let mut source = std::error::Error::source(err);
            while let Some(e) = source {
                text.push_str(&format!(": {e}"));
                source = e.source();
            }
            FetchError::Http(text)
        }
    }
}

/// GET `url`, following redirects, refusing binary types before their body is read.
pub async fn fetch(
    client: &Client,
    url: Url,
    policy: AddressPolicy,
    limits: &Limits,
) -> Result<Fetched, FetchError> {
    let mut url = url;
    let mut redirects = 0;
    let mut resp = loop {
        let resp = client
            .get(url.clone())
            .send()
            .await
            .map_err(|e| http_error(&url, &e))?;
        if !resp.status().is_redirection() {
            break resp;
        }
        let Some(location) = resp.headers().get(LOCATION) else {
            break resp;
        };
        if redirects == limits.max_redirects {
            return Err(FetchError::TooManyRedirects(limits.max_redirects));
        }
        redirects += 1;
        let location = location.to_str().map_err(|_| {
            FetchError::BadUrl(format!("{url} redirects to a Location that is not text"))
        })?;
        url = checked_url(location, Some(&url), policy)?;
    };
    let content_type = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let media = content_type.as_deref().map(media_type).unwrap_or_default();
    if declared_kind(&media) == Some(Kind::Binary) {
        return Err(FetchError::Binary(format!(
            "{url} is {media}, not text; web_fetch returns text, JSON and HTML only"
        )));
    }
    let status = resp.status();
    let mut body = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = resp.chunk().await.map_err(|e| http_error(&url, &e))? {
        let room = limits.max_bytes - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Fetched {
        url,
        status,
        content_type,
        body,
        truncated,
    })
}
