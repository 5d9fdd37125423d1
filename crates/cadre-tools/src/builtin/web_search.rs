//! `web_search`: a web search through a backend the configuration names, never a built-in
//! service: an MCP server's search tool, or an HTTP search API (GET, a URL template with the
//! query, an API key from an environment variable). Without a backend the tool is not offered.

use crate::{
    PermissionSubject, Tool, ToolContext, ToolError, ToolInfo, ToolOutput, TypedTool, Workspace,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

/// The tool's name.
pub const WEB_SEARCH: &str = "web_search";

/// Results shown at most.
const MAX_RESULTS: usize = 10;
/// Characters of one snippet at most.
const MAX_SNIPPET_CHARS: usize = 500;
/// Bytes of a search response read at most.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// Characters of a query at most.
const MAX_QUERY_CHARS: usize = 1000;

const DESCRIPTION: &str = "Search the web. Returns the top results with title, URL and a \
snippet; read a result in full with web_fetch. Use it for facts that may be newer than what you \
know, documentation and error messages.";

/// `[tools.web_search]`: which backend answers searches.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchConfig {
    /// `mcp:<server>/<tool>` (that MCP tool does the search) or `http`.
    pub provider: String,
    /// For `mcp:`: the argument the MCP tool takes the query in (default `query`).
    #[serde(default)]
    pub query_arg: Option<String>,
    /// For `http`: the URL, with `{query}` where the query goes (URL-encoded) and optionally
    /// `{api_key}` where the key goes.
    #[serde(default)]
    pub url: Option<String>,
    /// For `http`: the environment variable holding the API key. When it is named but unset
    /// or empty, `web_search` is not offered.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// For `http`: the header that carries the key when the URL has no `{api_key}` (default
    /// `Authorization`, as `Bearer <key>`; any other header gets the bare key).
    #[serde(default)]
    pub api_key_header: Option<String>,
    /// For `http`: a JSON pointer to the list of results in the response (default: the
    /// response itself when it is a list, else its `results`).
    #[serde(default)]
    pub results: Option<String>,
}

/// Why a configured backend cannot be used; `web_search` is then not offered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebSearchSetupError {
    /// The configuration is malformed.
    #[error("[tools.web_search]: {0}")]
    Invalid(String),
    /// The API key's variable is unset or empty.
    #[error("[tools.web_search]: {0} is not set; web_search is not offered")]
    MissingKey(String),
    /// The MCP tool it names is not there.
    #[error("[tools.web_search]: the MCP tool {0} is not available; web_search is not offered")]
    MissingTool(String),
}

/// An MCP provider: the server and tool it names.
pub fn mcp_target(config: &WebSearchConfig) -> Option<(&str, &str)> {
    config.provider.strip_prefix("mcp:")?.split_once('/')
}

/// An HTTP search API.
#[derive(Debug, Clone)]
struct HttpBackend {
    url: String,
    key: Option<String>,
    key_header: String,
    results: Option<String>,
    client: reqwest::Client,
}

#[derive(Clone)]
enum Backend {
    Http(HttpBackend),
    /// Another tool (an MCP server's) that takes the query in `arg`.
    Tool {
        tool: Arc<dyn Tool>,
        arg: String,
    },
}

/// Searches the web through the configured backend.
#[derive(Clone)]
pub struct WebSearchTool {
    backend: Backend,
}

impl std::fmt::Debug for WebSearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.backend {
            Backend::Http(h) => format!("http {}", h.url),
            Backend::Tool { tool, .. } => format!("tool {}", tool.name()),
        };
        f.debug_struct("WebSearchTool")
            .field("backend", &kind)
            .finish()
    }
}

/// The arguments of `web_search`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// What to search for.
    #[schemars(length(min = 1, max = MAX_QUERY_CHARS))]
    query: String,
}

