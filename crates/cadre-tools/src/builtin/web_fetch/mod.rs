//! `web_fetch`: GET a web page as text. HTML comes back as Markdown, JSON and text as they
//! are; binary types are refused. Every connection, redirects included, is checked on the
//! address it reaches (no loopback, link-local or private addresses unless allowed), and
//! the fetch is bounded in redirects, bytes and time. Large results go through the
//! engine's offload like any tool output.

mod address;
mod content;
mod fetch;

pub use address::AddressRefused;

use crate::{
    PermissionSubject, ToolContext, ToolError, ToolInfo, ToolOutput, TypedTool, Workspace,
};
use address::AddressPolicy;
use content::Kind;
use fetch::{FetchError, Fetched, Limits};
use schemars::JsonSchema;
use serde::Deserialize;
use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

/// The tool's name.
pub const WEB_FETCH: &str = "web_fetch";

/// Characters of an error page shown with its status.
const ERROR_BODY_CHARS: usize = 2000;

const DESCRIPTION: &str = "Fetch a web page or document by URL (http or https) and read it as \
text: HTML is converted to Markdown, JSON and plain text come back as they are, images and \
other binary files are refused. Give `prompt` to say what you are looking for; it is kept with \
the page, which you then read yourself. Pages on private, loopback and link-local addresses are \
not reachable. Large pages are saved to a file you can read in parts.";

/// The bounds and address policy of [`WebFetchTool`].
#[derive(Debug, Clone)]
pub struct WebFetchConfig {
    /// Reach loopback, link-local and private addresses too (`[tools]
    /// web_fetch_allow_private`). Off by default: a page must not be a way into the
    /// machine's or the network's internal services.
    pub allow_private: bool,
    /// Body bytes downloaded at most (5 MiB); the rest is never read.
    pub max_bytes: usize,
    /// Redirects followed at most (5).
    pub max_redirects: usize,
    /// Time for the whole fetch, redirects included (30 s).
    pub timeout: Duration,
    /// Time to connect to one host (10 s).
    pub connect_timeout: Duration,
    /// Host names resolved to a fixed address, without DNS and without the address check,
    /// like hosts-file entries whoever builds the tool vouches for.
    pub pinned_hosts: Vec<(String, SocketAddr)>,
}

impl Default for WebFetchConfig {
    fn default() -> Self {
        Self {
            allow_private: false,
            max_bytes: 5 * 1024 * 1024,
            max_redirects: 5,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            pinned_hosts: Vec::new(),
        }
    }
}

/// Fetches web pages as text.
#[derive(Debug, Default)]
pub struct WebFetchTool {
    config: WebFetchConfig,
    client: OnceLock<reqwest::Client>,
}

/// The arguments of `web_fetch`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The http or https URL.
    url: String,
    /// What you want from the page (optional).
    #[serde(default)]
    prompt: Option<String>,
}

impl WebFetchTool {
    /// A tool with these bounds and policy.
    pub fn new(config: WebFetchConfig) -> Self {
        Self {
            config,
            client: OnceLock::new(),
        }
    }

    fn policy(&self) -> AddressPolicy {
        AddressPolicy {
            allow_private: self.config.allow_private,
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            max_redirects: self.config.max_redirects,
            max_bytes: self.config.max_bytes,
            connect_timeout: self.config.connect_timeout,
        }
    }

    /// The client, built on first use (building it loads the TLS roots).
    fn client(&self) -> Result<&reqwest::Client, ToolError> {
        if let Some(c) = self.client.get() {
            return Ok(c);
        }
        let built = fetch::client(self.policy(), &self.limits(), &self.config.pinned_hosts)
            .map_err(|e| ToolError::Failed(format!("cannot set up the HTTP client: {e}")))?;
        Ok(self.client.get_or_init(|| built))
    }
}

