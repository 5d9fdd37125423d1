//! Configuration: `~/.config/cadre/config.toml` (user), `<workspace>/.cadre/config.toml`
//! (project, wins), an optional `--config FILE` (wins over both), then environment
//! variables and flags. Tables merge key by key; documented in `docs/configuration.md`.

use anyhow::{Context, Result};
use cadre_engine::{ApprovalMode, PermissionPolicy, PermissionRules};
use cadre_llm::ProviderConfig;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The default model when nothing else names one.
pub const DEFAULT_MODEL: &str = "openai:gpt-4o-mini";

/// The whole configuration file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Default model (`provider:model`).
    pub model: Option<String>,
    /// Project-memory files, in order of preference (default `["AGENTS.md", "CLAUDE.md"]`):
    /// the first present and not empty is added to the prompt, once; `[]` reads none.
    pub project_memory: Option<Vec<String>>,
    /// Run budgets.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Tool execution settings.
    #[serde(default)]
    pub tools: ToolsConfig,
    /// Approval mode and rules.
    #[serde(default)]
    pub permissions: PermissionsConfig,
    /// Named providers.
    #[serde(default)]
    pub providers: HashMap<String, ProviderConfig>,
    /// Sub-agent settings.
    #[serde(default)]
    pub subagents: SubagentsConfig,
    /// The persistent task store.
    #[serde(default)]
    pub store: cadre_store::StoreConfig,
    /// Model aliases.
    #[serde(default)]
    pub models: ModelsConfig,
    /// `cadre serve` settings.
    #[serde(default)]
    pub serve: ServeConfig,
    /// MCP servers (`[mcp_servers.NAME]`, Codex's format; documented in `docs/mcp.md`).
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, cadre_mcp::ServerEntry>,
    /// The OS sandbox of the processes agents start.
    #[serde(default)]
    pub sandbox: SandboxConfig,
    /// Context compaction.
    #[serde(default)]
    pub compaction: CompactionConfig,
    /// `[[hooks.<Event>]]` handler groups (documented in `docs/hooks.md`). Each file's are
    /// read on their own by [`crate::hooks_cmd::load`], since they add up rather than
    /// replace each other; here they are only accepted.
    #[serde(default)]
    #[allow(dead_code)]
    pub hooks: Option<toml::Value>,
    /// OpenTelemetry export.
    #[serde(default)]
    pub telemetry: crate::telemetry::settings::TelemetryConfig,
    /// The file each of `mcp_servers` comes from (the last one that sets it).
    #[serde(skip)]
    pub mcp_origins: BTreeMap<String, PathBuf>,
}

/// `[serve]`: the HTTP server of `cadre serve` (documented in `docs/remote.md`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// Environment variable holding the bearer token (default `CADRE_SERVE_TOKEN`).
    pub token_env: Option<String>,
    /// The token itself (prefer `token_env`: config files get shared).
    pub token: Option<String>,
    /// Largest request body in bytes (default 1 MiB).
    pub max_body_bytes: Option<usize>,
    /// Tasks running at once (default 64).
    pub max_concurrent_tasks: Option<usize>,
    /// Largest task input in bytes (default 256 KiB).
    pub max_input_bytes: Option<usize>,
    /// Bytes of caller-sent text remembered for finished tasks, and again for idle
    /// conversations (default 64 MiB).
    pub max_remembered_input_bytes: Option<usize>,
    /// Seconds running tasks get to finish after SIGTERM / Ctrl-C (default 10).
    pub grace_secs: Option<u64>,
    /// Budget of requests that do not wait for a task, in seconds (default 30).
    pub request_timeout_secs: Option<u64>,
    /// Longest wait of a blocking send or `/wait`, in seconds (default 300).
    pub max_wait_secs: Option<u64>,
    /// Agent used when a request names none (default `general-purpose`, else the first).
    pub default_agent: Option<String>,
    /// Agents to expose (default: all).
    pub expose: Option<Vec<String>>,
    /// `ask`, `deny` or `approve`: how served agents' approval requests are answered
    /// (default: `ask` when a token is set, else `deny`).
    pub approvals: Option<ServeApprovals>,
    /// Seconds an asked caller has to answer before the call is denied (default 300).
    pub approval_timeout_secs: Option<u64>,
    /// Origins whose web pages may call the server (default: none; others get 403).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Extra names the `Host` header may carry (`name` or `name:port`; default: none).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Seconds a connection may take to send a complete request head after opening or after
    /// its previous exchange (default 15, at least 1): closes idle and slow-header connections.
    pub idle_timeout_secs: Option<u64>,
    /// Connections open at once (default 512; never more than half the open-file limit).
    pub max_connections: Option<usize>,
    /// Connections open at once from one IP address (default 256, at most `max_connections`).
    pub max_connections_per_peer: Option<usize>,
    /// Seconds a connection without an authenticated request may take to send a complete
    /// request head (default 3, at least 1).
    pub unauthenticated_timeout_secs: Option<u64>,
    /// `[serve.agents.NAME]`: how each agent's answers reach an A2A caller.
    #[serde(default)]
    pub agents: BTreeMap<String, ServeAgentConfig>,
}

