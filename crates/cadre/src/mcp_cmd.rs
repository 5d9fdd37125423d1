//! `cadre mcp list` and `cadre mcp serve`, and the MCP servers of a workspace as
//! configured: `.mcp.json` (Claude Code's format) and `[mcp_servers.NAME]` of the
//! configuration files (Codex's format), where the configuration wins for a name both define.

use crate::cli::{Cli, McpCommand};
use crate::config::{self, Config, ServeApprovals};
use crate::serve_cmd;
use crate::setup::{Overrides, Setup, workspace_root};
use crate::stdout::out;
use anyhow::{Context, Result, bail};
use cadre_engine::NonInteractiveApprovals;
use cadre_mcp::ServeContext;
use cadre_mcp::{McpServers, Transport};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// The server entries configured for `ws` as `(name, entry, origin)`, and the errors of
/// `.mcp.json`: its entries, minus those the configuration redefines, then the
/// configuration's.
pub fn configured_entries(
    ws: &Path,
    config: &Config,
) -> (
    Vec<(String, cadre_mcp::ServerEntry, String)>,
    Vec<cadre_mcp::ConfigError>,
) {
    let (from_json, json_errors) = cadre_mcp::load_mcp_json(ws);
    let mut entries: Vec<(String, cadre_mcp::ServerEntry, String)> = from_json
        .into_iter()
        .filter(|(name, _, _)| !config.mcp_servers.contains_key(name))
        .collect();
    for (name, entry) in &config.mcp_servers {
        let origin = config
            .mcp_origins
            .get(name)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "configuration".into());
        entries.push((name.clone(), entry.clone(), origin));
    }
    (entries, json_errors)
}

/// The servers configured for `ws`, not started; their processes never see the secrets
/// of `secrets` (cadre's, see [`crate::secrets::child_secrets`]) unless their own `env`
/// sets them, and those with a `sandbox` go through `launcher`.
pub fn configured_servers(
    ws: &Path,
    config: &Config,
    secrets: &cadre_tools::SecretEnv,
    launcher: Option<Arc<cadre_sandbox::Launcher>>,
) -> McpServers {
    let (entries, json_errors) = configured_entries(ws, config);
    // Sandboxed servers keep the configured protected paths too, not only the built-in ones.
    let protected = crate::setup::file_access(ws, config).protected_roots(ws);
    let servers = McpServers::from_entries_with(entries, ws, secrets, launcher, protected);
    for e in json_errors.iter().chain(servers.errors()) {
        eprintln!("cadre: warning: skipped {e}");
    }
    servers
}

/// The configured servers of `ws` for a session, those it needs at once started
/// (`startup = "eager"`, or tools not seen yet; the others start on their first call); each
/// that fails is a warning naming it. Their processes start without `secrets`; those with a
/// `sandbox` go through `launcher`.
pub async fn start_servers(
    ws: &Path,
    config: &Config,
    secrets: &cadre_tools::SecretEnv,
    launcher: Option<Arc<cadre_sandbox::Launcher>>,
) -> McpServers {
    let servers = configured_servers(ws, config, secrets, launcher);
    for failure in servers.start_session().await {
        eprintln!("cadre: warning: {failure}");
    }
    servers
}

fn transport_text(t: &Transport) -> String {
    match t {
        Transport::Stdio { command, args, .. } => {
            let mut s = format!("stdio: {command}");
            for a in args {
                s.push(' ');
                s.push_str(a);
            }
            s
        }
        Transport::Http { url, .. } => format!("http: {}", cadre_store::redact_url(url)),
    }
}

