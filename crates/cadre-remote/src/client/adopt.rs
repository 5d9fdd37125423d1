//! Adopting remote tasks after a restart: the store keeps, for each remote sub-agent task,
//! the agent's url, the remote task id and the header references; a `cadre` process that
//! starts on the owning node polls the remote for every such task still open and writes its
//! end into the store, so records of a process that died do not stay `running` forever. A
//! cancel requested for an adopted task (by a tool, `cadre serve` or another node) is
//! forwarded to the remote, which then reports the task cancelled.

use super::call::Call;
use super::{Discovered, RemoteClient, a2a, tasks};
use cadre_engine::NonInteractiveApprovals;
use cadre_store::{
    REDACTED, TaskFilter, TaskRecord, TaskStatus, TaskStore, Transition, Transport,
    current_instance, instance_alive,
};
use cadre_subagents::{RemoteApprovals, RemoteOutcome, RemoteProtocol, RemoteRequest, RemoteSpec};
use cadre_types::NullSink;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long an adopted task is polled before it is given up.
const ADOPT_LIMIT: Duration = Duration::from_secs(24 * 60 * 60);
/// Longest pause between polls of a task that is still running.
const MAX_RUNNING_DELAY: Duration = Duration::from_secs(10);
/// Longest pause after a failed poll.
const MAX_ERROR_DELAY: Duration = Duration::from_secs(60);

/// What one poll of an adopted task found.
pub(crate) enum Check {
    /// The task ended.
    Done(RemoteOutcome),
    /// Still running.
    Running,
    /// The remote does not know the task.
    Lost(String),
    /// The poll failed; try again later.
    Error(String),
}

/// Adopt this node's open remote tasks: for each `pending`/`running` record with a remote
/// transport owned by `store.node_id()` (and not by a sibling process that is still alive),
/// spawn a poller that asks the remote for the task's state until it ends, then writes the
/// end (result, error, end state, usage) to the store. A task the remote does not know ends
/// `failed` with `remote task lost: <reason>`; one that has not ended after 24 h of polling
/// too. A cancel requested for one of them is forwarded to its remote. Returns the adopted
/// task ids; the pollers run as detached tokio tasks.
pub async fn adopt_remote_tasks(
    store: Arc<dyn TaskStore>,
    client: Arc<RemoteClient>,
) -> Vec<String> {
    let mut records = Vec::new();
    for status in [TaskStatus::Pending, TaskStatus::Running] {
        let filter = TaskFilter {
            status: Some(status),
            ..TaskFilter::default()
        };
        match store.list(&filter).await {
            Ok(found) => records.extend(found),
            Err(e) => tracing::warn!(error = %e, "cannot list tasks to adopt"),
        }
    }
    let node = store.node_id().as_str().to_string();
    let me = current_instance();
    let mut adopted = Vec::new();
    let mut cancels = HashMap::new();
    let mut pollers = JoinSet::new();
    for record in records {
        if record.transport.is_local() || record.owner_node != node {
            continue;
        }
        // A sibling process on this machine still relays it.
        if let Some(owner) = &record.owner_instance
            && *owner != me
            && instance_alive(owner)
        {
            continue;
        }
        tracing::info!(task = %record.id, "adopting remote task");
        adopted.push(record.id.clone());
        let cancel = CancellationToken::new();
        cancels.insert(record.id.clone(), cancel.clone());
        pollers.spawn(follow(store.clone(), client.clone(), record, cancel));
    }
    if !pollers.is_empty() {
        tokio::spawn(relay_cancels(store, cancels, pollers));
    }
    adopted
}

/// Hand cancel requests stored for adopted tasks to their pollers, until every poller is done.
/// One watch of the store serves them all.
async fn relay_cancels(
    store: Arc<dyn TaskStore>,
    cancels: HashMap<String, CancellationToken>,
    mut pollers: JoinSet<()>,
) {
    let mut watch = match store.watch_cancellations(store.node_id()).await {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch for cancellations of adopted tasks");
            None
        }
    };
    loop {
        let next = async {
            match watch.as_mut() {
                Some(w) => w.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            id = next => match id {
                Some(id) => {
                    if let Some(c) = cancels.get(&id) {
                        c.cancel();
                    }
                }
                None => watch = None,
            },
            done = pollers.join_next() => {
                if done.is_none() {
                    return;
                }
            }
        }
    }
}

/// The request an adopted record is polled with (headers whose literal value was redacted
/// cannot be sent and are left out).
fn request_of(record: &TaskRecord, url: &str) -> RemoteRequest {
    let headers = record
        .remote_headers
        .iter()
        .filter(|(_, v)| v.as_str() != REDACTED)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    RemoteRequest {
        agent: record.agent_id.clone(),
        spec: RemoteSpec {
            url: url.to_string(),
            headers,
            protocol: RemoteProtocol::Auto,
        },
        prompt: record.prompt.clone(),
        // The task protocol uses our own id as the remote one.
        task_id: record
            .remote_task_id
            .clone()
            .unwrap_or_else(|| record.id.clone()),
        session_id: record.child_session_id.clone().unwrap_or_default(),
        context_id: None,
        on_remote_id: None,
        // Only polled, never continued: nobody here could answer a question anyway.
        approvals: RemoteApprovals(Arc::new(
            NonInteractiveApprovals::new(false).policy("adopted remote task: nobody to ask"),
        )),
    }
}

