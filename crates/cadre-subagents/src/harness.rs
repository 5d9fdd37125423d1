//! The library entry point: a builder that wires providers, tools, the agent registry, the
//! sub-agent runtime and the main agent, so an embedding program gets in one call what the
//! CLI builds.
//!
//! ```no_run
//! # async fn demo() -> Result<(), cadre_subagents::HarnessError> {
//! use cadre_subagents::{AgentDefinition, Harness};
//! let mut reviewer = AgentDefinition::new("reviewer", "Reviews a diff for bugs.");
//! reviewer.prompt = "You review code changes.".into();
//! let harness = Harness::builder()
//!     .name("main")
//!     .model("openai:gpt-4o-mini")
//!     .workspace(".")
//!     .subagent(reviewer)
//!     .build()?;
//! let outcome = harness.run("Review the last commit").await?;
//! println!("{}", outcome.output);
//! # Ok(()) }
//! ```

use crate::SubagentContext;
use crate::definitions::definition::{AgentDefinition, AgentFactory};
use crate::definitions::registry::AgentRegistry;
use crate::definitions::skills::SkillSet;
use crate::runtime::{Parent, RuntimeConfig, SandboxSettings, SubagentRuntime};
use cadre_engine::{
    Agent, CompactionError, CompactionPolicy, CompactionReport, Limits, NonInteractiveApprovals,
    Offloader, PermissionPolicy, RunOutcome, Session, SessionError, SessionMeta, ToolHook,
};
use cadre_llm::{PriceTable, Provider, ProviderConfig, ProviderError, ProviderRegistry};
use cadre_sandbox::Sandbox;
use cadre_tools::{
    AccessPolicy, ApprovalHandler, RunContext, SecretEnv, Tool, ToolRegistry, Workspace,
    builtin::builtin_tools_with_secrets,
};
use cadre_types::{EventSink, NullSink, new_session_id, unix_millis};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Why a harness could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The workspace is missing or unreadable.
    #[error("workspace {path}: {source}")]
    Workspace {
        /// The directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The model could not be resolved.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// A session could not be created or saved.
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// A change to the runtime settings, applied at build time.
type RuntimeTweak = Box<dyn FnOnce(&mut RuntimeConfig)>;

/// Builder for [`Harness`].
pub struct HarnessBuilder {
    name: String,
    model: String,
    workspace: PathBuf,
    provider_configs: HashMap<String, ProviderConfig>,
    provider_instances: Vec<(String, Arc<dyn Provider>)>,
    system_prompt: Option<String>,
    tools: Option<ToolRegistry>,
    extra_tools: Vec<Arc<dyn Tool>>,
    secret_env: SecretEnv,
    hooks: Vec<Arc<dyn ToolHook>>,
    permissions: PermissionPolicy,
    file_access: AccessPolicy,
    limits: Limits,
    tool_timeout: Duration,
    max_parallel_tools: usize,
    offload_threshold: usize,
    max_output_tokens: Option<u32>,
    max_reply_bytes: usize,
    declarations: Vec<AgentDefinition>,
    factories: Vec<(String, String, AgentFactory)>,
    load_files: bool,
    user_dir: Option<PathBuf>,
    aliases: HashMap<String, String>,
    prices: PriceTable,
    memory_files: Vec<String>,
    disable_general_purpose: bool,
    disable_subagents: bool,
    persist_sessions: bool,
    store: Option<Arc<dyn cadre_store::TaskStore>>,
    sandbox: Option<SandboxSettings>,
    compaction: Option<(CompactionPolicy, Option<String>)>,
    tweak: Option<RuntimeTweak>,
}

impl Default for HarnessBuilder {
    fn default() -> Self {
        Self {
            name: "main".into(),
            model: "openai:gpt-4o-mini".into(),
            workspace: PathBuf::from("."),
            provider_configs: HashMap::new(),
            provider_instances: Vec::new(),
            system_prompt: None,
            tools: None,
            extra_tools: Vec::new(),
            secret_env: SecretEnv::default(),
            hooks: Vec::new(),
            permissions: PermissionPolicy::default(),
            file_access: AccessPolicy::default(),
            limits: Limits::default(),
            tool_timeout: cadre_engine::DEFAULT_TOOL_TIMEOUT,
            max_parallel_tools: cadre_engine::DEFAULT_MAX_PARALLEL_TOOLS,
            offload_threshold: cadre_engine::DEFAULT_OFFLOAD_THRESHOLD,
            max_output_tokens: None,
            max_reply_bytes: cadre_llm::DEFAULT_MAX_REPLY_BYTES,
            declarations: Vec::new(),
            factories: Vec::new(),
            load_files: true,
            user_dir: crate::definitions::loader::default_user_agents_dir(),
            aliases: HashMap::new(),
            prices: PriceTable::built_in(),
            memory_files: cadre_engine::prompt::DEFAULT_MEMORY_FILES
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
            disable_general_purpose: false,
            disable_subagents: false,
            persist_sessions: true,
            store: None,
            sandbox: None,
            compaction: None,
            tweak: None,
        }
    }
}

impl HarnessBuilder {
    /// The main agent's name (default `main`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The main model, `provider:model` (default `openai:gpt-4o-mini`).
    pub fn model(mut self, spec: impl Into<String>) -> Self {
        self.model = spec.into();
        self
    }

    /// The workspace root (default `.`).
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = dir.into();
        self
    }

    /// A named provider table, as `[providers.NAME]` in the config.
    pub fn provider(mut self, name: impl Into<String>, cfg: ProviderConfig) -> Self {
        self.provider_configs.insert(name.into(), cfg);
        self
    }

    /// An already-built provider under `name` (use it as `name:model`).
    pub fn provider_instance(mut self, name: impl Into<String>, p: Arc<dyn Provider>) -> Self {
        self.provider_instances.push((name.into(), p));
        self
    }

    /// Replace the default main system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Replace the built-in tools (children narrow from these).
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Add tools to the built-in ones (or to those given to [`tools`](Self::tools)), such as
    /// an MCP server's: the built-in `bash` still drops the secrets of
    /// [`secret_env`](Self::secret_env).
    pub fn extra_tools(mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        self.extra_tools.extend(tools);
        self
    }

    /// The environment variables the built-in `bash` drops (default [`SecretEnv::default`]);
    /// the `api_key_env` of every provider table is added to them at build time.
    pub fn secret_env(mut self, secrets: SecretEnv) -> Self {
        self.secret_env = secrets;
        self
    }

    /// Add a hook (children run with it too).
    pub fn hook(mut self, hook: Arc<dyn ToolHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Approval mode and rules (children inherit them).
    pub fn permissions(mut self, policy: PermissionPolicy) -> Self {
        self.permissions = policy;
        self
    }

    /// What file tools may do in the workspace: extra protected paths, hard-linked reads
    /// (children inherit it). `bypass` mode turns the protection off whatever this says.
    pub fn file_access(mut self, policy: AccessPolicy) -> Self {
        self.file_access = policy;
        self
    }

    /// The main agent's budgets (mirrored by `general-purpose`).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Per-tool timeout.
    pub fn tool_timeout(mut self, timeout: Duration) -> Self {
        self.tool_timeout = timeout;
        self
    }

    /// Parallel tool calls of one reply.
    pub fn max_parallel_tools(mut self, n: usize) -> Self {
        self.max_parallel_tools = n.max(1);
        self
    }

    /// Tool outputs above this many bytes are stored under `.cadre/tool-outputs/`.
    pub fn offload_threshold(mut self, bytes: usize) -> Self {
        self.offload_threshold = bytes;
        self
    }

    /// Cap the output tokens of every model call (main agent and children).
    pub fn max_output_tokens(mut self, n: u32) -> Self {
        self.max_output_tokens = Some(n);
        self
    }

    /// Cap one model reply (text, thinking, tool arguments) at `n` bytes, for the main
    /// agent and children (default 4 MiB).
    pub fn max_reply_bytes(mut self, n: usize) -> Self {
        self.max_reply_bytes = n.max(1);
        self
    }

    /// Declare a sub-agent in code.
    pub fn subagent(mut self, def: AgentDefinition) -> Self {
        self.declarations.push(def);
        self
    }

    /// Register a custom factory that builds the child agent itself.
    pub fn subagent_factory(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        factory: AgentFactory,
    ) -> Self {
        self.factories
            .push((name.into(), description.into(), factory));
        self
    }

    /// Do not read definition files from the workspace and the user directory.
    pub fn without_agent_files(mut self) -> Self {
        self.load_files = false;
        self
    }

    /// The user's agent directory (default `~/.config/cadre/agents`; `None` to skip it).
    pub fn user_agents_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.user_dir = dir;
        self
    }

    /// Compact conversations (the main agent's and every child's) as `policy` says, with
    /// summaries written by `model` (`provider:model`; none: each agent's own model).
    pub fn compaction(mut self, policy: CompactionPolicy, model: Option<String>) -> Self {
        self.compaction = Some((policy, model));
        self
    }

    /// Model prices (default: the built-in table); models without one have an unknown cost.
    pub fn prices(mut self, prices: PriceTable) -> Self {
        self.prices = prices;
        self
    }

    /// The project-memory files of the workspace, in order of preference (default
    /// `AGENTS.md`, then `CLAUDE.md`): the first present and not empty goes into the main
    /// prompt, once. An empty list reads none.
    pub fn project_memory(mut self, files: Vec<String>) -> Self {
        self.memory_files = files;
        self
    }

    /// Model aliases used by definition files (`sonnet` → `anthropic:...`).
    pub fn model_aliases(mut self, aliases: HashMap<String, String>) -> Self {
        self.aliases = aliases;
        self
    }

    /// Remove the built-in `general-purpose` agent.
    pub fn disable_general_purpose(mut self) -> Self {
        self.disable_general_purpose = true;
        self
    }

    /// No sub-agents at all: the main agent gets no delegation tools.
    pub fn disable_subagents(mut self) -> Self {
        self.disable_subagents = true;
        self
    }

    /// Keep sessions in memory only (default: JSONL under `.cadre/sessions/`).
    pub fn in_memory_sessions(mut self) -> Self {
        self.persist_sessions = false;
        self
    }

    /// Write every task and live child through this persistent store (see `cadre-store`).
    pub fn store(mut self, store: Arc<dyn cadre_store::TaskStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Sandbox the processes agents start (`bash`): the main agent per `settings.main`,
    /// children per their definition or `settings.subagents`, each narrowed to its
    /// parent's. Without this nothing is sandboxed. The launcher's program must call
    /// [`cadre_sandbox::run_launcher_if_requested`] first thing in `main`.
    pub fn sandbox(mut self, settings: SandboxSettings) -> Self {
        self.sandbox = Some(settings);
        self
    }

    /// Adjust the sub-agent runtime's settings (depth cap, concurrency, surfaces, ...).
    pub fn runtime_config(mut self, f: impl FnOnce(&mut RuntimeConfig) + 'static) -> Self {
        self.tweak = Some(Box::new(f));
        self
    }

    /// Build the harness.
    #[expect(
        clippy::too_many_lines,
        reason = "the harness builder: one step per setting, in the order they depend on each other"
    )]
    pub fn build(self) -> Result<Harness, HarnessError> {
        let ws = self
            .workspace
            .canonicalize()
            .map_err(|source| HarnessError::Workspace {
                path: self.workspace.clone(),
                source,
            })?;
        // Providers' key variables are secrets the model's processes must not inherit.
        let secrets = self
            .provider_configs
            .values()
            .filter_map(|c| c.api_key_env.clone())
            .fold(self.secret_env, SecretEnv::with_secret);
        let instances: Vec<&str> = self
            .provider_instances
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        let providers = Arc::new(
            ProviderRegistry::for_model(self.provider_configs, &instances, &self.model)
                .with_prices(self.prices),
        );
        for (name, p) in self.provider_instances {
            providers.insert(&name, p);
        }
        let model = providers.resolve(&self.model)?;
        let compaction = match self.compaction {
            Some((mut policy, summariser)) => {
                if let Some(spec) = summariser {
                    policy.model = Some(providers.resolve(&spec)?);
                }
                Some(policy)
            }
            None => None,
        };
        let sessions_dir = self.persist_sessions.then(|| Harness::sessions_dir_of(&ws));
        let custom_tools = self.tools.is_some();
        let mut base_tools = self
            .tools
            .unwrap_or_else(|| builtin_tools_with_secrets(secrets.clone()));
        for t in self.extra_tools {
            base_tools.register(t);
        }
        let skills = SkillSet::discover(&ws);

        let mut registry = AgentRegistry::builder()
            .workspace(&ws)
            .user_dir(self.user_dir)
            .providers(providers.clone())
            .aliases(self.aliases.clone())
            .skills(skills.clone())
            // Definitions may list any tool this harness has (a configured `web_search`).
            .known_tools(base_tools.names().into_iter().map(str::to_string));
        if !self.load_files || self.disable_subagents {
            registry = registry.without_files();
        }
        if self.disable_general_purpose || self.disable_subagents {
            registry = registry.disable_general_purpose();
        }
        if !self.disable_subagents {
            for d in self.declarations {
                registry = registry.declare(d);
            }
            for (name, description, f) in self.factories {
                registry = registry.factory(name, description, f);
            }
        }
        let registry = registry.load();
        // The variables remote agents' headers name are secrets too: `bash` does not see them.
        let header_vars: Vec<String> = registry
            .list()
            .filter_map(|d| d.remote.as_ref())
            .flat_map(|r| r.headers.values())
            .flat_map(|v| cadre_types::env_ref::referenced_names(v))
            .map(str::to_string)
            .collect();
        if !custom_tools && !header_vars.is_empty() {
            base_tools.register(Arc::new(cadre_tools::builtin::BashTool::new(
                secrets.with_secrets(header_vars),
            )));
        }

        let store = self.store.unwrap_or_else(|| {
            Arc::new(cadre_store::MemoryStore::new(cadre_store::NodeId::detect(
                &ws,
            )))
        });
        let mut rc = RuntimeConfig::new(ws.clone(), store);
        rc.sessions_dir = sessions_dir.clone();
        rc.memory_files = self.memory_files.clone();
        rc.base_tools = base_tools.clone();
        rc.hooks = self.hooks.clone();
        rc.permissions = self.permissions.clone();
        rc.file_access = self.file_access;
        rc.parent_limits = self.limits;
        rc.tool_timeout = self.tool_timeout;
        rc.max_parallel_tools = self.max_parallel_tools;
        rc.offload_threshold = self.offload_threshold;
        rc.max_output_tokens = self.max_output_tokens;
        rc.max_reply_bytes = self.max_reply_bytes;
        rc.sandbox = self.sandbox;
        rc.compaction = compaction.clone();
        if let Some(f) = self.tweak {
            f(&mut rc);
        }
        let file_access = rc.file_access(None, &ws);
        let main_sandbox = rc
            .sandbox
            .as_ref()
            .and_then(|s| rc.sandbox_for(&s.main_policy(&ws), &file_access, &ws));
        let runtime = SubagentRuntime::new(rc, registry, skills.clone(), providers.clone());
        let delegates = !self.disable_subagents
            && !runtime.registry().is_empty()
            && runtime.config().max_depth > 0;
        let mut tools = if self.disable_subagents || runtime.registry().is_empty() {
            base_tools
        } else {
            // With `max_depth = 0` this withholds the delegation tools with the depth refusal.
            runtime.top_level_tools()
        };
        if let Some(policy) = main_sandbox.as_ref().map(|s| s.policy())
            && policy.denies_network()
        {
            tools.withhold_network(policy.mode.as_str());
        }
        let prompt = self.system_prompt.unwrap_or_else(|| {
            let mut p = cadre_engine::prompt::main_system_prompt_with(&ws, &self.memory_files);
            if let Some(index) = skills.index_section() {
                p.push_str("\n\n");
                p.push_str(index.trim_end());
            }
            p
        });
        let mut b = Agent::builder(self.name.clone(), model)
            .system_prompt(prompt)
            .tools(tools)
            .limits(self.limits)
            .permissions(self.permissions)
            .tool_timeout(self.tool_timeout)
            .max_parallel_tools(self.max_parallel_tools)
            .offloader(Offloader::new(&ws, self.offload_threshold));
        for h in self.hooks {
            b = b.hook(h);
        }
        if let Some(n) = self.max_output_tokens {
            b = b.max_output_tokens(n);
        }
        b = b.max_reply_bytes(self.max_reply_bytes);
        if delegates {
            b = b.extension(Arc::new(SubagentContext::new(runtime.clone())));
        }
        if let Some(policy) = compaction {
            b = b.compaction(policy);
        }
        Ok(Harness {
            name: self.name,
            providers,
            workspace: ws,
            file_access,
            sandbox: main_sandbox,
            sessions_dir,
            runtime,
            agent: b.build(),
            aliases: self.aliases,
        })
    }
}