impl WebSearchTool {
    /// The tool for `config`. `find_tool` looks up the tool an `mcp:` provider names
    /// (`mcp__<server>__<tool>`); `env` reads the API key's variable.
    pub fn from_config(
        config: &WebSearchConfig,
        find_tool: impl Fn(&str) -> Option<Arc<dyn Tool>>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, WebSearchSetupError> {
        if let Some((server, tool)) = mcp_target(config) {
            let name = format!("mcp__{server}__{tool}");
            let tool = find_tool(&name).ok_or(WebSearchSetupError::MissingTool(name))?;
            let arg = config.query_arg.clone().unwrap_or_else(|| "query".into());
            return Ok(Self {
                backend: Backend::Tool { tool, arg },
            });
        }
        if config.provider != "http" {
            return Err(WebSearchSetupError::Invalid(format!(
                "provider `{}` is neither `mcp:<server>/<tool>` nor `http`",
                config.provider
            )));
        }
        let url = config
            .url
            .clone()
            .ok_or_else(|| WebSearchSetupError::Invalid("provider `http` needs `url`".into()))?;
        if !url.contains("{query}") {
            return Err(WebSearchSetupError::Invalid(format!(
                "`url` has no {{query}}: {url}"
            )));
        }
        let key = match &config.api_key_env {
            Some(var) => Some(
                env(var)
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| WebSearchSetupError::MissingKey(var.clone()))?,
            ),
            None => None,
        };
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .user_agent(concat!(
                "cadre/",
                env!("CARGO_PKG_VERSION"),
                " (web_search)"
            ))
            .build()
            .map_err(|e| WebSearchSetupError::Invalid(format!("HTTP client: {e}")))?;
        Ok(Self {
            backend: Backend::Http(HttpBackend {
                url,
                key,
                key_header: config
                    .api_key_header
                    .clone()
                    .unwrap_or_else(|| "Authorization".into()),
                results: config.results.clone(),
                client,
            }),
        })
    }
}

/// `s` percent-encoded for a URL's query.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The first string among `keys` of a result object.
fn field<'a>(item: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| item.get(*k).and_then(Value::as_str))
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The results of a response as a numbered list; `None` when it has no list where expected.
fn render_results(body: &Value, pointer: Option<&str>) -> Option<String> {
    let list = match pointer {
        Some(p) => body.pointer(p)?,
        None if body.is_array() => body,
        None => body.get("results")?,
    }
    .as_array()?;
    if list.is_empty() {
        return Some("No results.".into());
    }
    let mut out = String::new();
    for (i, item) in list.iter().take(MAX_RESULTS).enumerate() {
        let title = field(item, &["title", "name"]).unwrap_or("(untitled)");
        out.push_str(&format!("{}. {title}\n", i + 1));
        if let Some(url) = field(item, &["url", "link", "href"]) {
            out.push_str(&format!("   {url}\n"));
        }
        if let Some(snippet) = field(item, &["description", "snippet", "content", "text", "body"]) {
            let cut: String = snippet.chars().take(MAX_SNIPPET_CHARS).collect();
            out.push_str(&format!("   {}\n", cut.replace('\n', " ")));
        }
    }
    Some(out.trim_end().to_string())
}