/// `[serve.agents.NAME]`: how one served agent answers A2A callers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeAgentConfig {
    /// `text` (default) or `parts`: the agent's answer is a JSON array of A2A parts.
    pub answer: Option<ServeAnswer>,
    /// `task` (default) or `message`: a completed blocking send is answered with a Message.
    pub reply: Option<ServeReply>,
}

/// `serve.agents.NAME.answer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServeAnswer {
    /// The answer is text.
    Text,
    /// The answer spells A2A parts (text, data, files) as JSON.
    Parts,
}

/// `serve.agents.NAME.reply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServeReply {
    /// A Task.
    Task,
    /// A Message, once the task completed.
    Message,
}

/// `serve.approvals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServeApprovals {
    /// Ask the A2A caller (the task turns `input-required`).
    Ask,
    /// Refuse.
    Deny,
    /// Approve.
    Approve,
}

/// `[sandbox]`: the main agent's sandbox (`mode`, `network`, `writable_roots`), the
/// default of sub-agents without one of their own, and how it is applied (documented in
/// `docs/isolation.md`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// The main agent's mode (default `off`).
    pub mode: Option<cadre_sandbox::SandboxMode>,
    /// Whether the main agent's sandboxed processes reach the network (default false).
    #[serde(default)]
    pub network: bool,
    /// Directories the main agent's processes may also write.
    #[serde(default)]
    pub writable_roots: Vec<String>,
    /// Sub-agents whose definition has no `sandbox:` (default `workspace-write` without
    /// network): a mode name or a table `{mode, network, writable_roots}`.
    pub subagents: Option<cadre_sandbox::SandboxSpec>,
    /// `landlock` (default: cadre's launcher) or `bwrap`.
    pub backend: Option<cadre_sandbox::Backend>,
    /// Refuse to run when a mechanism is missing, instead of a weaker sandbox (default false).
    #[serde(default)]
    pub required: bool,
}

/// `[models]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelsConfig {
    /// Short names used in agent definitions (`sonnet`, `fast`, ...) mapped to model specs
    /// (`anthropic:claude-sonnet-4-5`).
    #[serde(default)]
    pub aliases: HashMap<String, String>,
    /// Prices per million tokens by `provider:model`, added to or replacing the built-in
    /// table (`[models.prices."anthropic:claude-sonnet-4-5"] input = 3.0 ...`).
    #[serde(default)]
    pub prices: HashMap<String, cadre_llm::ModelPrice>,
    /// Context windows in tokens by `provider:model`, added to or replacing the built-in
    /// table (`[models.context_windows] "ollama:qwen3:8b" = 40960`).
    #[serde(default)]
    pub context_windows: HashMap<String, u64>,
}