/// What a run needs besides the prompt.
pub struct RunOptions {
    /// Where events go.
    pub events: Arc<dyn EventSink>,
    /// Who answers approval requests.
    pub approvals: Arc<dyn ApprovalHandler>,
    /// Cancels the run.
    pub cancel: CancellationToken,
    /// The user the run acts for.
    pub user_id: Option<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            events: Arc::new(NullSink),
            approvals: Arc::new(
                NonInteractiveApprovals::new(false)
                    .policy("RunOptions without an approval handler"),
            ),
            cancel: CancellationToken::new(),
            user_id: None,
        }
    }
}

/// A ready main agent with its sub-agent runtime.
pub struct Harness {
    name: String,
    providers: Arc<ProviderRegistry>,
    workspace: PathBuf,
    file_access: AccessPolicy,
    /// The main agent's sandbox (none: its processes are not confined).
    sandbox: Option<Arc<Sandbox>>,
    sessions_dir: Option<PathBuf>,
    runtime: Arc<SubagentRuntime>,
    agent: Agent,
    /// Model aliases, for `/model sonnet` as for definition files.
    aliases: HashMap<String, String>,
}

impl Harness {
    /// Start building.
    pub fn builder() -> HarnessBuilder {
        HarnessBuilder::default()
    }

    /// The main agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Run the main agent on `spec` (`provider:model`, or an alias such as `sonnet`) from
    /// the next run on; children that inherit the model follow it. Returns the spec chosen.
    pub fn set_model(&mut self, spec: &str) -> Result<String, HarnessError> {
        let spec = crate::main_model_spec(spec, &self.aliases);
        let model = self.providers.resolve(&spec)?;
        self.agent = self.agent.with_model(model);
        Ok(spec)
    }

