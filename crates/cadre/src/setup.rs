//! Wiring: from the configuration to providers, the agent registry, the sub-agent runtime
//! and the main agent. Shared by the subcommands that run agents.

use crate::cli::Cli;
use crate::config::{
    self, BackgroundApprovalsName, Config, OnOrphanName, SandboxConfig, SurfaceName,
};
use anyhow::{Context, Result, bail};
use cadre_engine::{Limits, PermissionPolicy};
use cadre_remote::RemoteClient;
use cadre_sandbox::{Launcher, Mechanism, SandboxMode, SandboxSpec};
use cadre_subagents::SandboxSettings;
use cadre_subagents::{BackgroundApprovals, Harness, RemoteExecutor, ToolSurface};
use cadre_tools::AccessPolicy;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Everything a run needs, built once per process.
pub struct Setup {
    /// The main agent with its sub-agent runtime.
    pub harness: Harness,
    /// What start-up found worth a warning (skipped agent files, fallback models, settings
    /// dropped from model-writable files, overridden definitions), one line each.
    pub warnings: Vec<String>,
    /// Which model an alias given for the main agent chose (`model sonnet is anthropic:…`).
    pub model_note: Option<String>,
    /// Heartbeats and the orphan sweeper of the task store; they stop when this is dropped.
    _maintenance: cadre_store::Maintenance,
}

/// What the file tools may touch in `ws`, and what stays protected (for every process
/// cadre starts for a model: bash, sandboxed MCP servers), as the configuration says.
pub fn file_access(ws: &Path, config: &Config) -> AccessPolicy {
    AccessPolicy::default()
        .allow_hardlink_reads(config.tools.allow_hardlink_reads)
        .protect_paths(ws, &config.permissions.protected_paths)
}

/// The resolved workspace root.
pub fn workspace_root(cli: &Cli) -> Result<PathBuf> {
    let dir = match &cli.workspace {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("cannot determine the current directory")?,
    };
    if !dir.is_dir() {
        bail!("workspace {} is not a directory", dir.display());
    }
    dir.canonicalize()
        .with_context(|| format!("cannot resolve workspace {}", dir.display()))
}

/// The model as named: `--model`, then `CADRE_MODEL`, then the config, then the default.
fn named_model(cli: &Cli, config: &Config) -> String {
    cli.model
        .clone()
        .or_else(|| std::env::var("CADRE_MODEL").ok().filter(|s| !s.is_empty()))
        .or_else(|| config.model.clone())
        .unwrap_or_else(|| config::DEFAULT_MODEL.to_string())
}

/// The model spec in force: the model as named, an alias (`sonnet`, `[models.aliases]`)
/// resolved the way definition files resolve it.
pub fn model_spec(cli: &Cli, config: &Config) -> String {
    cadre_subagents::main_model_spec(&named_model(cli, config), &config.models.aliases)
}

/// Check, before anything is opened, that the model in force names a provider that exists
/// and is configured ([`cadre_llm::ProviderRegistry::preflight`]); the error is one line.
/// A missing key is an error only when `needs_key` (`cadre run`, `cadre serve`: they would
/// stop anyway, and stopping here leaves the workspace untouched); the UIs explain and wait
/// ([`cadre_tui::first_run`]).
pub fn preflight(config: &Config, spec: &str, needs_key: bool) -> Result<()> {
    use cadre_llm::NotReady;
    let providers = cadre_llm::ProviderRegistry::for_model(config.providers.clone(), &[], spec);
    match providers.preflight(spec) {
        Err(NotReady::MissingKey { env, .. }) if needs_key => {
            bail!("{}", cadre_tui::first_run::missing_key_line(spec, &env))
        }
        Ok(()) | Err(NotReady::MissingKey { .. }) => Ok(()),
        Err(e @ NotReady::UnknownProvider { .. }) => {
            bail!("{e} (declare others as [providers.NAME] tables; see docs/providers.md)")
        }
        Err(e) => bail!("{e}"),
    }
}

/// Per-run overrides from the command line.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--max-turns`.
    pub max_turns: Option<u32>,
    /// `--permission-mode`.
    pub permission_mode: Option<String>,
    /// The model to use when `--model` is not given (a resumed session's own).
    pub model: Option<String>,
    /// `--sandbox`.
    pub sandbox: Option<SandboxMode>,
    /// How long creating a task is retried over a failing store (default 10 s).
    pub store_create_retry: Option<std::time::Duration>,
    /// The main model must be callable: without its key nothing is opened (no store, no
    /// session) and the error says which variable to set.
    pub needs_key: bool,
}