impl HttpBackend {
    async fn search(&self, query: &str) -> Result<ToolOutput, ToolError> {
        let mut url = self.url.replace("{query}", &encode(query));
        let mut req_key = None;
        if let Some(key) = &self.key {
            if url.contains("{api_key}") {
                url = url.replace("{api_key}", &encode(key));
            } else {
                req_key = Some(key);
            }
        }
        let mut req = self.client.get(&url);
        if let Some(key) = req_key {
            req = if self.key_header.eq_ignore_ascii_case("authorization") {
                req.bearer_auth(key)
            } else {
                req.header(self.key_header.as_str(), key.as_str())
            };
        }
        // The key is in the URL or a header: errors name the host, never the URL.
        let host = self.url.split('/').nth(2).unwrap_or("the search API");
        let failed = |e: reqwest::Error| {
            ToolError::Failed(format!(
                "the search API at {host} failed: {}",
                e.without_url()
            ))
        };
        let mut resp = req.send().await.map_err(failed)?;
        let status = resp.status();
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(failed)? {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Ok(ToolOutput::error(format!(
                    "the search API at {host} sent more than {MAX_RESPONSE_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let excerpt: String = text.chars().take(500).collect();
            return Ok(ToolOutput::error(format!(
                "the search API at {host} answered {status}: {excerpt}"
            )));
        }
        let parsed: Value = serde_json::from_str(&text).map_err(|e| {
            ToolError::Failed(format!("the search API at {host} sent no JSON: {e}"))
        })?;
        Ok(match render_results(&parsed, self.results.as_deref()) {
            Some(list) => ToolOutput::ok(list),
            // No list where one was expected: the response as it came.
            None => ToolOutput::ok(text.into_owned()),
        })
    }
}

impl TypedTool for WebSearchTool {
    const INFO: ToolInfo = ToolInfo::builtin(WEB_SEARCH)
        .read_only()
        .titled(&["query"])
        .foreign_names(&["WebSearch", "websearch", "google_web_search"]);
    type Args = Args;

    fn description(&self) -> Cow<'_, str> {
        DESCRIPTION.into()
    }

    fn uses_network(&self) -> bool {
        true
    }

    fn permission_subject(
        &self,
        Args { query }: &Args,
        _workspace: &Workspace,
    ) -> Result<PermissionSubject, ToolError> {
        Ok(PermissionSubject::Text(query.trim().to_string()))
    }

    async fn run(&self, Args { query }: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = query.trim();
        if query.is_empty() {
            return Err(ToolError::InvalidArgs("the query is empty".into()));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(ToolError::InvalidArgs(format!(
                "the query is longer than {MAX_QUERY_CHARS} characters"
            )));
        }
        match &self.backend {
            Backend::Http(h) => tokio::select! {
                _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
                r = h.search(query) => r,
            },
            Backend::Tool { tool, arg } => {
                let mut args = serde_json::Map::new();
                args.insert(arg.clone(), Value::String(query.to_string()));
                tool.call(Value::Object(args), ctx).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_are_found_and_listed() {
        let brave = json!({"web": {"results": [
            {"title": "Rust", "url": "https://rust-lang.org", "description": "A language"},
            {"title": "Crates", "url": "https://crates.io"}
        ]}});
        assert_eq!(
            render_results(&brave, Some("/web/results")).unwrap(),
            "1. Rust\n   https://rust-lang.org\n   A language\n2. Crates\n   https://crates.io"
        );
        let searx = json!({"results": [{"title": "T", "url": "u", "content": "c\nd"}]});
        assert_eq!(render_results(&searx, None).unwrap(), "1. T\n   u\n   c d");
        assert_eq!(render_results(&json!([]), None).unwrap(), "No results.");
        assert_eq!(render_results(&json!({"x": 1}), None), None);
        assert_eq!(encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn setup_needs_a_backend_and_its_key() {
        let cfg = |provider: &str, url: Option<&str>, key: Option<&str>| WebSearchConfig {
            provider: provider.into(),
            query_arg: None,
            url: url.map(str::to_string),
            api_key_env: key.map(str::to_string),
            api_key_header: None,
            results: None,
        };
        let none = |_: &str| None;
        let err =
            |c: WebSearchConfig| WebSearchTool::from_config(&c, none, |_: &str| None).unwrap_err();
        assert!(matches!(
            err(cfg("bing", None, None)),
            WebSearchSetupError::Invalid(_)
        ));
        assert!(matches!(
            err(cfg("http", Some("https://s.example/?q=x"), None)),
            WebSearchSetupError::Invalid(_)
        ));
        assert_eq!(
            err(cfg(
                "http",
                Some("https://s.example/?q={query}"),
                Some("KEY")
            )),
            WebSearchSetupError::MissingKey("KEY".into())
        );
        assert_eq!(
            err(cfg("mcp:brave/search", None, None)),
            WebSearchSetupError::MissingTool("mcp__brave__search".into())
        );
        let ok = WebSearchTool::from_config(
            &cfg("http", Some("https://s.example/?q={query}"), Some("KEY")),
            none,
            |_: &str| Some("k".into()),
        );
        assert!(ok.is_ok());
    }
}