    /// The sub-agent runtime.
    pub fn runtime(&self) -> &Arc<SubagentRuntime> {
        &self.runtime
    }

    /// The main agent as the parent of a sub-agent run started for `run` without a tool
    /// call (the `@agent` direct run): children narrow from the main agent's tools.
    pub fn main_parent(&self, run: Arc<RunContext>, cancel: CancellationToken) -> Parent {
        Parent {
            run,
            cancel,
            tools: Arc::new(self.agent.config().tools.clone()),
            inherited: self.runtime.top_inherited().clone(),
            root: self.workspace.clone(),
        }
    }

    /// The workspace root.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The main agent's [`Workspace`]: its root, with the file-access policy for the
    /// approval mode and the main agent's sandbox. Pass it to [`Agent::run`] when driving
    /// the agent directly.
    pub fn open_workspace(&self) -> std::io::Result<Workspace> {
        Ok(Workspace::new(&self.workspace)?
            .with_policy(self.file_access.clone())
            .with_sandbox(self.sandbox.clone()))
    }

    /// Where sessions are saved, if they are.
    pub fn sessions_dir(&self) -> Option<&Path> {
        self.sessions_dir.as_deref()
    }

    /// A new session for the main agent.
    pub fn new_session(&self) -> Result<Session, HarnessError> {
        let meta = SessionMeta {
            id: new_session_id(),
            agent: self.name.clone(),
            model: self.agent.config().model.spec.clone(),
            created_at: unix_millis(),
            parent_session_id: None,
        };
        Ok(match &self.sessions_dir {
            Some(dir) => Session::create(dir, meta)?,
            None => Session::in_memory(meta),
        })
    }