/// `[compaction]` (documented in `docs/compaction.md`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionConfig {
    /// Compact automatically (default true); `/compact` and `--compact-now` work either way.
    pub enabled: Option<bool>,
    /// Share of the context window at which a conversation is compacted (default 0.8).
    pub threshold: Option<f64>,
    /// Latest turns kept verbatim (default 4).
    pub keep_recent_turns: Option<usize>,
    /// The model that writes summaries (default: each agent's own).
    pub model: Option<String>,
}

impl CompactionConfig {
    /// The engine's policy, with the windows of `[models.context_windows]`.
    pub fn policy(&self, models: &ModelsConfig) -> Result<cadre_engine::CompactionPolicy> {
        let threshold = self
            .threshold
            .unwrap_or(cadre_engine::DEFAULT_COMPACTION_THRESHOLD);
        if !(threshold > 0.0 && threshold <= 1.0) {
            anyhow::bail!("[compaction] threshold must be above 0 and at most 1, not {threshold}");
        }
        let keep = self
            .keep_recent_turns
            .unwrap_or(cadre_engine::DEFAULT_KEEP_RECENT_TURNS);
        if keep == 0 {
            anyhow::bail!("[compaction] keep_recent_turns must be at least 1");
        }
        let mut windows = cadre_llm::ContextWindows::new();
        for (spec, tokens) in &models.context_windows {
            if !spec.contains(':') {
                anyhow::bail!("[models.context_windows]: {spec:?} is not provider:model");
            }
            windows = windows.with(spec.clone(), *tokens);
        }
        Ok(cadre_engine::CompactionPolicy {
            automatic: self.enabled.unwrap_or(true),
            windows: std::sync::Arc::new(windows),
            threshold,
            keep_recent_turns: keep,
            model: None,
            unknown_windows: Default::default(),
        })
    }
}

impl ModelsConfig {
    /// The built-in price table with this configuration's prices.
    pub fn price_table(&self) -> Result<cadre_llm::PriceTable> {
        let mut table = cadre_llm::PriceTable::built_in();
        for (key, price) in &self.prices {
            table
                .set(key, *price)
                .map_err(|e| anyhow::anyhow!("[models.prices]: {e}"))?;
        }
        Ok(table)
    }
}

/// `[subagents]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentsConfig {
    /// Which delegation tools the parent sees: `task`, `lifecycle` or `both` (default).
    pub tools: Option<SurfaceName>,
    /// Spawn depth cap (default 3).
    pub max_depth: Option<u32>,
    /// Members an agent team may have at once (default 8).
    pub max_team_size: Option<usize>,
    /// Offer the team tools to every agent that may delegate, as a lead (default false).
    pub teams: Option<bool>,
    /// Children running at once per session (default 16); more wait as pending.
    pub max_concurrent: Option<usize>,
    /// Max turns of declared sub-agents that set none (default 10).
    pub max_turns: Option<u32>,
    /// `deny` (default): background children's approval requests are refused;
    /// `escalate`: they go to the parent's approval channel.
    pub background_approvals: Option<BackgroundApprovalsName>,
    /// Seconds a foreground `task` waits before its child moves to the background (default: no limit).
    pub task_timeout_secs: Option<u64>,
    /// Remove the built-in `general-purpose` agent.
    #[serde(default)]
    pub disable_general_purpose: bool,
    /// Results larger than this many bytes are written to `.cadre/results/<task id>.md`
    /// and the parent gets their head and the path (default 32768).
    pub max_result_bytes: Option<usize>,
    /// What happens to a child's task when the node running it is lost: `fail` (default)
    /// or `resume` (another live node adopts it and continues from its checkpoint).
    pub on_orphan: Option<OnOrphanName>,
}

/// `subagents.on_orphan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnOrphanName {
    /// Fail the task (`executor lost`).
    Fail,
    /// Continue it on another live node.
    Resume,
}

/// `subagents.tools`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SurfaceName {
    /// Only `task`.
    Task,
    /// Only the lifecycle tools.
    Lifecycle,
    /// Both.
    Both,
}