impl Setup {
    /// The harness, and the store maintenance that must live as long as it is used.
    pub fn into_parts(self) -> (Harness, cadre_store::Maintenance) {
        (self.harness, self._maintenance)
    }

    /// Build everything for `cli` in the workspace.
    pub async fn new(cli: &Cli, overrides: &Overrides) -> Result<Self> {
        Self::with_min_concurrent(cli, overrides, 0).await
    }

    /// As [`Setup::new`], for the full-screen UI: the start-up warnings are kept in
    /// `warnings` for it to show, not printed where the screen would cover them.
    pub async fn for_screen(cli: &Cli, overrides: &Overrides) -> Result<Self> {
        Self::build(cli, overrides, 0).await
    }

    /// As [`Setup::new`], with at least `min_concurrent` children running at once per parent
    /// session (`cadre serve` runs all its tasks under one parent, up to its own cap).
    pub async fn with_min_concurrent(
        cli: &Cli,
        overrides: &Overrides,
        min_concurrent: usize,
    ) -> Result<Self> {
        let setup = Self::build(cli, overrides, min_concurrent).await?;
        if let Some(note) = &setup.model_note {
            eprintln!("cadre: {note}");
        }
        for w in &setup.warnings {
            eprintln!("cadre: warning: {w}");
        }
        Ok(setup)
    }