/// Poll one adopted task until it ends (or is given up) and record the end. When `cancel`
/// fires, the cancel is forwarded to the remote once, and polling goes on until the remote
/// reports the end.
async fn follow(
    store: Arc<dyn TaskStore>,
    client: Arc<RemoteClient>,
    record: TaskRecord,
    cancel: CancellationToken,
) {
    let Transport::Remote { url } = &record.transport else {
        return;
    };
    let request = request_of(&record, url);
    let call = match Call::new(
        &client,
        &request,
        Arc::new(NullSink),
        CancellationToken::new(),
    ) {
        Ok(c) => c,
        Err(e) => {
            finish_lost(&*store, &record.id, &e.to_string()).await;
            return;
        }
    };
    let deadline = Instant::now() + ADOPT_LIMIT;
    let first = Duration::from_millis(100);
    let mut delay = first;
    let mut protocol: Option<Discovered> = None;
    let mut last_error = String::from("no answer yet");
    let mut forwarded = false;
    loop {
        if Instant::now() >= deadline {
            let reason = format!("no end reported within 24 h (last: {last_error})");
            finish_lost(&*store, &record.id, &reason).await;
            return;
        }
        // Someone else may have finished the record meanwhile.
        if let Ok(Some(r)) = store.get(&record.id).await
            && r.status.is_terminal()
        {
            return;
        }
        let known = match &protocol {
            Some(p) => Ok(p.clone()),
            None => client.protocol(&call).await,
        };
        let check = match known {
            Ok(p) => {
                protocol = Some(p.clone());
                if cancel.is_cancelled() && !forwarded {
                    forward_cancel(&call, &p, record.remote_task_id.as_deref()).await;
                    forwarded = true;
                    delay = first;
                }
                tokio::select! {
                    c = poll(&call, &p, record.remote_task_id.as_deref()) => c,
                    // Forward the cancel at once rather than after a long poll.
                    _ = cancel.cancelled(), if !forwarded => continue,
                }
            }
            Err(e) => Check::Error(e),
        };
        match check {
            Check::Done(outcome) => {
                finish(&*store, &record.id, outcome).await;
                return;
            }
            Check::Lost(reason) => {
                finish_lost(&*store, &record.id, &reason).await;
                return;
            }
            Check::Running => {
                last_error = "still running".into();
                delay = (delay * 3 / 2).min(MAX_RUNNING_DELAY);
            }
            Check::Error(e) => {
                tracing::debug!(task = %record.id, error = %e, "adopted task poll failed");
                last_error = e;
                delay = (delay * 2).min(MAX_ERROR_DELAY);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = cancel.cancelled(), if !forwarded => {}
        }
    }
}

/// One poll of an adopted task over the protocol its remote speaks.
async fn poll(call: &Call<'_>, protocol: &Discovered, remote_id: Option<&str>) -> Check {
    match protocol {
        Discovered::A2a(card) => match remote_id {
            Some(id) => a2a::check(call, card, id).await,
            None => Check::Lost(format!(
                "remote agent at {} never named its task",
                call.base
            )),
        },
        Discovered::Tasks => tasks::check(call).await,
    }
}

/// Ask the remote to cancel an adopted task (best effort: the polls say how it ended).
async fn forward_cancel(call: &Call<'_>, protocol: &Discovered, remote_id: Option<&str>) {
    match protocol {
        Discovered::A2a(card) => {
            // A task the remote never named cannot be cancelled there; the poll finds it lost.
            if let Some(id) = remote_id {
                a2a::cancel(call, card, id).await;
            }
        }
        Discovered::Tasks => tasks::cancel_remote(call).await,
    }
}

/// Record how an adopted task ended, as the runtime does for a live one.
async fn finish(store: &dyn TaskStore, id: &str, outcome: RemoteOutcome) {
    let t = Transition::ended(&outcome.state, outcome.output, outcome.usage);
    if let Err(e) = cadre_store::transition_retrying(store, id, t, cadre_store::RETRY_FOR).await {
        tracing::warn!(task = %id, error = %e, "cannot record the end of an adopted task");
    }
}

/// Fail an adopted task the remote cannot account for.
async fn finish_lost(store: &dyn TaskStore, id: &str, reason: &str) {
    let t = Transition::failed(format!("remote task lost: {reason}"));
    if let Err(e) = cadre_store::transition_retrying(store, id, t, cadre_store::RETRY_FOR).await {
        tracing::warn!(task = %id, error = %e, "cannot record a lost remote task");
    }
}
