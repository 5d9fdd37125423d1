//! The ReAct loop: build the request, stream the reply, run the tool calls, append the
//! observations, repeat until the model answers without tool calls or a limit hits.

use crate::agent::{AgentConfig, RunOutcome};
use crate::compaction::{Compaction, CompactionError, ContextMeter};
use crate::dispatch::{Dispatcher, not_run};
use crate::observer::{TurnBoundary, TurnObserver};
use crate::resume::Resume;
use crate::run_state::{RunText, Stop};
use crate::session::Session;
use crate::settle::Settle;
use crate::stream::{FailedReply, Gate, call_model, charge_call};
use cadre_llm::{ModelRequest, RequestMetadata};
use cadre_tools::{Budget, RunContext, Spend, Workspace};
use cadre_types::{EndState, Event, EventEnvelope, LimitKind, Message};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// How many times a finished run may be held open for outstanding work (background tasks);
/// a safety net — extensions batch deliveries as rounds grow.
const MAX_OUTSTANDING_ROUNDS: u32 = 64;

/// Sends events with the run's ids attached.
#[derive(Clone)]
pub(crate) struct Emitter {
    run: Arc<RunContext>,
}

impl Emitter {
    pub(crate) fn new(run: Arc<RunContext>) -> Self {
        Self { run }
    }

    pub(crate) fn emit(&self, event: Event) {
        self.run.events.emit(EventEnvelope {
            session_id: self.run.session_id.clone(),
            agent: self.run.agent.clone(),
            task_id: self.run.task_id.clone(),
            event,
        });
    }
}

/// The run's system prompt: the base, then each extension's section. Built once per run so
/// that every request of the run opens with the same bytes (the cached prefix).
pub(crate) fn system_prompt(cfg: &AgentConfig, run: &RunContext) -> String {
    let mut prompt = cfg.system_prompt.clone();
    for ext in &cfg.extensions {
        if let Some(section) = ext.system_section(run) {
            if !prompt.is_empty() {
                prompt.push_str("\n\n");
            }
            prompt.push_str(&section);
        }
    }
    prompt
}

/// Append the extensions' messages (live state, finished background work), written to the
/// transcript at once. Returns which extensions gave some: they are told once the messages
/// are recorded ([`recorded`]).
async fn inject(
    cfg: &AgentConfig,
    run: &RunContext,
    session: &mut Session,
) -> Result<Vec<usize>, crate::SessionError> {
    let mut gave = Vec::new();
    for (i, ext) in cfg.extensions.iter().enumerate() {
        let messages = ext.take_injections(run, session.messages()).await;
        if !messages.is_empty() {
            gave.push(i);
        }
        for m in messages {
            session.push(m)?;
        }
    }
    if !gave.is_empty() {
        session.flush()?;
    }
    Ok(gave)
}

/// Tell the extensions in `gave` that what they injected is recorded: in the transcript and
/// in the turn boundary's checkpoint (a durable child is continued from that, elsewhere). A
/// finished task is marked delivered only now, so a kill before leaves it undelivered and
/// recorded nowhere, or recorded and seen in the history the next run reads.
async fn recorded(cfg: &AgentConfig, run: &RunContext, gave: &mut Vec<usize>) {
    gave.sort_unstable();
    gave.dedup();
    for i in gave.drain(..) {
        if let Some(ext) = cfg.extensions.get(i) {
            ext.recorded(run).await;
        }
    }
}

/// Show the observer the conversation as it stands.
async fn boundary(
    observer: &dyn TurnObserver,
    run: &RunContext,
    session: &Session,
    budget: &Budget,
) {
    let boundary = TurnBoundary {
        history: session.messages(),
        compactions: session.compactions(),
        usage: budget.spent().usage,
    };
    observer.turn_boundary(run, boundary).await;
}

/// The prompt-cache routing key of a run's requests: the session for a top-level run (its
/// requests extend each other), the agent's name for a sub-agent (children of one
/// definition share their system prompt and tools, so a fan-out lands on the same cache).
fn cache_key(run: &RunContext) -> String {
    if run.depth == 0 {
        run.session_id.clone()
    } else {
        run.agent.clone()
    }
}

/// How a run begins: with a prompt (or none, to answer what the session holds), or by
/// resuming a conversation an earlier run left.
pub(crate) enum Start<'a> {
    Prompt(Option<String>),
    Resume(&'a Resume),
}