    #[expect(
        clippy::too_many_lines,
        reason = "the harness builder chain: one step per setting, in the order they apply"
    )]
    async fn build(cli: &Cli, overrides: &Overrides, min_concurrent: usize) -> Result<Self> {
        let ws = workspace_root(cli)?;
        let config = config::load(&ws, cli.config.as_deref())?;
        let model = overrides
            .model
            .clone()
            .unwrap_or_else(|| model_spec(cli, &config));
        let named = named_model(cli, &config);
        let model_note = (overrides.model.is_none() && named.trim() != model)
            .then(|| format!("model {named} is {model}"));
        preflight(&config, &model, overrides.needs_key)?;
        // Claude Code's settings add their rules to cadre's own (deny from anywhere wins).
        let claude = crate::claude_settings::load(&ws)?;
        let mut permissions = config.permissions.clone();
        claude.apply_to(&mut permissions);
        let mut policy: PermissionPolicy = permissions.policy()?;
        if let Some(mode) = &overrides.permission_mode {
            policy.mode = mode.parse().map_err(anyhow::Error::msg)?;
        }
        let sandbox = sandbox_settings(&config.sandbox, overrides.sandbox)?;
        let secrets = crate::secrets::child_secrets(&ws, &config);
        let limits = Limits {
            max_turns: overrides
                .max_turns
                .or(config.limits.max_turns)
                .unwrap_or_else(|| Limits::default().max_turns),
            wall_clock: config.limits.wall_clock_secs.map(Duration::from_secs),
            max_tokens: config.limits.max_tokens,
            max_cost_usd: config.limits.cost_budget()?,
        };
        let (hooks, hook_warnings) = crate::hooks_cmd::load(&ws, cli.config.as_deref());
        let claude_mode = crate::hooks_cmd::claude_mode(policy.mode);
        let mut b = Harness::builder()
            .model(model)
            .workspace(&ws)
            .permissions(policy)
            .file_access(file_access(&ws, &config))
            .secret_env(secrets.clone())
            .limits(limits)
            .user_agents_dir(config::user_dir().map(|d| d.join("agents")))
            .model_aliases(config.models.aliases.clone())
            .prices(config.models.price_table()?)
            .sandbox(sandbox.clone());
        // Made even without configured hooks: an agent file's own `hooks:` run through it.
        let env = cadre_subagents::hooks::RunnerEnv {
            workspace: ws.clone(),
            secrets: secrets.clone(),
        };
        let sessions = ws.join(".cadre").join("sessions");
        let hooks =
            cadre_subagents::hooks::ClaudeHooks::new(Arc::new(hooks), env, claude_mode, sessions);
        let hooks = Arc::new(hooks);
        if !hooks.set().is_empty() {
            b = b.hook(hooks.clone());
        }
        let claude_hooks = Some(hooks);
        if let Some(files) = &config.project_memory {
            b = b.project_memory(files.clone());
        }
        for (name, p) in &config.providers {
            b = b.provider(name.clone(), p.clone());
        }
        if let Some(t) = config.tools.timeout_secs {
            b = b.tool_timeout(Duration::from_secs(t));
        }
        if let Some(n) = config.tools.max_parallel {
            b = b.max_parallel_tools(n);
        }
        if let Some(n) = config.limits.max_output_tokens {
            b = b.max_output_tokens(n);
        }
        if let Some(n) = config.limits.max_reply_bytes {
            b = b.max_reply_bytes(n);
        }
        if let Some(n) = config.tools.offload_threshold {
            b = b.offload_threshold(n);
        }
        // Set even when automatic compaction is off: `/compact` and `--compact-now` use it.
        let policy = config.compaction.policy(&config.models)?;
        b = b.compaction(policy, config.compaction.model.clone());
        // MCP tools join the built-in ones; children narrow from them like from any tool.
        // The tools hold their servers, which stop when the harness is dropped.
        let mcp =
            crate::mcp_cmd::start_servers(&ws, &config, &secrets, Some(sandbox.launcher.clone()))
                .await;
        // Configured web tools join them (a `web_search` backed by an MCP tool finds it
        // among the MCP tools).
        let mut extra = cadre_tools::ToolRegistry::new();
        for t in mcp.tools() {
            extra.register(t);
        }
        add_web_tools(&mut extra, &config.tools);
        // Servers sub-agents' definitions declare start for their children only, and share
        // the configured ones' connections.
        let agent_servers: Arc<dyn cadre_subagents::AgentServers> =
            Arc::new(cadre_mcp::AgentServerPool::new(
                mcp.clone(),
                &ws,
                secrets,
                Some(sandbox.launcher.clone()),
            ));
        b = b.extra_tools(extra.iter().cloned());
        let store = open_store(&ws, &config.store).await?;
        // Ends a previous process could not store are written first: restart recovery
        // would fail those tasks as left running by a dead process.
        let spool = cadre_subagents::runtime::spool::Spool::new(
            cadre_subagents::runtime::spool::Spool::dir_of(&ws),
        );
        let replayed = spool.flush(store.as_ref()).await;
        if replayed.written > 0 {
            tracing::info!(
                count = replayed.written,
                "wrote spooled task ends to the store"
            );
        }
        let write_retry = config.store.write_retry();
        let create_retry = overrides.store_create_retry;
        let orphan_timeout = config.store.orphan_timeout();
        let maintenance = cadre_store::start_maintenance(
            store.clone(),
            &config.store,
            cadre_store::BeatSource::Owned,
        )
        .await
        .context("task store maintenance")?;
        let sub = config.subagents;
        let client =
            Arc::new(RemoteClient::new().context("cannot set up the client for remote agents")?);
        // Remote tasks a previous process of this node left open are polled to their end.
        let adopted = cadre_remote::adopt_remote_tasks(store.clone(), client.clone()).await;
        if !adopted.is_empty() {
            tracing::info!(count = adopted.len(), "adopted open remote tasks");
        }
        b = b.store(store);
        let remote: Arc<dyn RemoteExecutor> = client;
        if sub.disable_general_purpose {
            b = b.disable_general_purpose();
        }
        b = b.runtime_config(move |rc| {
            rc.max_depth = sub.max_depth.unwrap_or(rc.max_depth);
            rc.max_team_size = sub.max_team_size.unwrap_or(rc.max_team_size).max(1);
            rc.teams = sub.teams.unwrap_or(rc.teams);
            rc.max_concurrent = sub
                .max_concurrent
                .unwrap_or(rc.max_concurrent)
                .max(min_concurrent);
            rc.remote = Some(remote);
            rc.claude_hooks = claude_hooks;
            rc.agent_servers = Some(agent_servers);
            rc.store_write_retry = write_retry;
            rc.store_create_retry = create_retry.unwrap_or(rc.store_create_retry);
            rc.orphan_timeout = orphan_timeout;
            rc.default_max_turns = sub.max_turns.unwrap_or(rc.default_max_turns);
            rc.background_approvals = match sub.background_approvals {
                Some(BackgroundApprovalsName::Escalate) => BackgroundApprovals::Escalate,
                _ => BackgroundApprovals::Deny,
            };
            rc.task_timeout = sub.task_timeout_secs.map(Duration::from_secs);
            if sub.on_orphan == Some(OnOrphanName::Resume) {
                rc.on_orphan = cadre_store::OrphanPolicy::Resume;
            }
            if let Some(n) = sub.max_result_bytes {
                rc.max_result_bytes = n;
            }
            rc.surface = match sub.tools {
                Some(SurfaceName::Task) => ToolSurface::Task,
                Some(SurfaceName::Lifecycle) => ToolSurface::Lifecycle,
                _ => ToolSurface::Both,
            };
        });
        let harness = b.build()?;
        let registry = harness.runtime().registry();
        let mut warnings: Vec<String> = (registry.errors().iter())
            .map(|e| format!("skipped agent file {e}"))
            .collect();
        warnings.extend(hook_warnings);
        // An agent that will not run the model its file names is worth a line at start-up.
        // So are settings dropped from a file the model could have written, and every file
        // that replaces another definition (or the built-in).
        for w in registry.warnings() {
            if w.message.ends_with(cadre_subagents::FALLBACK_NOTE)
                || w.message.contains(cadre_subagents::WRITABLE_NOTE)
            {
                warnings.push(format!("agent {}: {}", w.agent, w.message));
            }
        }
        warnings.extend(registry.overrides().iter().map(|l| format!("agent {l}")));
        warnings.extend(claude.warnings);
        Ok(Self {
            harness,
            warnings,
            model_note,
            _maintenance: maintenance,
        })
    }
}