/// The page as the model reads it: where it came from, then its text.
async fn render(page: Fetched, prompt: Option<&str>, cap: usize) -> Result<ToolOutput, ToolError> {
    let media = page
        .content_type
        .as_deref()
        .map(content::media_type)
        .unwrap_or_default();
    let kind = content::declared_kind(&media).unwrap_or_else(|| content::sniffed_kind(&page.body));
    if kind == Kind::Binary {
        return Ok(ToolOutput::error(format!(
            "{} is binary data, not text; web_fetch returns text, JSON and HTML only",
            page.url
        )));
    }
    let raw = String::from_utf8_lossy(&page.body).into_owned();
    let text = if kind == Kind::Html {
        // The converter's DOM is not `Send`; a large page takes a while to walk.
        tokio::task::spawn_blocking(move || content::html_to_markdown(&raw))
            .await
            .map_err(|e| ToolError::Failed(format!("converting the page failed: {e}")))?
            .map_err(|e| ToolError::Failed(format!("converting the page failed: {e}")))?
    } else {
        raw
    };
    let shown_type = if media.is_empty() { "unknown" } else { &media };
    if !page.status.is_success() {
        let excerpt: String = text.chars().take(ERROR_BODY_CHARS).collect();
        return Ok(ToolOutput::error(format!(
            "HTTP {} from {}\n\n{excerpt}",
            page.status, page.url
        )));
    }
    let mut out = format!("URL: {}\nContent-Type: {shown_type}", page.url);
    if kind == Kind::Html {
        out.push_str(" (converted to Markdown)");
    }
    if page.truncated {
        out.push_str(&format!(
            "\nTruncated: the body is larger than {cap} bytes; only the first {cap} were read."
        ));
    }
    if let Some(p) = prompt.map(str::trim).filter(|p| !p.is_empty()) {
        out.push_str(&format!("\nLooking for: {p}"));
    }
    out.push_str("\n\n");
    out.push_str(&text);
    Ok(ToolOutput::ok(out))
}

impl TypedTool for WebFetchTool {
    const INFO: ToolInfo = ToolInfo::builtin(WEB_FETCH)
        .read_only()
        .titled(&["url"])
        .foreign_names(&["WebFetch", "webfetch"]);
    type Args = Args;

    fn description(&self) -> Cow<'_, str> {
        DESCRIPTION.into()
    }

    /// It changes nothing; approvals treat it as a read. The sandbox sees
    /// [`uses_network`](TypedTool::uses_network).
    fn uses_network(&self) -> bool {
        true
    }

    /// The URL as parsed (scheme and host normalised), so `web_fetch(https://docs.rs/*)`
    /// rules match what is fetched, not how it was spelled.
    fn permission_subject(
        &self,
        Args { url, .. }: &Args,
        _workspace: &Workspace,
    ) -> Result<PermissionSubject, ToolError> {
        let url = reqwest::Url::parse(url.trim())
            .map_err(|e| ToolError::InvalidArgs(format!("`{url}` is not a URL: {e}")))?;
        Ok(PermissionSubject::Text(url.to_string()))
    }

    async fn run(
        &self,
        Args { url, prompt }: Args,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let policy = self.policy();
        let url = match fetch::checked_url(url.trim(), None, policy) {
            Ok(u) => u,
            Err(e) => return Ok(ToolOutput::error(e.to_string())),
        };
        let client = self.client()?;
        let limits = self.limits();
        let fetching = tokio::time::timeout(
            self.config.timeout,
            fetch::fetch(client, url.clone(), policy, &limits),
        );
        let fetched = tokio::select! {
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            r = fetching => r,
        };
        match fetched {
            Err(_) => Ok(ToolOutput::error(format!(
                "fetching {url} took longer than {} s",
                self.config.timeout.as_secs()
            ))),
            Ok(Err(e @ (FetchError::Refused(_) | FetchError::BadUrl(_)))) => {
                Ok(ToolOutput::error(format!("refused: {e}")))
            }
            Ok(Err(e)) => Ok(ToolOutput::error(e.to_string())),
            Ok(Ok(page)) => render(page, prompt.as_deref(), self.config.max_bytes).await,
        }
    }
}