/// `subagents.background_approvals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackgroundApprovalsName {
    /// Refuse.
    Deny,
    /// Ask the parent's channel.
    Escalate,
}

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Maximum model turns of the main agent (default 50).
    pub max_turns: Option<u32>,
    /// Wall-clock budget of a run, in seconds.
    pub wall_clock_secs: Option<u64>,
    /// Token budget of a run (input + output).
    pub max_tokens: Option<u64>,
    /// Budget in dollars of a run, sub-agents included (calls of models with a price).
    pub max_cost_usd: Option<f64>,
    /// Output token cap per model call (sent as `max_tokens` to the provider, and counted
    /// by cadre as the reply streams).
    pub max_output_tokens: Option<u32>,
    /// Cap on one model reply's text, thinking and tool arguments, in bytes (default 4 MiB).
    pub max_reply_bytes: Option<usize>,
}

impl LimitsConfig {
    /// `max_cost_usd`, checked: a positive number of dollars.
    pub fn cost_budget(&self) -> Result<Option<f64>> {
        match self.max_cost_usd {
            Some(usd) if !(usd.is_finite() && usd > 0.0) => Err(anyhow::anyhow!(
                "[limits] max_cost_usd must be a positive number of dollars, not {usd}"
            )),
            other => Ok(other),
        }
    }
}

/// `[tools]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// Per-tool timeout in seconds (default 60).
    pub timeout_secs: Option<u64>,
    /// Tool calls of one reply that run at once (default 16).
    pub max_parallel: Option<usize>,
    /// Outputs above this many bytes are stored under `.cadre/tool-outputs/` (default 10000).
    pub offload_threshold: Option<usize>,
    /// Let file tools read files with more than one hard link (default false).
    #[serde(default)]
    pub allow_hardlink_reads: bool,
    /// Secret variables `bash` may see after all (by default cadre's own secrets are
    /// dropped from its environment: see [`Config::secret_env`]).
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Let `web_fetch` reach loopback, link-local and private addresses (default false).
    #[serde(default)]
    pub web_fetch_allow_private: bool,
    /// `[tools.web_search]`: the search backend; without it there is no `web_search`.
    #[serde(default)]
    pub web_search: Option<cadre_tools::builtin::WebSearchConfig>,
}

impl ToolsConfig {
    /// Tools beyond the built-in ones that this configuration adds (`web_search` when its
    /// backend is configured and, for an HTTP API, its key is set).
    pub fn configured_tools(&self) -> Vec<String> {
        match &self.web_search {
            Some(c)
                if cadre_tools::builtin::mcp_target(c).is_some()
                    || c.api_key_env.as_deref().is_none_or(|v| {
                        cadre_types::process_env::var(v).is_some_and(|k| !k.is_empty())
                    }) =>
            {
                vec![cadre_tools::builtin::WEB_SEARCH.to_string()]
            }
            _ => Vec::new(),
        }
    }
}

/// `[permissions]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsConfig {
    /// `ask` (default), `auto-approve`, `read-only` or `bypass`.
    pub mode: Option<ApprovalMode>,
    /// Rules that allow calls without asking.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Rules that refuse calls.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Rules that always ask.
    #[serde(default)]
    pub ask: Vec<String>,
    /// Paths file tools may not write, besides the built-in list (relative to the
    /// workspace, `~/`, or absolute).
    #[serde(default)]
    pub protected_paths: Vec<String>,
}

impl PermissionsConfig {
    /// The policy these settings describe.
    pub fn policy(&self) -> Result<PermissionPolicy> {
        Ok(PermissionPolicy {
            mode: self.mode.unwrap_or_default(),
            rules: PermissionRules::parse(&self.allow, &self.deny, &self.ask)?,
        })
    }
}