/// Treat these sandbox mechanisms as missing (comma-separated: `landlock`, `landlock-net`,
/// `namespaces`, `pid-namespace`, `bwrap`), to see how cadre behaves on a weaker machine.
pub const SIMULATE_MISSING_ENV: &str = "CADRE_SANDBOX_SIMULATE_MISSING";

/// The launcher of `[sandbox]`: this binary re-executed (or bubblewrap).
pub fn launcher(cfg: &SandboxConfig) -> Result<Arc<Launcher>> {
    let missing = std::env::var(SIMULATE_MISSING_ENV).unwrap_or_default();
    let missing = Mechanism::parse_list(&missing)
        .map_err(|e| anyhow::anyhow!("{SIMULATE_MISSING_ENV}: {e}"))?;
    Ok(Arc::new(
        Launcher::current_exe()
            .backend(cfg.backend.unwrap_or_default())
            .required(cfg.required)
            .simulate_missing(missing),
    ))
}

/// The sandbox of `[sandbox]` (with `--sandbox` for the main agent). What the machine lacks
/// is reported here, once; with `required = true` it is an error instead.
fn sandbox_settings(cfg: &SandboxConfig, mode: Option<SandboxMode>) -> Result<SandboxSettings> {
    let mut settings = SandboxSettings::new(launcher(cfg)?);
    settings.main = SandboxSpec {
        mode: mode.or(cfg.mode).unwrap_or(SandboxMode::Off),
        network: cfg.network,
        writable_roots: cfg.writable_roots.clone(),
    };
    if let Some(spec) = &cfg.subagents {
        settings.subagents = spec.clone();
    }
    // Nothing to report (and no probe to run) when no agent can be sandboxed.
    if settings.main.mode != SandboxMode::Off || settings.subagents.mode != SandboxMode::Off {
        settings.launcher.check_required()?;
        for gap in settings.launcher.gaps() {
            eprintln!("cadre: warning: sandbox: {gap}");
        }
    }
    Ok(settings)
}

/// `web_fetch` with the configured address policy, and `web_search` when a backend is
/// configured (a backend that cannot be used is a warning, and no `web_search`).
fn add_web_tools(tools: &mut cadre_tools::ToolRegistry, cfg: &config::ToolsConfig) {
    use cadre_tools::builtin::{WebFetchConfig, WebFetchTool, WebSearchTool};
    if cfg.web_fetch_allow_private {
        tools.register(Arc::new(WebFetchTool::new(WebFetchConfig {
            allow_private: true,
            ..WebFetchConfig::default()
        })));
    }
    if let Some(search) = &cfg.web_search {
        let found = WebSearchTool::from_config(
            search,
            |name| tools.get(name).cloned(),
            |var| cadre_types::process_env::var(var),
        );
        match found {
            Ok(tool) => tools.register(Arc::new(tool)),
            Err(e) => eprintln!("cadre: warning: {e}"),
        }
    }
}

/// Open the task store of a workspace (`CADRE_STORE_URL`, `[store] url`, or the SQLite file
/// under `.cadre/`).
pub async fn open_store(
    ws: &std::path::Path,
    cfg: &cadre_store::StoreConfig,
) -> Result<Arc<dyn cadre_store::TaskStore>> {
    let url = cfg.effective_url(ws);
    let store = cadre_store::open_config(cfg, ws).await.with_context(|| {
        format!(
            "cannot open the task store {}",
            cadre_store::redact_url(&url)
        )
    })?;
    Ok(Arc::new(store))
}
