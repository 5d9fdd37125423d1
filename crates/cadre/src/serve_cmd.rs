//! `cadre serve`: expose the configured agents over A2A and the task protocol until SIGTERM
//! or Ctrl-C. Settings come from `[serve]` in the configuration; the bearer token from the
//! environment (`CADRE_SERVE_TOKEN`, or the variable `serve.token_env` names) or the config.

use crate::cli::{Cli, ServeArgs};
use crate::config::{self, ServeAnswer, ServeApprovals, ServeConfig, ServeReply};
use crate::setup::{self, Overrides, Setup};
use anyhow::{Context, Result, bail};
use cadre_remote::{AnswerForm, AnswerStyle, ApprovalPolicy, ServeOptions, Server};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

/// The default variable holding the token.
const TOKEN_ENV: &str = "CADRE_SERVE_TOKEN";

/// The token and where it came from (for the banner; the value is never printed).
pub(crate) fn token(cfg: &ServeConfig) -> (Option<String>, String) {
    let var = cfg.token_env.clone().unwrap_or_else(|| TOKEN_ENV.into());
    if let Some(t) = cadre_types::process_env::var(&var).filter(|t| !t.trim().is_empty()) {
        return (Some(t.trim().to_string()), format!("${var}"));
    }
    match cfg
        .token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        Some(t) => (Some(t.to_string()), "serve.token in the config".into()),
        None => (None, var),
    }
}

fn options(cfg: &ServeConfig, token: Option<String>) -> ServeOptions {
    let d = ServeOptions::default();
    ServeOptions {
        token,
        max_body_bytes: cfg.max_body_bytes.unwrap_or(d.max_body_bytes),
        max_concurrent_tasks: cfg.max_concurrent_tasks.unwrap_or(d.max_concurrent_tasks),
        max_input_bytes: cfg.max_input_bytes.unwrap_or(d.max_input_bytes),
        max_remembered_input_bytes: cfg
            .max_remembered_input_bytes
            .unwrap_or(d.max_remembered_input_bytes),
        grace: cfg.grace_secs.map_or(d.grace, Duration::from_secs),
        request_timeout: cfg
            .request_timeout_secs
            .map_or(d.request_timeout, Duration::from_secs),
        max_wait: cfg.max_wait_secs.map_or(d.max_wait, Duration::from_secs),
        default_agent: cfg.default_agent.clone(),
        expose: cfg.expose.clone(),
        approvals: cfg.approvals.map(|a| match a {
            ServeApprovals::Ask => ApprovalPolicy::Ask,
            ServeApprovals::Deny => ApprovalPolicy::Deny,
            ServeApprovals::Approve => ApprovalPolicy::Approve,
        }),
        approval_timeout: cfg
            .approval_timeout_secs
            .map_or(d.approval_timeout, |s| Duration::from_secs(s.max(1))),
        allowed_origins: cfg.allowed_origins.clone(),
        allowed_hosts: cfg.allowed_hosts.clone(),
        idle_timeout: cfg
            .idle_timeout_secs
            .map_or(d.idle_timeout, |s| Duration::from_secs(s.max(1))),
        max_connections: cfg.max_connections.unwrap_or(d.max_connections),
        // No cap of its own unless configured (see ServeOptions).
        max_connections_per_peer: (cfg.max_connections_per_peer)
            .unwrap_or(cfg.max_connections.unwrap_or(d.max_connections)),
        unauthenticated_timeout: cfg
            .unauthenticated_timeout_secs
            .map_or(d.unauthenticated_timeout, Duration::from_secs),
        answers: cfg
            .agents
            .iter()
            .map(|(name, a)| {
                let style = AnswerStyle {
                    form: match a.answer {
                        Some(ServeAnswer::Parts) => AnswerForm::Parts,
                        Some(ServeAnswer::Text) | None => AnswerForm::Text,
                    },
                    message: a.reply == Some(ServeReply::Message),
                };
                (name.clone(), style)
            })
            .collect(),
        ..d
    }
}

pub(crate) async fn resolve(addr: &str) -> Result<SocketAddr> {
    if let Ok(a) = addr.parse() {
        return Ok(a);
    }
    tokio::net::lookup_host(addr)
        .await
        .with_context(|| format!("cannot resolve --addr {addr}"))?
        .next()
        .with_context(|| format!("--addr {addr} resolves to no address"))
}

/// Resolves on SIGTERM or Ctrl-C.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Run `cadre serve`.
pub async fn run(cli: &Cli, args: &ServeArgs) -> Result<ExitCode> {
    let ws = setup::workspace_root(cli)?;
    let loaded = config::load(&ws, cli.config.as_deref())?;
    let (cfg, store_cfg) = (loaded.serve, loaded.store);
    let addr = resolve(&args.addr).await?;
    let (token, token_source) = token(&cfg);
    if token.is_none() && !addr.ip().is_loopback() {
        bail!(
            "refusing to serve on {addr} without a bearer token: set {token_source} (or serve.token), or listen on a loopback address"
        );
    }
    let mut opts = options(&cfg, token);
    if let Some(secs) = args.drain_grace_secs {
        opts.grace = Duration::from_secs(secs);
    }
    // A submission waits for its task's creation no longer than the store's connect
    // timeout: a store that is down is a quick 503, and the caller tries another node.
    let overrides = Overrides {
        store_create_retry: Some(store_cfg.connect_timeout()),
        needs_key: true,
        ..Overrides::default()
    };
    let setup = Setup::with_min_concurrent(cli, &overrides, opts.max_concurrent_tasks).await?;
    let h = &setup.harness;
    // A server whose model has no key could only fail every task it accepts.
    if let Some(line) = cadre_tui::first_run::one_line(&h.agent().config().model) {
        bail!("{line}");
    }
    let auth = match &opts.token {
        Some(_) => format!("bearer token from {token_source}"),
        None => format!("none (set {token_source} to require a bearer token)"),
    };
    let server = Server::new(h.runtime().clone(), &h.agent().config().model.spec, opts)?;
    // Tasks of a lost node whose policy is `resume` are taken over and finished here.
    let adopter = h.runtime().start_adopting(
        server.adopting_parent(),
        store_cfg.sweep_interval(),
        store_cfg.orphan_timeout(),
    );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    let approvals = match server.approvals() {
        ApprovalPolicy::Ask => "ask the A2A caller".to_string(),
        ApprovalPolicy::Deny => "deny".to_string(),
        ApprovalPolicy::Approve => "approve".to_string(),
    };
    eprintln!(
        "cadre: serving {} (default {}) · auth: {auth} · approvals: {approvals}",
        server.agents().join(", "),
        server.default_agent()
    );
    eprintln!("cadre: listening on http://{local}/ (A2A JSON-RPC at /, task protocol at /tasks)");
    // A draining node adopts nothing more: it would take back the tasks it hands over.
    let signal = async move {
        shutdown_signal().await;
        drop(adopter);
    };
    server.serve(listener, signal).await?;
    h.runtime().shutdown();
    eprintln!("cadre: stopped");
    Ok(ExitCode::SUCCESS)
}
