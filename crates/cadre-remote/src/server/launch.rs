//! Starting a served task: pick the agent, take a concurrency slot, find or create the child
//! that holds the conversation, start the task on the runtime and record it in the book.
//! Shared by both protocols; over A2A a message to an existing task starts its next turn
//! the same way. A new child gets the MCP servers its definition declares, like a child
//! delegated to in a run.

use super::approval::ApprovalGate;
use super::book::{Conversation, Journal, ServedTask};
use super::sink::Subscription;
use super::state::State;
use cadre_store::ServedTurn;
use cadre_subagents::{Child, ServerLease};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

/// What to start.
pub(crate) struct Launch {
    /// The agent asked for (`None`: the conversation's, else the default).
    pub agent: Option<String>,
    pub text: String,
    pub message_id: String,
    /// The A2A conversation to continue or to open under this id.
    pub context_id: Option<String>,
    /// Keep the child as a conversation others can continue (A2A).
    pub conversation: bool,
    /// The caller's id for the task (task protocol): a second submission of a running task
    /// returns it instead of starting another.
    pub external_id: Option<String>,
    /// Subscribe to the task's progress (streams).
    pub follow: bool,
    /// The A2A task this message continues: start its next turn instead of a new task.
    pub onto: Option<Arc<ServedTask>>,
}

/// Why nothing was started.
pub(crate) enum LaunchError {
    /// Every slot is taken.
    Busy { limit: usize },
    /// The server is shutting down.
    Draining,
    /// The agent is not exposed.
    UnknownAgent { name: String, available: String },
    /// A task with this external id already finished.
    Finished(Arc<ServedTask>),
    /// The input is larger than `max_input_bytes`.
    InputTooLarge { bytes: usize, limit: usize },
    /// The runtime refused the child.
    Spawn(String),
    /// The task store cannot be written now (a database restart, say): retry later.
    StoreUnavailable(String),
    /// The task to continue can take no more: its conversation is gone, or it has taken
    /// as many messages as a task may.
    CannotContinue(String),
}

impl LaunchError {
    /// The `Retry-After` seconds of a refusal the caller should try again (elsewhere),
    /// answered with 429 or 503.
    pub(crate) fn retry_after(&self) -> Option<&'static str> {
        match self {
            LaunchError::Busy { .. } | LaunchError::Draining => {
                Some(super::health::RETRY_AFTER_SECS)
            }
            LaunchError::StoreUnavailable(_) => Some("5"),
            _ => None,
        }
    }

    /// A sentence for the caller.
    pub(crate) fn message(&self) -> String {
        match self {
            LaunchError::Busy { limit } => format!(
                "server busy: {limit} tasks are already running (serve.max_concurrent_tasks); retry later"
            ),
            LaunchError::Draining => "server busy: shutting down, not accepting new tasks".into(),
            LaunchError::UnknownAgent { name, available } => {
                format!("unknown agent `{name}`; available: {available}")
            }
            LaunchError::Finished(t) => format!(
                "task {} already finished",
                t.external_id.as_deref().unwrap_or(&t.id)
            ),
            LaunchError::InputTooLarge { bytes, limit } => format!(
                "the input is {bytes} bytes, more than the {limit} this server accepts (serve.max_input_bytes)"
            ),
            LaunchError::Spawn(e) | LaunchError::CannotContinue(e) => e.clone(),
            LaunchError::StoreUnavailable(e) => {
                format!("the task store is unavailable, retry later: {e}")
            }
        }
    }
}

/// A started (or already running) task.
pub(crate) struct Launched {
    pub task: Arc<ServedTask>,
    /// Progress of the task, when asked for.
    pub follow: Option<Subscription>,
}

/// How long a resubmission waits for a concurrent submission of the same id to start.
const RESERVATION_WAIT: Duration = Duration::from_secs(5);

/// What the first, locked step decided.
enum Plan {
    /// A task with this external id exists (running).
    Existing(Arc<ServedTask>),
    /// Start one: the agent, the child, the conversation and the slot are ready.
    Start {
        agent: String,
        child: Box<Child>,
        context_id: String,
        permit: OwnedSemaphorePermit,
    },
    /// Another submission of this id is starting; look again shortly.
    Wait,
}

/// The agent a new child would be made of, unless the launch continues or finds what
/// exists (a running task of its external id, a conversation, the task it continues).
fn new_child_agent(state: &Arc<State>, l: &Launch) -> Option<String> {
    let book = state.book.lock();
    let exists = l.onto.is_some()
        || l.external_id
            .as_deref()
            .is_some_and(|e| book.by_external(e).is_some())
        || l.context_id
            .as_deref()
            .is_some_and(|c| book.conversation(c).is_some());
    (!exists).then(|| {
        l.agent
            .clone()
            .unwrap_or_else(|| state.default_agent.clone())
    })
}

