//! What a run fixes when it starts (its budget node, request prefix, compaction settings),
//! and its first phase: settling what an earlier run left and submitting the prompt.

use super::{Emitter, LoopState, Start, Step, boundary, cache_key, persist_failed, system_prompt};
use crate::agent::AgentConfig;
use crate::compaction::Compaction;
use crate::dispatch::Dispatcher;
use crate::observer::TurnObserver;
use crate::run_state::{AbortOnDrop, Stop};
use crate::session::Session;
use crate::settle::Settle;
use cadre_llm::RequestMetadata;
use cadre_tools::{RunContext, Spend, Workspace};
use cadre_types::{EndState, Event, ToolDefinition};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// What every phase of a run reads: fixed when the run starts.
pub(super) struct RunLoop<'a> {
    pub(super) cfg: &'a AgentConfig,
    /// The run's context, with its own node of the budget.
    pub(super) run: Arc<RunContext>,
    pub(super) emitter: Emitter,
    pub(super) stop: Stop,
    /// The caller's cancellation (the run's own is `stop.token`, its child).
    pub(super) cancel: CancellationToken,
    pub(super) observer: &'a dyn TurnObserver,
    pub(super) dispatcher: Dispatcher<'a>,
    /// The prefix of every request of this run: fixed for the run (see `TurnExtension`).
    pub(super) system: String,
    pub(super) tools: Vec<ToolDefinition>,
    pub(super) metadata: RequestMetadata,
    /// The policy when the agent has none (compaction on request only).
    default_policy: crate::CompactionPolicy,
    /// The bytes of `system` and `tools`, in every request.
    pub(super) fixed_bytes: usize,
    /// Compaction happens on its own (before a full request, after a refused one).
    pub(super) automatic: bool,
    /// The estimate above which the conversation is compacted before a request.
    pub(super) context_limit: Option<u64>,
    pub(super) started: Instant,
    /// Cancels `stop` when the budget runs out; ends with the run.
    _budget_watch: Option<AbortOnDrop>,
}

impl<'a> RunLoop<'a> {
    /// Start a run of `cfg` on `session`: announce it, fix what its requests share.
    pub(super) fn new(
        cfg: &'a AgentConfig,
        session: &Session,
        run: Arc<RunContext>,
        workspace: Arc<Workspace>,
        cancel: CancellationToken,
        observer: &'a dyn TurnObserver,
    ) -> Self {
        // The run spends from its own node, under the one its caller gave it; the tools it
        // calls see that node, so whatever they run on its behalf is charged to it too.
        let budget = run.budget.child(cfg.limits.budget());
        let run = Arc::new(RunContext {
            budget: budget.clone(),
            ..(*run).clone()
        });
        let emitter = Emitter::new(run.clone());
        emitter.emit(Event::RunStarted {
            model: cfg.model.spec.clone(),
        });
        let stop = Stop {
            token: cancel.child_token(),
            budget,
        };
        let budget_watch = stop.watch_budget();
        if stop.budget.is_cost_limited() && cfg.model.price.is_none() {
            emitter.emit(Event::Notice {
                message: format!(
                    "the budget in dollars does not count {}: its price is unknown (add it under \
                     [models.prices])",
                    cfg.model.spec
                ),
            });
        }
        let started = Instant::now();
        let dispatcher = Dispatcher::new(
            cfg,
            run.clone(),
            workspace,
            session.approved_tools(),
            session.journal(),
        );
        let system = system_prompt(cfg, &run);
        let tools = dispatcher.definitions();
        let metadata = RequestMetadata {
            agent: run.agent.clone(),
            session_id: run.session_id.clone(),
            cache_key: cache_key(&run),
        };
        let fixed_bytes = crate::compaction::fixed_bytes(&system, &tools);
        let automatic = cfg.compaction.as_ref().is_some_and(|p| p.automatic);
        let context_limit = cfg
            .compaction
            .as_ref()
            .and_then(|p| p.limit_for(&cfg.model));
        if automatic && context_limit.is_none() {
            unknown_window(cfg, &emitter);
        }
        Self {
            cfg,
            run,
            emitter,
            stop,
            cancel,
            observer,
            dispatcher,
            system,
            tools,
            metadata,
            default_policy: crate::CompactionPolicy::default(),
            fixed_bytes,
            automatic,
            context_limit,
            started,
            _budget_watch: budget_watch,
        }
    }

