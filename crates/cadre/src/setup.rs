//! Wiring: from the configuration to providers, the agent registry, the sub-agent runtime
//! and the main agent. Shared by the subcommands that run agents.

use crate::cli::Cli;
use crate::config::{self, BackgroundApprovalsName, Config, SurfaceName};
use anyhow::{Context, Result, bail};
use cadre_engine::{Agent, Limits, Offloader, PermissionPolicy};
use cadre_llm::ProviderRegistry;
use cadre_subagents::{
    AgentRegistry, BackgroundApprovals, RuntimeConfig, SkillSet, SubagentContext, SubagentRuntime,
    ToolSurface,
};
use cadre_tools::builtin::builtin_tools;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Everything a run needs, built once per process.
pub struct Setup {
    /// The workspace root (canonical).
    pub workspace: PathBuf,
    /// The sub-agent runtime.
    pub runtime: Arc<SubagentRuntime>,
    /// The main agent.
    pub agent: Agent,
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

/// The model spec in force: `--model`, then `CADRE_MODEL`, then the config, then the default.
pub fn model_spec(cli: &Cli, config: &Config) -> String {
    cli.model
        .clone()
        .or_else(|| std::env::var("CADRE_MODEL").ok().filter(|s| !s.is_empty()))
        .or_else(|| config.model.clone())
        .unwrap_or_else(|| config::DEFAULT_MODEL.to_string())
}

/// `.cadre/sessions` of a workspace.
pub fn sessions_dir(ws: &Path) -> PathBuf {
    ws.join(".cadre").join("sessions")
}

/// Per-run overrides from the command line.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--max-turns`.
    pub max_turns: Option<u32>,
    /// `--permission-mode`.
    pub permission_mode: Option<String>,
}

/// Load the agent registry of a workspace, reporting broken files on stderr.
pub fn load_registry(ws: &Path, config: &Config, skills: &SkillSet) -> AgentRegistry {
    let registry = crate::agents_cmd::build_registry(ws, config, skills);
    for e in registry.errors() {
        eprintln!("cadre: warning: skipped agent file {e}");
    }
    registry
}

impl Setup {
    /// Build everything for `cli` in the workspace.
    pub fn new(cli: &Cli, overrides: &Overrides) -> Result<Self> {
        let ws = workspace_root(cli)?;
        let config = config::load(&ws, cli.config.as_deref())?;
        let spec = model_spec(cli, &config);
        let default_provider = spec
            .split_once(':')
            .map_or("openai", |(p, _)| p)
            .to_string();
        let providers = Arc::new(ProviderRegistry::new(
            config.providers.clone(),
            &default_provider,
        ));
        let model = providers.resolve(&spec)?;
        let mut policy: PermissionPolicy = config.permissions.policy()?;
        if let Some(mode) = &overrides.permission_mode {
            policy.mode = mode.parse().map_err(anyhow::Error::msg)?;
        }
        let limits = Limits {
            max_turns: overrides
                .max_turns
                .or(config.limits.max_turns)
                .unwrap_or(50),
            wall_clock: config.limits.wall_clock_secs.map(Duration::from_secs),
            max_tokens: config.limits.max_tokens,
        };
        let tool_timeout = config
            .tools
            .timeout_secs
            .map_or(cadre_engine::DEFAULT_TOOL_TIMEOUT, Duration::from_secs);
        let max_parallel = config
            .tools
            .max_parallel
            .unwrap_or(cadre_engine::DEFAULT_MAX_PARALLEL_TOOLS);
        let offload = config
            .tools
            .offload_threshold
            .unwrap_or(cadre_engine::DEFAULT_OFFLOAD_THRESHOLD);

        let skills = SkillSet::discover(&ws);
        let registry = load_registry(&ws, &config, &skills);
        let base_tools = builtin_tools();
        let sub = &config.subagents;
        let mut rc = RuntimeConfig::new(ws.clone());
        rc.sessions_dir = Some(sessions_dir(&ws));
        rc.base_tools = base_tools.clone();
        rc.permissions = policy.clone();
        rc.parent_limits = limits;
        rc.tool_timeout = tool_timeout;
        rc.max_parallel_tools = max_parallel;
        rc.offload_threshold = offload;
        rc.max_depth = sub.max_depth.unwrap_or(3);
        rc.max_concurrent = sub.max_concurrent.unwrap_or(16);
        rc.default_max_turns = sub.max_turns.unwrap_or(10);
        rc.background_approvals = match sub.background_approvals {
            Some(BackgroundApprovalsName::Escalate) => BackgroundApprovals::Escalate,
            _ => BackgroundApprovals::Deny,
        };
        rc.task_timeout = sub.task_timeout_secs.map(Duration::from_secs);
        rc.surface = match sub.tools {
            Some(SurfaceName::Task) => ToolSurface::Task,
            Some(SurfaceName::Lifecycle) => ToolSurface::Lifecycle,
            _ => ToolSurface::Both,
        };
        let runtime = SubagentRuntime::new(rc, registry, skills.clone(), providers);

        let mut tools = base_tools;
        if !runtime.registry().is_empty() {
            for t in runtime.delegation_tools().iter() {
                tools.register(t.clone());
            }
        }
        let mut prompt = cadre_engine::prompt::main_system_prompt(&ws);
        if let Some(index) = skills.index_section() {
            prompt.push_str("\n\n");
            prompt.push_str(index.trim_end());
        }
        let mut builder = Agent::builder("main", model)
            .system_prompt(prompt)
            .tools(tools)
            .limits(limits)
            .permissions(policy)
            .tool_timeout(tool_timeout)
            .max_parallel_tools(max_parallel)
            .offloader(Offloader::new(&ws, offload));
        if !runtime.registry().is_empty() {
            builder = builder.extension(Arc::new(SubagentContext::new(runtime.clone())));
        }
        Ok(Self {
            workspace: ws,
            runtime,
            agent: builder.build(),
        })
    }
}
