//! The ReAct loop: build the request, stream the reply, run the tool calls, append the
//! observations, repeat until the model answers without tool calls or a limit hits.
//!
//! The loop is in named phases, methods of [`RunLoop`] (what a run fixes when it starts)
//! over a [`LoopState`] (what it carries from turn to turn): `prepare` once, then each turn
//! `before_turn`, `inject_and_compact`, `call`, `keep_reply`, and `dispatch` for the reply's
//! calls or `decide_next` when it has none. Each phase returns a [`Step`]: go on, or end the
//! run in a state, which `finish` reports once.

mod next;
mod setup;
mod turn;

use crate::agent::{AgentConfig, RunOutcome};
use crate::compaction::ContextMeter;
use crate::observer::{TurnBoundary, TurnObserver};
use crate::resume::Resume;
use crate::run_state::RunText;
use crate::session::Session;
use cadre_tools::{Budget, RunContext, Workspace};
use cadre_types::{EndState, Event, EventEnvelope};
use setup::RunLoop;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

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
    let run_loop = RunLoop::new(cfg, session, run, workspace, cancel, observer);
    let mut state = LoopState::default();
    let end = run_loop.drive(session, start, &mut state).await;
    run_loop.finish(session, end, &state)
}

/// What a phase decides: go on with a `T`, or end the run in this state (an `Err`, so that
/// `?` ends it; a completed run ends with `Err(EndState::Completed)` too).
type Step<T = ()> = Result<T, EndState>;

/// The end of a run whose session could not be saved.
fn persist_failed(e: crate::SessionError) -> EndState {
    EndState::Failed {
        error: format!("could not save the session: {e}"),
    }
}

/// What the loop carries from one turn to the next.
#[derive(Default)]
struct LoopState {
    /// The turns begun (a resumed run counts those its conversation holds).
    turns: u32,
    text: RunText,
    /// How many times the finished run was held open for outstanding work.
    outstanding_rounds: u32,
    meter: ContextMeter,
    /// The provider refused this turn's request as too long and the conversation was
    /// compacted for it: a second refusal ends the run.
    overflow_retried: bool,
    /// After a failed compaction: the estimate above which it is tried again.
    retry_above: Option<u64>,
    /// A stop hook gave the finished model another turn (hooks see it, to avoid loops).
    stop_hook_active: bool,
}

impl RunLoop<'_> {
    /// The run from its start to the state it ends in.
    async fn drive(
        &self,
        session: &mut Session,
        start: Start<'_>,
        state: &mut LoopState,
    ) -> EndState {
        if let Err(end) = self.prepare(session, start, state).await {
            return end;
        }
        loop {
            if let Err(end) = self.turn(session, state).await {
                return end;
            }
        }
    }

    /// One turn: a model call and what its reply asks for. `Ok` goes on to the next turn.
    async fn turn(&self, session: &mut Session, state: &mut LoopState) -> Step {
        self.before_turn(state)?;
        let gave = self.inject_and_compact(session, state).await?;
        let Some((reply, turn_span)) = self.call(session, state, gave).await? else {
            // The conversation was compacted after the provider found it too long: the
            // same turn again.
            return Ok(());
        };
        let calls = self.keep_reply(session, state, reply).await?;
        if calls.is_empty() {
            return self.decide_next(session, state).await;
        }
        self.dispatch(session, state, &calls, &turn_span).await
    }
}
