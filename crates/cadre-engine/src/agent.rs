//! An agent: a model, a system prompt, tools, limits and policies, ready to run sessions.

use crate::session::Session;
use crate::{
    CompactionError, CompactionPolicy, CompactionReport, Offloader, PermissionPolicy, ToolHook,
    TurnExtension, TurnObserver, run_loop,
};
use cadre_llm::ResolvedModel;
use cadre_tools::{RunContext, ToolRegistry, Workspace};
use cadre_types::{EndState, Usage};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Default per-tool timeout.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default number of tool calls of one reply that run at the same time.
pub const DEFAULT_MAX_PARALLEL_TOOLS: usize = 16;

/// Budgets of one run. Hitting any of them ends the run with `limit_reached`. The token and
/// wall-clock budgets count everything run on the run's behalf too (see [`Budget`]).
///
/// [`Budget`]: cadre_tools::Budget
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Maximum model turns (default 50).
    pub max_turns: u32,
    /// Wall-clock budget.
    pub wall_clock: Option<Duration>,
    /// Token budget (input + output, summed over the run's model calls and those of
    /// everything run on its behalf).
    pub max_tokens: Option<u64>,
    /// Budget in dollars, counted like the token budget over the calls whose model has a
    /// price (a model without one is announced with a notice at the start of its run).
    pub max_cost_usd: Option<f64>,
}

impl Limits {
    /// The limits of the run's node in the budget tree.
    pub fn budget(&self) -> cadre_tools::BudgetLimits {
        cadre_tools::BudgetLimits {
            max_tokens: self.max_tokens,
            wall_clock: self.wall_clock,
            max_cost_nano_usd: self.max_cost_usd.map(cadre_types::usd_to_nanos),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_turns: 50,
            wall_clock: None,
            max_tokens: None,
            max_cost_usd: None,
        }
    }
}

/// Everything that defines an agent.
pub struct AgentConfig {
    /// The agent's name (`main` for the top level).
    pub name: String,
    /// The model and its provider.
    pub model: ResolvedModel,
    /// The base system prompt; never mutated (per-turn sections are added to a copy).
    pub system_prompt: String,
    /// The tools offered.
    pub tools: ToolRegistry,
    /// Budgets.
    pub limits: Limits,
    /// Per-tool timeout (tools flagged `timeout_exempt` ignore it).
    pub tool_timeout: Duration,
    /// How many tool calls of one reply run at once.
    pub max_parallel_tools: usize,
    /// Hooks around tool calls, in order.
    pub hooks: Vec<Arc<dyn ToolHook>>,
    /// Approval mode and rules.
    pub permissions: PermissionPolicy,
    /// Per-turn context contributors.
    pub extensions: Vec<Arc<dyn TurnExtension>>,
    /// Where oversized tool outputs go (none: never offload).
    pub offloader: Option<Offloader>,
    /// Output token cap per model call.
    pub max_output_tokens: Option<u32>,
    /// Cap on one model reply's text, thinking and tool arguments, in bytes (default
    /// [`cadre_llm::DEFAULT_MAX_REPLY_BYTES`]); past it the run ends `limit reached`.
    pub max_reply_bytes: usize,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// When and how the conversation is compacted (none: never).
    pub compaction: Option<CompactionPolicy>,
    /// Tools that reach the network by their own rules even when the workspace's process
    /// sandbox has no network (a sub-agent's definition names them): `web_fetch` keeps its
    /// private-address guard and `web_fetch(domain:…)` rules, processes stay without network.
    pub network_tools: Vec<String>,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("name", &self.name)
            .field("model", &self.model.spec)
            .field("tools", &self.tools)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// How a run ended and what it produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// The end state.
    pub state: EndState,
    /// The final answer, or the partial output when the run did not complete.
    pub output: String,
    /// Model turns used.
    pub turns: u32,
    /// Tokens used by this run's model calls and by everything run on its behalf.
    pub usage: Usage,
}