    /// Where the sessions of the workspace `root` are saved.
    pub fn sessions_dir_of(root: &Path) -> PathBuf {
        root.join(".cadre").join("sessions")
    }

    /// Reopen a saved session.
    pub fn open_session(&self, id: &str) -> Result<Session, HarnessError> {
        match &self.sessions_dir {
            Some(dir) => Ok(Session::open(dir, id)?),
            None => Err(HarnessError::Session(SessionError::NotFound {
                id: id.to_string(),
                dir: PathBuf::new(),
            })),
        }
    }

    /// Run `prompt` in a new session with no event sink and approvals denied.
    pub async fn run(&self, prompt: &str) -> Result<RunOutcome, HarnessError> {
        let mut session = self.new_session()?;
        Ok(self
            .run_in(&mut session, prompt, RunOptions::default())
            .await)
    }

    /// Run `prompt` in `session` with the given channels. Background sub-agents started by
    /// the run are waited for and their results delivered before it ends.
    pub async fn run_in(
        &self,
        session: &mut Session,
        prompt: &str,
        opts: RunOptions,
    ) -> RunOutcome {
        self.run_in_as(&self.agent, session, prompt, opts).await
    }

    /// [`Harness::run_in`] with `agent` in place of the main agent for this one run (the
    /// main agent narrowed for a slash command's `allowed-tools`).
    pub async fn run_in_as(
        &self,
        agent: &Agent,
        session: &mut Session,
        prompt: &str,
        opts: RunOptions,
    ) -> RunOutcome {
        let cancel = opts.cancel.clone();
        let run = self.top_run(session, opts);
        let ws = match self.open_workspace() {
            Ok(w) => Arc::new(w),
            Err(e) => {
                return RunOutcome {
                    state: cadre_types::EndState::Failed {
                        error: format!("workspace {}: {e}", self.workspace.display()),
                    },
                    output: String::new(),
                    turns: 0,
                    usage: Default::default(),
                };
            }
        };
        agent
            .run(session, Some(prompt.to_string()), run, ws, cancel)
            .await
    }