impl Config {
    /// The variables kept from model-controlled processes (`bash`, stdio MCP servers): the
    /// defaults (`CADRE_SERVE_TOKEN`, `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`), the serve
    /// token's `token_env` and every provider's `api_key_env`; minus `[tools] pass_env`.
    pub fn secret_env(&self) -> cadre_tools::SecretEnv {
        let mut env = cadre_tools::SecretEnv::default();
        if let Some(var) = &self.serve.token_env {
            env = env.with_secret(var.clone());
        }
        for p in self.providers.values() {
            if let Some(var) = &p.api_key_env {
                env = env.with_secret(var.clone());
            }
        }
        env.pass(self.tools.pass_env.iter().cloned())
    }
}

/// The user's config directory (`$XDG_CONFIG_HOME/cadre` or `~/.config/cadre`).
pub fn user_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("cadre"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config").join("cadre"))
}

/// The largest configuration file read (a `config.toml` is a few KiB).
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The text of a configuration file, `None` when it does not exist. Only a regular file
/// (after symlinks) of at most [`MAX_CONFIG_BYTES`] is read: a FIFO or a link to
/// `/dev/zero` in a cloned repository is refused at once instead of hanging cadre.
fn read_config_text(path: &Path) -> Result<Option<String>> {
    match cadre_tools::read_to_string_capped(path, MAX_CONFIG_BYTES) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(anyhow::Error::new(e).context("cannot read the configuration")),
    }
}

fn read_table(path: &Path) -> Result<Option<toml::Table>> {
    match read_config_text(path)? {
        Some(text) => {
            let table: toml::Table = toml::from_str(&text)
                .with_context(|| format!("invalid configuration in {}", path.display()))?;
            // Check each file on its own so an error names the file it is in.
            toml::Value::Table(table.clone())
                .try_into::<Config>()
                .map_err(anyhow::Error::from)
                .and_then(|c| c.check_limits())
                .with_context(|| format!("invalid configuration in {}", path.display()))?;
            Ok(Some(table))
        }
        None => Ok(None),
    }
}

/// Merge `over` into `base`: tables merge recursively, other values are replaced.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// The project's configuration file.
pub fn project_file(workspace: &Path) -> PathBuf {
    workspace.join(".cadre").join("config.toml")
}

/// Add `rule` to `[permissions] allow` of the project's configuration, keeping the file's
/// comments and layout; returns the file. A rule already there is not added twice.
pub fn add_allow_rule(workspace: &Path, rule: &str) -> Result<PathBuf> {
    let path = project_file(workspace);
    let text = read_config_text(&path)?.unwrap_or_default();
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("invalid configuration in {}", path.display()))?;
    let perms = doc
        .entry("permissions")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_like_mut()
        .with_context(|| format!("{}: permissions is not a table", path.display()))?;
    let allow = perms
        .entry("allow")
        .or_insert(toml_edit::Item::Value(toml_edit::Array::new().into()))
        .as_array_mut()
        .with_context(|| format!("{}: permissions.allow is not a list", path.display()))?;
    if !allow.iter().any(|v| v.as_str() == Some(rule)) {
        allow.push(rule);
    }
    let out = doc.to_string();
    // The result must still be a valid configuration before it replaces the file.
    let table: toml::Table =
        toml::from_str(&out).context("the edited configuration does not parse")?;
    toml::Value::Table(table)
        .try_into::<Config>()
        .context("the edited configuration is invalid")?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Load and merge the user, project and explicit configuration files.
pub fn load(workspace: &Path, explicit: Option<&Path>) -> Result<Config> {
    let mut merged = toml::Table::new();
    let mut files: Vec<PathBuf> = Vec::new();
    if let Some(dir) = user_dir() {
        files.push(dir.join("config.toml"));
    }
    files.push(workspace.join(".cadre").join("config.toml"));
    let mut origins = BTreeMap::new();
    let mut take = |merged: &mut toml::Table, path: &Path, t: toml::Table| {
        if let Some(toml::Value::Table(servers)) = t.get("mcp_servers") {
            for name in servers.keys() {
                origins.insert(name.clone(), path.to_path_buf());
            }
        }
        merge(merged, t);
    };
    for f in &files {
        if let Some(t) = read_table(f)? {
            take(&mut merged, f, t);
        }
    }
    if let Some(p) = explicit {
        let t = read_table(p)?.with_context(|| format!("config file {} not found", p.display()))?;
        take(&mut merged, p, t);
    }
    let mut config: Config = toml::Value::Table(merged)
        .try_into()
        .context("invalid configuration")?;
    config.mcp_origins = origins;
    Ok(config)
}

