//! MCP server configuration in the two formats users already have: Claude Code's
//! `.mcp.json` (`{"mcpServers": {NAME: {...}}}`) and Codex's `[mcp_servers.NAME]` tables,
//! read into one [`ServerConfig`]. Values stay as written (with their `${VAR}` references)
//! until a server is started, so secrets are expanded only into the process or request that
//! needs them.

use cadre_tools::SecretEnv;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default time a server gets to start and answer `initialize` and `tools/list`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time one tool call may take.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// One server entry as written, in either format. Unknown keys are errors, so a typo is
/// reported instead of silently ignored.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// `stdio`, `http` (also `streamable-http`, `streamable_http`) or `sse` (refused: the
    /// legacy transport is not supported). Inferred from `command` / `url` when absent.
    #[serde(rename = "type", alias = "transport")]
    pub kind: Option<String>,
    /// The program of a stdio server.
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for it (values may use `${VAR}`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory (relative to the workspace).
    pub cwd: Option<String>,
    /// The endpoint of a streamable HTTP server.
    pub url: Option<String>,
    /// Headers sent to it (values may use `${VAR}`).
    #[serde(default, alias = "http_headers")]
    pub headers: BTreeMap<String, String>,
    /// Codex: the variable holding a bearer token for an HTTP server.
    pub bearer_token_env_var: Option<String>,
    /// Seconds the server gets to start (default 30).
    #[serde(alias = "startup_timeout_sec")]
    pub startup_timeout_secs: Option<f64>,
    /// Seconds one tool call may take (default 120).
    #[serde(alias = "tool_timeout_sec")]
    pub tool_timeout_secs: Option<f64>,
    /// `false` keeps the entry but does not start the server.
    pub enabled: Option<bool>,
    /// Only these tools of the server are offered.
    pub enabled_tools: Option<Vec<String>>,
    /// These tools of the server are never offered.
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    /// `lazy` (default): start on the first call, or `eager`: start with the session.
    pub startup: Option<String>,
    /// Run a stdio server in cadre's OS sandbox: a mode name or `{mode, network,
    /// writable_roots}`, resolved against the workspace (default: unsandboxed).
    pub sandbox: Option<cadre_sandbox::SandboxSpec>,
}

/// When a server starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Startup {
    /// On its first call; with the session only while cadre has not seen its tools yet
    /// (they must be in the model's first request).
    #[default]
    Lazy,
    /// With the session.
    Eager,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC over stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to its environment.
        env: BTreeMap<String, String>,
        /// Its working directory.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
}

/// A server, ready to be started.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The name it was configured under.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// Where it was configured (a file, or `agent NAME` for a definition's inline server).
    pub origin: String,
    /// Time to start.
    pub startup_timeout: Duration,
    /// Time per call.
    pub tool_timeout: Duration,
    /// Whether it is started at all.
    pub enabled: bool,
    /// Tools offered (all when `None`).
    pub enabled_tools: Option<Vec<String>>,
    /// Tools never offered.
    pub disabled_tools: Vec<String>,
    /// When it starts.
    pub startup: Startup,
    /// cadre's secrets, removed from a stdio server's environment (its own `env` may set
    /// them again explicitly).
    pub secrets: SecretEnv,
    /// The sandbox a stdio server runs in (none: unsandboxed).
    pub sandbox: Option<cadre_sandbox::SandboxPolicy>,
    /// Locations a sandboxed stdio server may read but never write, even inside its
    /// writable roots (cadre's configuration, definitions, git metadata): by default the
    /// protected roots of the workspace, as for `bash`.
    pub protected: Vec<PathBuf>,
}

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server {server} ({origin}): {message}")]
pub struct ConfigError {
    /// The server's name.
    pub server: String,
    /// Where it was configured.
    pub origin: String,
    /// What is wrong.
    pub message: String,
}

fn secs(v: Option<f64>, default: Duration) -> Duration {
    match v {
        Some(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s.min(86_400.0)),
        _ => default,
    }
}