/// Under the book's lock: resolve an existing task, or reserve everything a new one needs.
/// A new child of `servers.0` holds the lease `servers.1` on its definition's MCP servers
/// (taken before, because starting servers cannot happen under the lock).
fn plan(
    state: &Arc<State>,
    l: &Launch,
    servers: &mut Option<(String, Arc<ServerLease>)>,
) -> Result<Plan, LaunchError> {
    let mut book = state.book.lock();
    if let Some(ext) = &l.external_id {
        if let Some(t) = book.by_external(ext) {
            let done = !state.is_running(&t);
            return if done {
                Err(LaunchError::Finished(t))
            } else {
                Ok(Plan::Existing(t))
            };
        }
        if book.is_reserved(ext) {
            return Ok(Plan::Wait);
        }
    }
    let conversation = l.context_id.as_deref().and_then(|c| book.conversation(c));
    if let Some(task) = &l.onto {
        if conversation.is_none() {
            return Err(LaunchError::CannotContinue(format!(
                "task {} cannot take more messages: its conversation has ended; send one without taskId to start a new task",
                task.id
            )));
        }
        if !task.journal.has_room(1, 2) {
            return Err(LaunchError::CannotContinue(format!(
                "task {} has taken as many messages as a task may ({} turns); send one without taskId (same contextId) to start a new task",
                task.id,
                super::book::MAX_TURNS
            )));
        }
    }
    let agent = match (&conversation, &l.agent) {
        (Some(c), _) => c.agent.clone(),
        (None, Some(a)) => a.clone(),
        (None, None) => state.default_agent.clone(),
    };
    if !state.skills.iter().any(|s| s.name == agent) {
        return Err(LaunchError::UnknownAgent {
            name: agent,
            available: state
                .skills
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let permit = state.book.try_admit().ok_or(LaunchError::Busy {
        limit: state.book.limit(),
    })?;
    let (child, context_id) = match conversation {
        Some(c) => {
            let context_id = l.context_id.clone().unwrap_or_default();
            book.conversation_grew(&context_id, l.text.len());
            (c.child, context_id)
        }
        None => {
            let own = servers
                .take_if(|(of, _)| *of == agent)
                .map(|(_, lease)| lease);
            let child = state
                .runtime
                .create_child_holding(&agent, &state.parent, own)
                .map_err(|e| LaunchError::Spawn(e.to_string()))?;
            // A new context is named after its child's session, which the store keeps: every
            // node on the same store shows the task in the same context.
            let context_id = l
                .context_id
                .clone()
                .unwrap_or_else(|| child.session_id.clone());
            if l.conversation {
                book.add_conversation(
                    &context_id,
                    Conversation {
                        agent: agent.clone(),
                        child: child.clone(),
                        input_bytes: context_id.len() + l.text.len(),
                    },
                );
            }
            (child, context_id)
        }
    };
    if let Some(ext) = &l.external_id {
        book.reserve(ext);
    }
    Ok(Plan::Start {
        agent,
        child: Box::new(child),
        context_id,
        permit,
    })
}

/// Start a task, or find the running one with the same external id: refuse what this node
/// cannot take, look for the task the caller's id names, reserve the start, start the
/// child, then book the turn and record it for every node.
pub(crate) async fn launch(state: &Arc<State>, l: Launch) -> Result<Launched, LaunchError> {
    refuse(state, &l)?;
    if let Some(found) = taken_before(state, &l).await {
        return found;
    }
    let ready = match reserve(state, &l).await? {
        Reserved::Ready(ready) => ready,
        Reserved::Existing(task) => return Ok(Launched { task, follow: None }),
    };
    let follow = l
        .follow
        .then(|| state.sink.subscribe(&ready.child.session_id));
    // The journal and the gate exist before the first turn starts: its agent may ask at once.
    let (journal, gate) = match &l.onto {
        Some(t) => (t.journal.clone(), t.gate.clone()),
        None => {
            let journal = Arc::new(Journal::new(l.text.clone(), l.message_id.clone()));
            let gate = ApprovalGate::new(journal.clone()).with_store(state.runtime.store().clone());
            (journal, Arc::new(gate))
        }
    };
    let started = start_child(state, &l, &ready.child, &gate).await?;
    tracing::debug!(task = %started.task_id, agent = %ready.agent, "served task started");
    let turn = started.task_id.clone();
    let message_id = l.message_id.clone();
    let task = book_turn(
        state,
        l,
        started,
        ready.agent,
        ready.context_id,
        journal,
        gate,
    );
    record_served(state, &task, &turn, message_id).await;
    release_when_done(state, turn, ready.permit);
    Ok(Launched { task, follow })
}

/// What this node does not take: anything while it drains or its store is down (the caller,
/// or its load balancer, tries another node at once rather than after the store's
/// timeouts), and an input over the limit.
fn refuse(state: &Arc<State>, l: &Launch) -> Result<(), LaunchError> {
    if state.draining.is_cancelled() {
        return Err(LaunchError::Draining);
    }
    if let Some(why) = state.health.store_down() {
        return Err(LaunchError::StoreUnavailable(why));
    }
    let limit = state.opts.max_input_bytes;
    if l.text.len() > limit {
        return Err(LaunchError::InputTooLarge {
            bytes: l.text.len(),
            limit,
        });
    }
    Ok(())
}

/// The task a caller's id names that another node, or an earlier process of this one,
/// took: it again while it runs, else that it finished.
async fn taken_before(state: &Arc<State>, l: &Launch) -> Option<Result<Launched, LaunchError>> {
    let ext = l.external_id.as_ref()?;
    if state.book.find(ext).is_some() || state.book.lock().is_reserved(ext) {
        return None;
    }
    let task = state.find_task(ext, true).await?;
    let ended = state
        .snapshot(&task)
        .await
        .is_none_or(|r| r.status.is_terminal());
    Some(if ended {
        Err(LaunchError::Finished(task))
    } else {
        Ok(Launched { task, follow: None })
    })
}

/// A start reserved: the agent, the child, the conversation and the slot.
struct Ready {
    agent: String,
    child: Box<Child>,
    context_id: String,
    permit: OwnedSemaphorePermit,
}

/// What [`reserve`] found.
enum Reserved {
    /// A task with this external id runs.
    Existing(Arc<ServedTask>),
    /// Start one.
    Ready(Ready),
}

/// Reserve the start (with the agent's own MCP servers, when it declares any), waiting a
/// little for another submission of the same id that is being started.
async fn reserve(state: &Arc<State>, l: &Launch) -> Result<Reserved, LaunchError> {
    let mut servers = None;
    if let Some(agent) = new_child_agent(state, l)
        && state.skills.iter().any(|s| s.name == agent)
        && let Some(lease) = state.runtime.own_servers(&agent, &state.parent).await
    {
        servers = Some((agent, lease));
    }
    let deadline = tokio::time::Instant::now() + RESERVATION_WAIT;
    loop {
        match plan(state, l, &mut servers)? {
            Plan::Existing(task) => return Ok(Reserved::Existing(task)),
            Plan::Start {
                agent,
                child,
                context_id,
                permit,
            } => {
                return Ok(Reserved::Ready(Ready {
                    agent,
                    child,
                    context_id,
                    permit,
                }));
            }
            Plan::Wait if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Plan::Wait => {
                return Err(LaunchError::Spawn(
                    "a submission with this task_id is still being started".into(),
                ));
            }
        }
    }
}

/// Start the child's run; a failure gives the caller's id back.
async fn start_child(
    state: &Arc<State>,
    l: &Launch,
    child: &Child,
    gate: &Arc<ApprovalGate>,
) -> Result<cadre_subagents::Started, LaunchError> {
    // Task-protocol callers send no messages, so they cannot be asked.
    let parent = state.parent_for(l.conversation.then(|| gate.clone()));
    let started = state
        .runtime
        .start(
            child,
            l.text.clone(),
            cadre_subagents::short_title(&l.text),
            false,
            &parent,
        )
        .await;
    started.map_err(|e| {
        if let Some(ext) = &l.external_id {
            state.book.lock().release(ext);
        }
        match e {
            cadre_subagents::SpawnError::Store(e) if e.is_transient() => {
                LaunchError::StoreUnavailable(e.to_string())
            }
            e => LaunchError::Spawn(e.to_string()),
        }
    })
}

/// The turn in the book: a turn more of the task it continues, or a new served task.
fn book_turn(
    state: &Arc<State>,
    l: Launch,
    started: cadre_subagents::Started,
    agent: String,
    context_id: String,
    journal: Arc<Journal>,
    gate: Arc<ApprovalGate>,
) -> Arc<ServedTask> {
    if let Some(task) = l.onto {
        let bytes = journal.add_turn(started.task_id, l.text, l.message_id);
        state.book.lock().task_grew(bytes);
        return task;
    }
    journal.started(started.task_id.clone());
    state.book.lock().insert(
        ServedTask {
            id: started.task_id,
            external_id: l.external_id,
            context_id,
            agent,
            session_id: started.session_id,
            continuable: l.conversation,
            parent_session: state.parent.run.session_id.clone(),
            created_at: cadre_types::unix_millis(),
            from_store: false,
            journal,
            gate,
        },
        |t| !state.is_running(t),
    )
}

/// Record what every node (and this one after a restart) needs to show the task as its
/// caller knows it: the task this turn belongs to and its place there, the caller's message
/// and chosen id.
async fn record_served(state: &Arc<State>, task: &ServedTask, turn: &str, message_id: String) {
    let served = ServedTurn {
        task_id: task.id.clone(),
        turn: task.journal.turn_index(turn).unwrap_or(0) as u64,
        message_id: task.continuable.then_some(message_id),
        caller_id: task.external_id.clone(),
    };
    if let Err(e) = state.runtime.store().set_served(turn, &served).await {
        tracing::warn!(task = %turn, error = %e, "store: recording a served task failed; other nodes see it as a task of its own");
    }
}

/// Hold the task's slot until it is terminal.
fn release_when_done(state: &Arc<State>, id: String, permit: OwnedSemaphorePermit) {
    let runtime = state.runtime.clone();
    tokio::spawn(async move {
        let _ = runtime.wait_for(&id, &CancellationToken::new(), None).await;
        drop(permit);
    });
}