    /// A run of its own for what arrived while the conversation was idle (results of
    /// background tasks): no new prompt; the run's first request carries the results, each
    /// delivered once.
    pub async fn deliver_in(&self, session: &mut Session, opts: RunOptions) -> RunOutcome {
        let cancel = opts.cancel.clone();
        let run = self.top_run(session, opts);
        match self.open_workspace() {
            Ok(ws) => {
                self.agent
                    .run(session, None, run, Arc::new(ws), cancel)
                    .await
            }
            Err(e) => RunOutcome {
                state: cadre_types::EndState::Failed {
                    error: format!("workspace {}: {e}", self.workspace.display()),
                },
                output: String::new(),
                turns: 0,
                usage: Default::default(),
            },
        }
    }

    /// Compact `session` now (`/compact`), whether or not compaction is automatic:
    /// the older turns are summarised with the configured policy, `instructions` added to
    /// the summary prompt. The `compaction` event goes to `opts.events`.
    pub async fn compact(
        &self,
        session: &mut Session,
        instructions: Option<&str>,
        opts: RunOptions,
    ) -> Result<CompactionReport, CompactionError> {
        let cancel = opts.cancel.clone();
        let run = self.top_run(session, opts);
        self.agent.compact(session, instructions, run, cancel).await
    }