/// A runnable agent. Cheap to clone and to share between tasks.
#[derive(Debug, Clone)]
pub struct Agent {
    config: Arc<AgentConfig>,
}

impl Agent {
    /// Start building an agent on `model`.
    pub fn builder(name: impl Into<String>, model: ResolvedModel) -> AgentBuilder {
        AgentBuilder {
            config: AgentConfig {
                name: name.into(),
                model,
                system_prompt: String::new(),
                tools: ToolRegistry::new(),
                limits: Limits::default(),
                tool_timeout: DEFAULT_TOOL_TIMEOUT,
                max_parallel_tools: DEFAULT_MAX_PARALLEL_TOOLS,
                hooks: Vec::new(),
                permissions: PermissionPolicy::default(),
                extensions: Vec::new(),
                offloader: None,
                max_output_tokens: None,
                max_reply_bytes: cadre_llm::DEFAULT_MAX_REPLY_BYTES,
                temperature: None,
                compaction: None,
                network_tools: Vec::new(),
            },
        }
    }

    /// An agent from a complete configuration.
    pub fn from_config(config: AgentConfig) -> Self {
        Self {
            config: Arc::new(config),
        }
    }

    /// The same agent on another model.
    pub fn with_model(&self, model: ResolvedModel) -> Self {
        let c = &*self.config;
        Self::from_config(AgentConfig {
            name: c.name.clone(),
            model,
            system_prompt: c.system_prompt.clone(),
            tools: c.tools.clone(),
            limits: c.limits,
            tool_timeout: c.tool_timeout,
            max_parallel_tools: c.max_parallel_tools,
            hooks: c.hooks.clone(),
            permissions: c.permissions.clone(),
            extensions: c.extensions.clone(),
            offloader: c.offloader.clone(),
            max_output_tokens: c.max_output_tokens,
            max_reply_bytes: c.max_reply_bytes,
            temperature: c.temperature,
            compaction: c.compaction.clone(),
            network_tools: c.network_tools.clone(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Run the agent on `session`: append `prompt` (if any) as a user message and loop until
    /// the model answers, a limit hits, an error occurs or `cancel` fires. Events go to
    /// `run.events`; the outcome is also returned.
    pub async fn run(
        &self,
        session: &mut Session,
        prompt: Option<String>,
        run: Arc<RunContext>,
        workspace: Arc<Workspace>,
        cancel: CancellationToken,
    ) -> RunOutcome {
        self.run_observed(
            session,
            prompt,
            run,
            workspace,
            cancel,
            &crate::observer::Unobserved,
        )
        .await
    }

    /// [`run`](Self::run), with `observer` shown the conversation at every turn boundary.
    pub async fn run_observed(
        &self,
        session: &mut Session,
        prompt: Option<String>,
        run: Arc<RunContext>,
        workspace: Arc<Workspace>,
        cancel: CancellationToken,
        observer: &dyn TurnObserver,
    ) -> RunOutcome {
        run_loop::run(
            &self.config,
            session,
            run_loop::Start::Prompt(prompt),
            run,
            workspace,
            cancel,
            observer,
        )
        .await
    }

    /// Continue `session`, a conversation an earlier run left (restored from a checkpoint),
    /// from its next step, without a new prompt: what it spent is charged first and its
    /// replies count as turns; the calls of its last reply without a result are run again
    /// when their tool only reads or is idempotent, and otherwise answered with
    /// `interrupted: outcome unknown (<resume.why>)`. Then the loop goes on as in
    /// [`run`](Self::run). A conversation that ends with a reply asking for nothing was
    /// answered already: the run completes with that reply, without a model call.
    pub async fn resume_observed(
        &self,
        session: &mut Session,
        resume: &crate::Resume,
        run: Arc<RunContext>,
        workspace: Arc<Workspace>,
        cancel: CancellationToken,
        observer: &dyn TurnObserver,
    ) -> RunOutcome {
        run_loop::run(
            &self.config,
            session,
            run_loop::Start::Resume(resume),
            run,
            workspace,
            cancel,
            observer,
        )
        .await
    }

    /// Compact `session` now (`/compact`, `cadre run --compact-now`): summarise all but the
    /// latest turns with the policy's model (or the agent's), with `instructions` added to
    /// the summarisation prompt. Works without a configured policy too, with the defaults.
    /// The summary call spends from `run`'s budget: it is not made once that is used up
    /// ([`CompactionError::LimitReached`]), and it is charged to it.
    pub async fn compact(
        &self,
        session: &mut Session,
        instructions: Option<&str>,
        run: Arc<RunContext>,
        cancel: CancellationToken,
    ) -> Result<CompactionReport, CompactionError> {
        let c = &*self.config;
        let default_policy = CompactionPolicy::default();
        let system = run_loop::system_prompt(c, &run);
        let compaction = crate::compaction::Compaction {
            model: &c.model,
            policy: c.compaction.as_ref().unwrap_or(&default_policy),
            run: &run,
            fixed_bytes: crate::compaction::fixed_bytes(&system, &c.tools.definitions()),
            instructions,
            manual: true,
            hooks: &c.hooks,
        };
        // Asked for by whoever holds the session, outside any run: no observer holds it
        // back (a durable child's lease guards its own runs' steps, not this), only the
        // budget and `cancel` stop it.
        let stop = crate::run_state::Stop {
            token: cancel.child_token(),
            budget: run.budget.clone(),
        };
        compaction
            .run(session, &stop, &crate::observer::Unobserved)
            .await
    }
}

/// Builder for [`Agent`].
pub struct AgentBuilder {
    config: AgentConfig,
}

impl AgentBuilder {
    /// The base system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.config.system_prompt = prompt.into();
        self
    }

    /// The tools.
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.config.tools = tools;
        self
    }

    /// Budgets.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.config.limits = limits;
        self
    }

    /// Per-tool timeout.
    pub fn tool_timeout(mut self, timeout: Duration) -> Self {
        self.config.tool_timeout = timeout;
        self
    }

    /// Parallel tool calls cap (at least 1).
    pub fn max_parallel_tools(mut self, n: usize) -> Self {
        self.config.max_parallel_tools = n.max(1);
        self
    }

    /// Add a hook (runs after the ones added before).
    pub fn hook(mut self, hook: Arc<dyn ToolHook>) -> Self {
        self.config.hooks.push(hook);
        self
    }

    /// Approval mode and rules.
    pub fn permissions(mut self, policy: PermissionPolicy) -> Self {
        self.config.permissions = policy;
        self
    }

    /// Let the tools `names` reach the network whatever the process sandbox says (see
    /// [`AgentConfig::network_tools`]).
    pub fn network_tools(mut self, names: Vec<String>) -> Self {
        self.config.network_tools = names;
        self
    }

    /// Add a per-turn extension.
    pub fn extension(mut self, ext: Arc<dyn TurnExtension>) -> Self {
        self.config.extensions.push(ext);
        self
    }

    /// Offload oversized tool outputs.
    pub fn offloader(mut self, offloader: Offloader) -> Self {
        self.config.offloader = Some(offloader);
        self
    }

    /// Output token cap per model call.
    pub fn max_output_tokens(mut self, n: u32) -> Self {
        self.config.max_output_tokens = Some(n);
        self
    }

    /// Cap on one model reply's bytes (at least 1).
    pub fn max_reply_bytes(mut self, n: usize) -> Self {
        self.config.max_reply_bytes = n.max(1);
        self
    }

    /// Compact the conversation as `policy` says.
    pub fn compaction(mut self, policy: CompactionPolicy) -> Self {
        self.config.compaction = Some(policy);
        self
    }

    /// Build the agent.
    pub fn build(self) -> Agent {
        Agent::from_config(self.config)
    }
}