pub(crate) async fn run(
    cfg: &AgentConfig,
    session: &mut Session,
    start: Start<'_>,
    run: Arc<RunContext>,
    workspace: Arc<Workspace>,
    cancel: CancellationToken,
    observer: &dyn TurnObserver,
) -> RunOutcome {
    // A sub-agent's run is already in the `invoke_agent` span its runtime opened (that span
    // is the child of the spawning tool call, also for background children): it records its
    // end there. The top-level run opens its own.
    let span = match run.task_id {
        Some(_) => tracing::Span::current(),
        None => cadre_tools::otel::invoke_agent(cadre_tools::otel::AgentSpan {
            agent: &run.agent,
            task_id: None,
            session_id: &run.session_id,
            model: &cfg.model.spec,
            depth: run.depth,
            background: false,
            remote: false,
        }),
    };
    let outcome = run_inner(cfg, session, start, run, workspace, cancel, observer)
        .instrument(span.clone())
        .await;
    crate::spans::record_end(&span, &outcome);
    outcome
}

async fn run_inner(
    cfg: &AgentConfig,
    session: &mut Session,
    start: Start<'_>,
    run: Arc<RunContext>,
    workspace: Arc<Workspace>,
    cancel: CancellationToken,
    observer: &dyn TurnObserver,
) -> RunOutcome {
    // The run spends from its own node, under the one its caller gave it; the tools it
    // calls see that node, so whatever they run on its behalf is charged to it too.
    let budget = run.budget.child(cfg.limits.budget());
    let run = Arc::new(RunContext {
        budget: budget.clone(),
        ..(*run).clone()
    });
    let emitter = Emitter { run: run.clone() };
    emitter.emit(Event::RunStarted {
        model: cfg.model.spec.clone(),
    });
    let stop = Stop {
        token: cancel.child_token(),
        budget,
    };
    let _budget_watch = stop.watch_budget();
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
    let mut turns = 0u32;
    let mut text = RunText::default();
    let mut outstanding_rounds = 0u32;
    let dispatcher = Dispatcher::new(
        cfg,
        run.clone(),
        workspace,
        session.approved_tools(),
        session.journal(),
    );
    // The prefix of every request of this run: fixed for the run (see `TurnExtension`).
    let system = system_prompt(cfg, &run);
    let tools = dispatcher.definitions();
    let metadata = RequestMetadata {
        agent: run.agent.clone(),
        session_id: run.session_id.clone(),
        cache_key: cache_key(&run),
    };
    let default_policy = crate::CompactionPolicy::default();
    let compaction = Compaction {
        model: &cfg.model,
        policy: cfg.compaction.as_ref().unwrap_or(&default_policy),
        run: &run,
        fixed_bytes: crate::compaction::fixed_bytes(&system, &tools),
        instructions: None,
        manual: false,
        hooks: &cfg.hooks,
    };
    let automatic = cfg.compaction.as_ref().is_some_and(|p| p.automatic);
    let context_limit = cfg
        .compaction
        .as_ref()
        .and_then(|p| p.limit_for(&cfg.model));
    // Said once per model by all the agents sharing the policy (a main agent and its
    // children): not at every prompt of an interactive session, nor at every child run.
    if automatic
        && context_limit.is_none()
        && cfg
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
    let mut meter = ContextMeter::default();
    let mut overflow_retried = false;
    // After a failed compaction: the estimate above which it is tried again.
    let mut retry_above: Option<u64> = None;

    let persist_failed = |e: crate::SessionError| EndState::Failed {
        error: format!("could not save the session: {e}"),
    };
    // What the run spent includes everything run on its behalf (its node of the budget).
    // The transcript is complete on disk before anyone hears the run ended.
    let finish = |session: &mut Session, state: EndState, text: &RunText, turns: u32| {
        let state = match (session.flush(), state) {
            (Err(e), EndState::Completed) => persist_failed(e),
            (_, state) => state,
        };
        let output = text.output(&state);
        let usage = stop.budget.spent().usage;
        if let EndState::Failed { error } = &state {
            emitter.emit(Event::Error {
                message: error.clone(),
            });
        }
        emitter.emit(Event::Done {
            state: state.clone(),
            output: output.clone(),
            turns,
            usage,
        });
        tracing::info!(
            state = state.name(),
            turns,
            tokens = usage.total(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "run ended"
        );
        RunOutcome {
            state,
            output,
            turns,
            usage,
        }
    };

    // The first run of a reopened session restates what earlier calls left in force (the
    // plan), so whoever watches this run sees it.
    if session.take_reopened() {
        for tool in cfg.tools.iter().filter(|t| run.tool_grant.allows(t.name())) {
            if let Some(event) = tool.resumed_state(session.messages()) {
                emitter.emit(event);
            }
        }
    }
    let (prompt, resume) = match start {
        Start::Prompt(p) => (p, None),
        Start::Resume(r) => (None, Some(r)),
    };
    if let Some(resume) = resume {
        // Limits continue from what the earlier run spent and the turns it completed.
        stop.budget.charge(Spend::tokens(resume.spent));
        turns = crate::resume::completed_turns(session.messages());
    }
    for ext in &cfg.extensions {
        ext.run_starts(&run, &cancel).await;
    }
    // Calls an earlier run left without results (it was lost while they ran) are settled
    // before anything else joins the conversation.
    let settle = Settle {
        cfg,
        run: &run,
        dispatcher: &dispatcher,
        stop: &stop.token,
        why: resume.map_or(crate::settle::LOST, |r| r.why.as_str()),
        all_started: resume.is_some(),
        gate: observer,
    };
    match settle.settle(session, turns).await {
        Ok(true) => boundary(observer, &run, session, &stop.budget).await,
        Ok(false) => {}
        Err(e) => return finish(session, persist_failed(e), &text, turns),
    }
    // The copy ends with the final answer: the earlier run completed its last turn and was
    // lost before it could say so. Its answer stands; asking again would redo that turn.
    if resume.is_some()
        && let Some(answer) = crate::resume::final_answer(session.messages())
    {
        text.add(answer);
        return finish(session, EndState::Completed, &text, turns);
    }
    if let Some(p) = prompt
        && let Err(state) = crate::hook_points::submit_prompt(cfg, &run, session, p).await
    {
        return finish(session, state, &text, turns);
    }
    let mut stop_hook_active = false;

    loop {
        if let Some(state) = stop.state(&cancel) {
            return finish(session, state, &text, turns);
        }
        if let Some(state) = crate::hook_points::halted(cfg, &run, &emitter) {
            return finish(session, state, &text, turns);
        }
        if turns >= cfg.limits.max_turns {
            let state = EndState::LimitReached {
                limit: LimitKind::MaxTurns,
            };
            return finish(session, state, &text, turns);
        }
        let mut gave = match inject(cfg, &run, session).await {
            Ok(gave) => gave,
            Err(e) => return finish(session, persist_failed(e), &text, turns),
        };
        if let Some(limit) = context_limit {
            let estimate = meter.estimate(compaction.fixed_bytes, session.messages());
            if estimate > limit && retry_above.is_none_or(|above| estimate > above) {
                match compaction.run(session, &stop, observer).await {
                    Ok(_) => {
                        retry_above = None;
                        meter.reset();
                        // Live state whose last copy was summarised is appended again.
                        match inject(cfg, &run, session).await {
                            Ok(more) => gave.extend(more),
                            Err(e) => return finish(session, persist_failed(e), &text, turns),
                        }
                    }
                    Err(CompactionError::Cancelled | CompactionError::LimitReached(_)) => {
                        let state = stop.state(&cancel).unwrap_or(EndState::Cancelled);
                        return finish(session, state, &text, turns);
                    }
                    Err(CompactionError::Session(e)) => {
                        return finish(session, persist_failed(e), &text, turns);
                    }
                    Err(e) => {
                        // Each attempt is a paid summary call: the next one waits until the
                        // conversation has grown by a quarter of the limit.
                        let above = estimate + limit / 4;
                        retry_above = Some(above);
                        emitter.emit(Event::Notice {
                            message: format!(
                                "the conversation (about {estimate} tokens) was not compacted: \
                                 {e}; it goes on uncompacted, and compaction is tried again \
                                 above {above} tokens"
                            ),
                        });
                    }
                }
            }
        }
        // The request about to be sent is the conversation as it stands now: a turn
        // boundary, where the transcript is written.
        if let Err(e) = session.flush() {
            return finish(session, persist_failed(e), &text, turns);
        }
        boundary(observer, &run, session, &stop.budget).await;
        recorded(cfg, &run, &mut gave).await;
        let gate = Gate {
            observer,
            run: &run,
        };
        if !gate.may_call(&stop).await {
            let state = stop.state(&cancel).unwrap_or(EndState::Cancelled);
            return finish(session, state, &text, turns);
        }
        turns += 1;
        emitter.emit(Event::TurnStarted { turn: turns });
        let request = ModelRequest {
            model: cfg.model.model.clone(),
            system: system.clone(),
            messages: session.messages().to_vec(),
            tools: tools.clone(),
            max_output_tokens: cfg.max_output_tokens,
            max_reply_bytes: Some(cfg.max_reply_bytes),
            temperature: cfg.temperature,
            metadata: metadata.clone(),
            // Set by the call (it answers the provider's questions between attempts).
            retry_gate: cadre_llm::RetryGate::default(),
        };
        // run > turn > model_call / tool_call: the turn span is the explicit parent of both.
        let turn_span = tracing::info_span!("turn", turn = turns);
        let model_span = {
            let _in_turn = turn_span.enter();
            cadre_tools::otel::chat(&cfg.model.spec, cfg.model.provider.server_address())
        };
        let reply = call_model(cfg, request, &emitter, &stop, gate, model_span).await;
        let reply = match reply {
            None => {
                let state = stop.state(&cancel).unwrap_or(EndState::Cancelled);
                return finish(session, state, &text, turns);
            }
            Some(Err(FailedReply {
                error: error @ cadre_llm::ProviderError::ContextTooLong { .. },
                ..
            })) if automatic && !overflow_retried => {
                // The provider counts differently than the estimate: compact once and
                // retry the same turn.
                overflow_retried = true;
                match compaction.run(session, &stop, observer).await {
                    Ok(_) => {
                        meter.reset();
                        turns -= 1;
                        continue;
                    }
                    Err(CompactionError::Cancelled | CompactionError::LimitReached(_)) => {
                        let state = stop.state(&cancel).unwrap_or(EndState::Cancelled);
                        return finish(session, state, &text, turns);
                    }
                    Err(e) => {
                        let state = EndState::Failed {
                            error: format!("{error}; compacting the conversation failed: {e}"),
                        };
                        return finish(session, state, &text, turns);
                    }
                }
            }
            Some(Err(FailedReply {
                error: cadre_llm::ProviderError::ReplyTooLong { .. },
                partial_text,
            })) => {
                text.add(&partial_text);
                let state = EndState::LimitReached {
                    limit: LimitKind::ReplyTooLong,
                };
                return finish(session, state, &text, turns);
            }
            Some(Err(failed)) => {
                text.add(&failed.partial_text);
                let state = EndState::Failed {
                    error: failed.error.to_string(),
                };
                return finish(session, state, &text, turns);
            }
            Some(Ok(r)) => r,
        };
        charge_call(&cfg.model, &stop.budget, &emitter, reply.usage);
        text.add(&reply.text);
        let mut calls = reply.calls;
        crate::call_ids::make_unique(&mut calls, session.messages());
        let assistant = Message::Assistant {
            content: reply.text,
            thinking: (!reply.thinking.is_empty()).then_some(reply.thinking),
            thinking_signature: reply.signature,
            tool_calls: calls.clone(),
        };
        // The reply is on disk before anything follows it: before its calls start (a
        // resumed run then knows what it asked for) and before a finished run waits for
        // background work (its answer survives a crash meanwhile).
        if let Err(e) = session.push(assistant).and_then(|()| session.flush()) {
            return finish(session, persist_failed(e), &text, turns);
        }
        // A copy kept elsewhere holds the reply before anything follows it too: its calls
        // start, the run ends or the next request goes out only once it is kept, so a run
        // continued from that copy never asks for this turn again.
        boundary(observer, &run, session, &stop.budget).await;
        meter.record(&reply.usage, session.messages().len());
        overflow_retried = false;

        if calls.is_empty() {
            if outstanding_rounds < MAX_OUTSTANDING_ROUNDS
                && wait_outstanding(cfg, &run, &stop.token, outstanding_rounds).await
            {
                outstanding_rounds += 1;
                continue;
            }
            if let Some(state) = stop.state(&cancel) {
                return finish(session, state, &text, turns);
            }
            match crate::hook_points::keep_going(cfg, &run, session, &mut stop_hook_active).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(state) => return finish(session, state, &text, turns),
            }
            return finish(session, EndState::Completed, &text, turns);
        }

        let limit = match stop.budget.exceeded() {
            Some(limit) => Some((
                limit,
                "the run used up its budget before this call could run",
            )),
            None => (turns >= cfg.limits.max_turns).then_some((
                LimitKind::MaxTurns,
                "the run reached its turn limit before this call could run",
            )),
        };
        if let Some((limit, why)) = limit {
            for call in &calls {
                let msg = not_run(call, why);
                if let Err(e) = session.push(msg) {
                    return finish(session, persist_failed(e), &text, turns);
                }
            }
            return finish(session, EndState::LimitReached { limit }, &text, turns);
        }

        let results = dispatcher
            .run_all(&calls, &stop.token, &turn_span, observer)
            .await;
        for (msg, approved) in results {
            if let Some(tool) = approved
                && let Err(e) = session.approve_tool(&tool)
            {
                return finish(session, persist_failed(e), &text, turns);
            }
            if let Err(e) = session.push(msg) {
                return finish(session, persist_failed(e), &text, turns);
            }
        }
        if let Err(e) = session.flush() {
            return finish(session, persist_failed(e), &text, turns);
        }
        boundary(observer, &run, session, &stop.budget).await;
    }
}

async fn wait_outstanding(
    cfg: &AgentConfig,
    run: &RunContext,
    stop: &CancellationToken,
    round: u32,
) -> bool {
    let mut any = false;
    for ext in &cfg.extensions {
        if ext.wait_outstanding(run, stop, round).await {
            any = true;
        }
    }
    any && !stop.is_cancelled()
}