impl ServerEntry {
    /// The usable configuration of server `name`, resolving `cwd` against `workspace`.
    pub fn resolve(
        &self,
        name: &str,
        origin: &str,
        workspace: &Path,
    ) -> Result<ServerConfig, ConfigError> {
        let err = |message: String| ConfigError {
            server: name.to_string(),
            origin: origin.to_string(),
            message,
        };
        let kind = match (self.kind.as_deref(), &self.command, &self.url) {
            (Some(k), _, _) => k.to_ascii_lowercase(),
            (None, Some(_), None) => "stdio".into(),
            (None, None, Some(_)) => "http".into(),
            (None, Some(_), Some(_)) => {
                return Err(err("has both `command` and `url`; give one".into()));
            }
            (None, None, None) => {
                return Err(err(
                    "needs `command` (stdio) or `url` (streamable HTTP)".into()
                ));
            }
        };
        let transport = match kind.as_str() {
            "stdio" => {
                let command = self
                    .command
                    .clone()
                    .filter(|c| !c.trim().is_empty())
                    .ok_or_else(|| err("a stdio server needs `command`".into()))?;
                Transport::Stdio {
                    command,
                    args: self.args.clone(),
                    env: self.env.clone(),
                    cwd: self.cwd.as_ref().map(|c| workspace.join(c)),
                }
            }
            "http" | "streamable-http" | "streamable_http" | "streamablehttp" => {
                let url = self
                    .url
                    .clone()
                    .filter(|u| !u.trim().is_empty())
                    .ok_or_else(|| err("an HTTP server needs `url`".into()))?;
                let mut headers = self.headers.clone();
                if let Some(var) = &self.bearer_token_env_var {
                    headers.insert("Authorization".into(), format!("Bearer ${{{var}}}"));
                }
                Transport::Http { url, headers }
            }
            "sse" => {
                return Err(err(
                    "the legacy SSE transport is not supported; use the server's streamable HTTP endpoint (`type = \"http\"`)".into(),
                ));
            }
            other => return Err(err(format!("unknown transport type `{other}`"))),
        };
        let startup = match self.startup.as_deref() {
            None | Some("lazy") => Startup::Lazy,
            Some("eager") => Startup::Eager,
            Some(other) => {
                return Err(err(format!(
                    "unknown startup `{other}`; use \"lazy\" or \"eager\""
                )));
            }
        };
        Ok(ServerConfig {
            name: name.to_string(),
            transport,
            origin: origin.to_string(),
            startup_timeout: secs(self.startup_timeout_secs, DEFAULT_STARTUP_TIMEOUT),
            tool_timeout: secs(self.tool_timeout_secs, DEFAULT_TOOL_TIMEOUT),
            enabled: self.enabled.unwrap_or(true),
            enabled_tools: self.enabled_tools.clone(),
            disabled_tools: self.disabled_tools.clone(),
            startup,
            secrets: SecretEnv::default(),
            sandbox: self
                .sandbox
                .as_ref()
                .map(|s| cadre_sandbox::SandboxPolicy::resolve(s, workspace))
                .filter(|p| !p.is_off()),
            protected: cadre_tools::protected_roots(workspace),
        })
    }