    /// How the run compacts its conversation when it is full.
    pub(super) fn compaction(&self) -> Compaction<'_> {
        Compaction {
            model: &self.cfg.model,
            policy: self.cfg.compaction.as_ref().unwrap_or(&self.default_policy),
            run: &self.run,
            fixed_bytes: self.fixed_bytes,
            instructions: None,
            manual: false,
            hooks: &self.cfg.hooks,
        }
    }

    /// The state of a run that was stopped (cancelled, or its budget ran out).
    pub(super) fn stopped(&self) -> EndState {
        self.stop.state(&self.cancel).unwrap_or(EndState::Cancelled)
    }

    /// Show the observer the conversation as it stands.
    pub(super) async fn boundary(&self, session: &Session) {
        boundary(self.observer, &self.run, session, &self.stop.budget).await;
    }

    /// Before the first turn: restate what a reopened session left in force, settle the
    /// calls an earlier run left without results, stand by the final answer a resumed
    /// conversation ends with (ending the run), and submit the prompt.
    pub(super) async fn prepare(
        &self,
        session: &mut Session,
        start: Start<'_>,
        state: &mut LoopState,
    ) -> Step {
        let cfg = self.cfg;
        // The first run of a reopened session restates what earlier calls left in force (the
        // plan), so whoever watches this run sees it.
        if session.take_reopened() {
            for tool in cfg
                .tools
                .iter()
                .filter(|t| self.run.tool_grant.allows(t.name()))
            {
                if let Some(event) = tool.resumed_state(session.messages()) {
                    self.emitter.emit(event);
                }
            }
        }
        let (prompt, resume) = match start {
            Start::Prompt(p) => (p, None),
            Start::Resume(r) => (None, Some(r)),
        };
        if let Some(resume) = resume {
            // Limits continue from what the earlier run spent and the turns it completed.
            self.stop.budget.charge(Spend::tokens(resume.spent));
            state.turns = crate::resume::completed_turns(session.messages());
        }
        for ext in &cfg.extensions {
            ext.run_starts(&self.run, &self.cancel).await;
        }
        // Calls an earlier run left without results (it was lost while they ran) are settled
        // before anything else joins the conversation.
        let settle = Settle {
            cfg,
            run: &self.run,
            dispatcher: &self.dispatcher,
            stop: &self.stop.token,
            why: resume.map_or(crate::settle::LOST, |r| r.why.as_str()),
            all_started: resume.is_some(),
            gate: self.observer,
        };
        if settle
            .settle(session, state.turns)
            .await
            .map_err(persist_failed)?
        {
            self.boundary(session).await;
        }
        // The copy ends with the final answer: the earlier run completed its last turn and was
        // lost before it could say so. Its answer stands; asking again would redo that turn.
        if resume.is_some()
            && let Some(answer) = crate::resume::final_answer(session.messages())
        {
            state.text.add(answer);
            return Err(EndState::Completed);
        }
        if let Some(p) = prompt {
            crate::hook_points::submit_prompt(cfg, &self.run, session, p).await?;
        }
        Ok(())
    }
}

/// Say that the model's context window is unknown, so nothing compacts on its own. Said
/// once per model by all the agents sharing the policy (a main agent and its children):
/// not at every prompt of an interactive session, nor at every child run.
fn unknown_window(cfg: &AgentConfig, emitter: &Emitter) {
    if cfg
        .compaction
        .as_ref()
        .is_some_and(|p| p.unknown_windows.first(&cfg.model.spec))
    {
        emitter.emit(Event::Notice {
            message: format!(
                "the context window of {} is unknown: no automatic compaction (set it under \
                 [models.context_windows])",
                cfg.model.spec
            ),
        });
    }
}