    /// The context of a top-level run of the main agent in `session`.
    fn top_run(&self, session: &Session, opts: RunOptions) -> Arc<RunContext> {
        Arc::new(RunContext {
            session_id: session.id().to_string(),
            agent: self.name.clone(),
            model: self.agent.config().model.spec.clone(),
            task_id: None,
            user_id: opts.user_id,
            parent_session_id: None,
            depth: 0,
            tool_grant: cadre_tools::ToolGrant::unrestricted(),
            budget: cadre_tools::Budget::unlimited(),
            trace_id: new_session_id().replacen("s-", "", 1),
            events: opts.events,
            approvals: opts.approvals,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_route_by_their_prefix_and_unknown_prefixes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        // Local base URLs: no key is needed, whatever the environment holds.
        let local = |url: &str| ProviderConfig {
            base_url: Some(url.into()),
            ..Default::default()
        };
        let builder = |spec: &str| {
            Harness::builder()
                .model(spec)
                .workspace(dir.path())
                .provider("openai", local("http://127.0.0.1:9/v1"))
                .provider("anthropic", local("http://127.0.0.1:9"))
                .without_agent_files()
                .in_memory_sessions()
        };
        for (spec, provider, model) in [
            ("gpt-4o", "openai", "gpt-4o"),
            ("openai/gpt-4o", "openai", "openai/gpt-4o"),
            ("ollama:qwen3:8b", "ollama", "qwen3:8b"),
            ("anthropic:claude-x", "anthropic", "claude-x"),
        ] {
            let h = builder(spec).build().unwrap();
            let m = &h.agent().config().model;
            assert_eq!(
                (m.provider.name(), m.model.as_str()),
                (provider, model),
                "{spec}"
            );
        }
        let Err(err) = builder("qwen3:8b").build() else {
            panic!("an unknown prefix must be refused")
        };
        let err = err.to_string();
        assert!(err.contains("unknown provider `qwen3`"), "{err}");
    }
}