    /// The variables this entry takes credentials from, which no other process cadre starts
    /// may inherit: every `${VAR}` of its `headers`, its `bearer_token_env_var`, and each
    /// `${VAR}` of an `env` value where the variable set or the one referenced looks like a
    /// credential ([`cadre_types::process_env::looks_secret`]; `PATH = "${PATH}"` is none).
    pub fn secret_vars(&self) -> Vec<String> {
        use cadre_types::env_ref::referenced_names;
        use cadre_types::process_env::looks_secret;
        let headers = self.headers.values().flat_map(|v| referenced_names(v));
        let env = self.env.iter().flat_map(|(k, v)| {
            referenced_names(v)
                .into_iter()
                .filter(move |name| looks_secret(k) || looks_secret(name))
        });
        let mut out: Vec<String> = headers
            .chain(env)
            .chain(self.bearer_token_env_var.as_deref())
            .filter(|name| !name.is_empty())
            .map(str::to_string)
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// The `.mcp.json` file of a workspace.
#[derive(Debug, Deserialize)]
struct McpJson {
    #[serde(default, rename = "mcpServers")]
    mcp_servers: BTreeMap<String, serde_json::Value>,
}

/// Servers of `<workspace>/.mcp.json`, each entry parsed on its own: a bad entry is an error
/// in the list and the others still load. A missing file is no servers.
pub fn load_mcp_json(workspace: &Path) -> (Vec<(String, ServerEntry, String)>, Vec<ConfigError>) {
    let path = workspace.join(".mcp.json");
    let origin = path.display().to_string();
    let mut errors = Vec::new();
    let text = match cadre_tools::read_to_string_capped(&path, 1 << 20) {
        Ok(t) => t,
        Err(e) if e.is_not_found() => return (Vec::new(), errors),
        Err(e) => {
            errors.push(ConfigError {
                server: "*".into(),
                origin,
                message: format!("cannot read the file: {e}"),
            });
            return (Vec::new(), errors);
        }
    };
    let file: McpJson = match serde_json::from_str(&text) {
        Ok(f) => f,
        Err(e) => {
            errors.push(ConfigError {
                server: "*".into(),
                origin,
                message: format!("not valid JSON in Claude Code's format: {e}"),
            });
            return (Vec::new(), errors);
        }
    };
    let mut out = Vec::new();
    for (name, value) in file.mcp_servers {
        match serde_json::from_value::<ServerEntry>(value) {
            Ok(entry) => out.push((name, entry, origin.clone())),
            Err(e) => errors.push(ConfigError {
                server: name,
                origin: origin.clone(),
                message: e.to_string(),
            }),
        }
    }
    (out, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_and_codex_entries_resolve_alike() {
        let ws = Path::new("/ws");
        let json: ServerEntry = serde_json::from_str(
            r#"{"command": "npx", "args": ["-y", "srv"], "env": {"K": "${K}"}}"#,
        )
        .unwrap();
        let toml_entry: ServerEntry =
            toml::from_str("command = \"npx\"\nargs = [\"-y\", \"srv\"]\nenv = { K = \"${K}\" }\n")
                .unwrap();
        assert_eq!(json, toml_entry);
        let c = json.resolve("s", "f", ws).unwrap();
        assert!(matches!(c.transport, Transport::Stdio { ref command, .. } if command == "npx"));
        assert_eq!(c.tool_timeout, DEFAULT_TOOL_TIMEOUT);

        let http: ServerEntry = toml::from_str(
            "url = \"http://h/mcp\"\nbearer_token_env_var = \"TOK\"\ntool_timeout_sec = 5\n[http_headers]\nX = \"1\"\n",
        )
        .unwrap();
        let c = http.resolve("h", "f", ws).unwrap();
        let Transport::Http { headers, .. } = &c.transport else {
            panic!("{c:?}")
        };
        assert_eq!(headers["Authorization"], "Bearer ${TOK}");
        assert_eq!(headers["X"], "1");
        assert_eq!(c.tool_timeout, Duration::from_secs(5));
    }

    #[test]
    fn the_variables_credentials_come_from_are_secret_and_plain_ones_are_not() {
        let entry: ServerEntry = serde_json::from_str(
            r#"{"command": "srv", "args": ["${HOME}/x"],
                "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GH_PAT}", "PATH": "${PATH}",
                        "BASE": "${BASE_URL}", "K": "pre-${MY_API_KEY}-post"},
                "headers": {"X-Auth": "${HDR} and $NOT_A_REF"},
                "bearer_token_env_var": "BEARER"}"#,
        )
        .unwrap();
        assert_eq!(
            entry.secret_vars(),
            ["BEARER", "GH_PAT", "HDR", "MY_API_KEY"]
        );
        assert!(ServerEntry::default().secret_vars().is_empty());
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        let ws = Path::new("/ws");
        let e = ServerEntry::default().resolve("x", "f", ws).unwrap_err();
        assert!(e.to_string().contains("needs `command`"), "{e}");
        let sse: ServerEntry = serde_json::from_str(r#"{"type":"sse","url":"http://h"}"#).unwrap();
        assert!(
            sse.resolve("x", "f", ws)
                .unwrap_err()
                .message
                .contains("SSE")
        );
        assert!(serde_json::from_str::<ServerEntry>(r#"{"comand":"x"}"#).is_err());
    }

    #[test]
    fn mcp_json_loads_good_entries_and_reports_bad_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".mcp.json"),
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"bogus": 1}}}"#,
        )
        .unwrap();
        let (ok, errs) = load_mcp_json(dir.path());
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].0, "a");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].server, "b");
        let (none, errs) = load_mcp_json(&dir.path().join("missing"));
        assert!(none.is_empty() && errs.is_empty());
    }
}