impl Config {
    /// Refuse limits of zero: a cap of nothing would stop everything (or, clamped, mean
    /// something the file does not say). Negative values are refused by their types.
    pub fn check_limits(&self) -> Result<()> {
        let l = &self.limits;
        let t = &self.tools;
        let s = &self.subagents;
        let v = &self.serve;
        let limits: [(&str, Option<u64>); 19] = [
            ("[limits] max_turns", l.max_turns.map(u64::from)),
            ("[limits] wall_clock_secs", l.wall_clock_secs),
            ("[limits] max_tokens", l.max_tokens),
            (
                "[limits] max_output_tokens",
                l.max_output_tokens.map(u64::from),
            ),
            (
                "[limits] max_reply_bytes",
                l.max_reply_bytes.map(|n| n as u64),
            ),
            ("[tools] timeout_secs", t.timeout_secs),
            ("[tools] max_parallel", t.max_parallel.map(|n| n as u64)),
            (
                "[subagents] max_concurrent",
                s.max_concurrent.map(|n| n as u64),
            ),
            ("[subagents] max_turns", s.max_turns.map(u64::from)),
            ("[subagents] task_timeout_secs", s.task_timeout_secs),
            (
                "[subagents] max_result_bytes",
                s.max_result_bytes.map(|n| n as u64),
            ),
            (
                "[serve] max_concurrent_tasks",
                v.max_concurrent_tasks.map(|n| n as u64),
            ),
            ("[serve] max_body_bytes", v.max_body_bytes.map(|n| n as u64)),
            (
                "[serve] max_input_bytes",
                v.max_input_bytes.map(|n| n as u64),
            ),
            ("[serve] request_timeout_secs", v.request_timeout_secs),
            ("[serve] idle_timeout_secs", v.idle_timeout_secs),
            (
                "[serve] max_connections",
                v.max_connections.map(|n| n as u64),
            ),
            (
                "[serve] max_connections_per_peer",
                v.max_connections_per_peer.map(|n| n as u64),
            ),
            (
                "[serve] unauthenticated_timeout_secs",
                v.unauthenticated_timeout_secs,
            ),
        ];
        for (key, value) in limits {
            if value == Some(0) {
                anyhow::bail!("{key} must be at least 1, not 0");
            }
        }
        for (name, p) in &self.providers {
            for (key, value) in [
                ("max_attempts", p.max_attempts.map(u64::from)),
                ("idle_timeout_secs", p.idle_timeout_secs),
                (
                    "max_concurrent_requests",
                    p.max_concurrent_requests.map(|n| n as u64),
                ),
            ] {
                if value == Some(0) {
                    anyhow::bail!("[providers.{name}] {key} must be at least 1, not 0");
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_allow_rule_is_added_once_and_comments_stay() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
        let file = super::project_file(dir.path());
        std::fs::write(
            &file,
            "# mine\n[permissions]\nallow = [\"bash(ls)\"] # keep\n",
        )
        .unwrap();
        super::add_allow_rule(dir.path(), "write_file(a[*].txt)").unwrap();
        super::add_allow_rule(dir.path(), "write_file(a[*].txt)").unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("# mine\n"), "{text}");
        assert!(text.contains("# keep"), "{text}");
        let cfg = super::load(dir.path(), None).unwrap();
        assert_eq!(cfg.permissions.allow, ["bash(ls)", "write_file(a[*].txt)"]);
        let fresh = tempfile::tempdir().unwrap();
        super::add_allow_rule(fresh.path(), "bash").unwrap();
        assert_eq!(
            super::load(fresh.path(), None).unwrap().permissions.allow,
            ["bash"]
        );
    }

    use super::*;

    #[test]
    fn project_overrides_user_key_by_key() {
        let mut base: toml::Table = toml::from_str(
            "model = \"openai:a\"\n[limits]\nmax_turns = 5\nmax_tokens = 100\n[permissions]\nallow = [\"bash\"]",
        )
        .unwrap();
        let over: toml::Table = toml::from_str("[limits]\nmax_turns = 7\n").unwrap();
        merge(&mut base, over);
        let c: Config = toml::Value::Table(base).try_into().unwrap();
        assert_eq!(c.model.as_deref(), Some("openai:a"));
        assert_eq!(c.limits.max_turns, Some(7));
        assert_eq!(c.limits.max_tokens, Some(100));
        assert_eq!(c.permissions.allow, vec!["bash".to_string()]);
    }

    #[test]
    fn compaction_settings_and_context_windows_build_the_policy() {
        let c: Config = toml::from_str(
            "[compaction]\nthreshold = 0.5\nkeep_recent_turns = 2\n\
             [models.context_windows]\n\"ollama:qwen3:8b\" = 40960\n",
        )
        .unwrap();
        let p = c.compaction.policy(&c.models).unwrap();
        assert_eq!((p.threshold, p.keep_recent_turns), (0.5, 2));
        assert!(p.automatic);
        let off: Config = toml::from_str("[compaction]\nenabled = false\n").unwrap();
        assert!(!off.compaction.policy(&off.models).unwrap().automatic);
        assert_eq!(p.windows.window("ollama:qwen3:8b", "qwen3:8b"), Some(40960));
        let bad: Config = toml::from_str("[compaction]\nthreshold = 1.5\n").unwrap();
        assert!(bad.compaction.policy(&bad.models).is_err());
        let bad: Config = toml::from_str("[models.context_windows]\nqwen = 1\n").unwrap();
        assert!(bad.compaction.policy(&bad.models).is_err());
        assert!(toml::from_str::<Config>("[compaction]\nkeep = 2\n").is_err());
    }

    #[test]
    fn prices_extend_and_override_the_built_in_table() {
        let c: Config = toml::from_str(
            "[models.prices.\"ollama:qwen3:8b\"]\ninput = 0.0\noutput = 0.0\n\
             [models.prices.\"anthropic:claude-sonnet-4-5\"]\ninput = 2.0\ncached_input = 0.2\n\
             cache_write = 2.5\noutput = 10.0\n",
        )
        .unwrap();
        let table = c.models.price_table().unwrap();
        assert_eq!(table.lookup("ollama", "qwen3:8b").unwrap().output, 0.0);
        assert_eq!(
            table
                .lookup("anthropic", "claude-sonnet-4-5")
                .unwrap()
                .input,
            2.0
        );
        assert_eq!(table.lookup("openai", "gpt-4o-mini").unwrap().input, 0.15);
        let bad: Config =
            toml::from_str("[models.prices.gpt]\ninput = 1.0\noutput = 1.0\n").unwrap();
        let err = bad.models.price_table().unwrap_err();
        assert!(err.to_string().contains("provider:model"), "{err}");
        assert!(
            toml::from_str::<Config>(
                "[models.prices.\"a:b\"]\ninput = 1.0\noutput = 1.0\nimput = 2.0\n"
            )
            .is_err()
        );
    }

    #[test]
    fn unknown_keys_and_bad_modes_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
        std::fs::write(dir.path().join(".cadre/config.toml"), "modle = \"x\"\n").unwrap();
        let err = load(dir.path(), None).unwrap_err();
        assert!(format!("{err:#}").contains("modle"), "{err:#}");
        std::fs::write(
            dir.path().join(".cadre/config.toml"),
            "[permissions]\nmode = \"maybe\"\n",
        )
        .unwrap();
        assert!(load(dir.path(), None).is_err());
    }
}