async fn list(cli: &Cli, json: bool) -> Result<ExitCode> {
    let ws = workspace_root(cli)?;
    let config = config::load(&ws, cli.config.as_deref())?;
    let launcher = crate::setup::launcher(&config.sandbox)?;
    let secrets = crate::secrets::child_secrets(&ws, &config);
    let servers = configured_servers(&ws, &config, &secrets, Some(launcher));
    for failure in servers.start_all().await {
        eprintln!("cadre: warning: {failure}");
    }
    let mut rows = Vec::new();
    for s in servers.servers() {
        let state = s.state().await;
        let offer = s.offer();
        let tools: Vec<String> = cadre_mcp::tools_of(s)
            .iter()
            .map(|t| t.name().to_string())
            .collect();
        let prompts: Vec<String> = offer.prompts.iter().map(|p| p.name.clone()).collect();
        rows.push(serde_json::json!({
            "name": s.name(),
            "source": s.config().origin,
            "transport": transport_text(&s.config().transport),
            "state": state.to_string(),
            "tools": tools,
            "resources": offer.resources.len(),
            "prompts": prompts,
        }));
    }
    servers.stop_all().await;
    if json {
        out!("{}", serde_json::to_string_pretty(&rows)?)?;
    } else if rows.is_empty() {
        out!("no MCP servers configured (.mcp.json or [mcp_servers.NAME] in .cadre/config.toml)")?;
    } else {
        for r in &rows {
            out!(
                "{}  [{}]",
                r["name"].as_str().unwrap_or(""),
                r["state"].as_str().unwrap_or("")
            )?;
            out!("  source:    {}", r["source"].as_str().unwrap_or(""))?;
            out!("  transport: {}", r["transport"].as_str().unwrap_or(""))?;
            let join = |v: &serde_json::Value| {
                v.as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default()
            };
            out!("  tools:     {}", join(&r["tools"]))?;
            if r["resources"].as_u64().unwrap_or(0) > 0 {
                out!("  resources: {}", r["resources"])?;
            }
            if r["prompts"].as_array().is_some_and(|a| !a.is_empty()) {
                out!("  prompts:   {}", join(&r["prompts"]))?;
            }
        }
    }
    // A server that did not start makes the listing exit 1, for scripts.
    let failed = rows
        .iter()
        .any(|r| r["state"].as_str().is_some_and(|s| s.starts_with("failed")));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `cadre mcp serve`: the runtime's delegation tools to an MCP client.
async fn serve(cli: &Cli, http: Option<&str>) -> Result<ExitCode> {
    let ws = workspace_root(cli)?;
    let cfg = config::load(&ws, cli.config.as_deref())?.serve;
    let setup = Setup::new(cli, &Overrides::default()).await?;
    let h = &setup.harness;
    let approvals = NonInteractiveApprovals::new(cfg.approvals == Some(ServeApprovals::Approve));
    let shared = Arc::new(ServeContext {
        runtime: Arc::downgrade(h.runtime()),
        workspace: Arc::new(
            h.open_workspace()
                .with_context(|| format!("workspace {}", h.workspace().display()))?,
        ),
        model: h.agent().config().model.spec.clone(),
        approvals: Arc::new(approvals),
        parent_agent: "mcp".into(),
    });
    let Some(addr) = http else {
        cadre_mcp::serve_stdio(shared).await?;
        h.runtime().shutdown();
        return Ok(ExitCode::SUCCESS);
    };
    let addr = serve_cmd::resolve(addr).await?;
    let (token, token_source) = serve_cmd::token(&cfg);
    if token.is_none() && !addr.ip().is_loopback() {
        bail!(
            "refusing to serve MCP on {addr} without a bearer token: set {token_source} (or serve.token), or listen on a loopback address"
        );
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    let auth = match &token {
        Some(_) => format!("bearer token from {token_source}"),
        None => format!("none (set {token_source} to require a bearer token)"),
    };
    let guard = cadre_remote::RequestGuard::new(
        token,
        &cfg.allowed_origins,
        &cfg.allowed_hosts,
        Some(local),
    )?;
    let app = cadre_mcp::http_router(shared, guard, cfg.max_body_bytes.unwrap_or(1 << 20));
    eprintln!("cadre: MCP over streamable HTTP at http://{local}/mcp · auth: {auth}");
    axum::serve(listener, app)
        .with_graceful_shutdown(serve_cmd::shutdown_signal())
        .await
        .context("the MCP server failed")?;
    h.runtime().shutdown();
    eprintln!("cadre: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Run a `cadre mcp` subcommand.
pub async fn run(cli: &Cli, cmd: &McpCommand) -> Result<ExitCode> {
    match cmd {
        McpCommand::List { json } => list(cli, *json).await,
        McpCommand::Serve { http } => serve(cli, http.as_deref()).await,
    }
}
