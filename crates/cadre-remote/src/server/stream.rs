//! Task streams over Server-Sent Events, each event a JSON-RPC response:
//! `SendStreamingMessage` / `message/stream` (start or continue a task and follow it) and
//! `SubscribeToTask` / `tasks/resubscribe` (follow a task from now on).
//!
//! Both send the task snapshot first; then every state change as a status update (`working`
//! when the child starts, `input-required` with the question when it waits for the caller,
//! `working` again once answered), the child's text as chunks of the answer artifact (a tool
//! call starts the artifact over, since only the last turn's text is the answer) and tool
//! calls as status messages; last, the complete answer when the chunks did not already spell
//! it, and the final status. A stream ends when the task does; a client that disconnects
//! stops its stream, not the task. Any number of streams can follow one task.
//!
//! What a stream follows comes from [`TaskFeed`], which reads this node's runtime: the
//! child's progress, its last turn's status and the task's own changes. A task run by another
//! node would need a feed that reads the task store's notifications instead; the rendering
//! here would not change.

use super::book::ServedTask;
use super::rpc::start;
use super::sink::Subscription;
use super::state::State;
use crate::a2a::parse::SendParams;
use crate::a2a::render::{self, Detail, Role};
use crate::a2a::{A2aState, Version};
use crate::jsonrpc::{self, RpcId, RpcResponse};
use axum::Json;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use cadre_types::{SubagentUpdate, UpdateKind, unix_millis};
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// Start or continue the task and answer with its event stream.
pub(crate) async fn respond(
    state: Arc<State>,
    id: RpcId,
    params: SendParams,
    version: Version,
) -> Response {
    let launched = match start(&state, &params, true).await {
        Ok(l) => l,
        Err(e) => return Json(jsonrpc::failure(&id, &e)).into_response(),
    };
    let sub = launched
        .follow
        .unwrap_or_else(|| state.sink.subscribe(&launched.task.session_id));
    sse(state, id, launched.task, sub, version)
}

/// Follow a task that is already running.
pub(crate) fn subscribe(
    state: Arc<State>,
    id: RpcId,
    task: Arc<ServedTask>,
    version: Version,
) -> Response {
    let sub = state.sink.subscribe(&task.session_id);
    sse(state, id, task, sub, version)
}

fn sse(
    state: Arc<State>,
    id: RpcId,
    task: Arc<ServedTask>,
    sub: Subscription,
    version: Version,
) -> Response {
    let (tx, rx) = mpsc::channel::<RpcResponse>(64);
    let feed = TaskFeed {
        changes: task.journal.changes(),
        sub,
    };
    let out = Emitter {
        id,
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        version,
        tx,
    };
    tokio::spawn(produce(state, task, feed, out));
    let events = futures::stream::unfold(rx, |mut rx| async move {
        let v = rx.recv().await?;
        let event = SseEvent::default()
            .json_data(&v)
            .unwrap_or_else(|e| SseEvent::default().comment(format!("unserialisable event: {e}")));
        Some((Ok::<_, Infallible>(event), rx))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// What happened to a followed task.
enum Change {
    /// Progress of one of its turns.
    Progress(SubagentUpdate),
    /// Its state may have changed: look again.
    Look,
}

/// The sources a stream follows, on this node.
struct TaskFeed {
    /// The task's own changes (turns added, questions asked and answered).
    changes: watch::Receiver<u64>,
    /// The child's progress.
    sub: Subscription,
}

impl TaskFeed {
    /// The next change of `task`, whose last turn is `last_turn`; `None` when nothing more
    /// can come.
    async fn next(&mut self, state: &State, task: &ServedTask) -> Option<Change> {
        let mut turn = state.runtime.tracker().watch(&task.last_turn())?;
        tokio::select! {
            u = self.sub.recv() => u.map(Change::Progress),
            _ = turn.wait_for(|s| s.is_terminal()) => Some(Change::Look),
            r = self.changes.changed() => r.ok().map(|_| Change::Look),
        }
    }

    /// A progress update already buffered.
    fn buffered(&mut self) -> Option<SubagentUpdate> {
        self.sub.try_recv()
    }
}

/// The text streamed into the answer artifact since it last started over.
#[derive(Default)]
struct Answer {
    text: String,
    started: bool,
}

struct Emitter {
    id: RpcId,
    task_id: String,
    context_id: String,
    version: Version,
    tx: mpsc::Sender<RpcResponse>,
}

impl Emitter {
    /// Send one event; false when the client is gone.
    async fn send(&self, result: Value) -> bool {
        self.tx
            .send(jsonrpc::success(&self.id, result))
            .await
            .is_ok()
    }

    async fn working(&self, note: Option<&str>) -> bool {
        let message = note.map(|text| {
            render::message(
                Role::Agent,
                text,
                &uuid::Uuid::new_v4().to_string(),
                Some(&self.task_id),
                Some(&self.context_id),
                self.version,
            )
        });
        let status = render::status(A2aState::Working, message, unix_millis(), self.version);
        self.send(render::status_update(
            &self.task_id,
            &self.context_id,
            status,
            false,
            self.version,
        ))
        .await
    }

    async fn chunk(&self, text: &str, append: bool, last: bool) -> bool {
        self.send(render::artifact_update(
            &self.task_id,
            &self.context_id,
            text,
            append,
            last,
            self.version,
        ))
        .await
    }

    /// Forward one update of the task's child; false when the client is gone.
    async fn update(
        &self,
        u: SubagentUpdate,
        task: &ServedTask,
        answer: &mut Answer,
        shown: &mut A2aState,
    ) -> bool {
        if !u.task_id.as_deref().is_some_and(|t| task.has_turn(t)) {
            return true;
        }
        match u.kind {
            UpdateKind::Start if *shown != A2aState::Working => {
                *shown = A2aState::Working;
                self.working(None).await
            }
            UpdateKind::Delta if !u.text.is_empty() => {
                let append = answer.started;
                answer.started = true;
                answer.text.push_str(&u.text);
                self.chunk(&u.text, append, false).await
            }
            UpdateKind::ToolStart => {
                *answer = Answer::default();
                let tool = u.tool.unwrap_or_default();
                self.working(Some(&format!("using tool {tool}"))).await
            }
            _ => true,
        }
    }
}

/// Send the snapshot, then the task's changes until it ends.
async fn produce(state: Arc<State>, task: Arc<ServedTask>, mut feed: TaskFeed, out: Emitter) {
    let version = out.version;
    let Some(first) = state.view(&task) else {
        return;
    };
    let mut shown = first.state;
    if !out
        .send(render::task_result(
            render::task(&first, Detail::default(), version),
            version,
        ))
        .await
    {
        return;
    }
    let mut answer = Answer::default();
    loop {
        let Some(view) = state.view(&task) else {
            return;
        };
        if view.state.is_terminal() {
            break;
        }
        if view.state != shown {
            shown = view.state;
            let status = render::view_status(&view, version);
            if !out
                .send(render::status_update(
                    &task.id,
                    &task.context_id,
                    status,
                    false,
                    version,
                ))
                .await
            {
                return;
            }
        }
        match feed.next(&state, &task).await {
            Some(Change::Progress(u)) => {
                if !out.update(u, &task, &mut answer, &mut shown).await {
                    return;
                }
            }
            Some(Change::Look) => {}
            None => return,
        }
    }
    // Updates emitted before the task turned terminal are already buffered.
    while let Some(u) = feed.buffered() {
        if !out.update(u, &task, &mut answer, &mut shown).await {
            return;
        }
    }
    let Some(view) = state.view(&task) else {
        return;
    };
    if let Some(result) = view.output.as_deref().filter(|r| !r.is_empty())
        && result != answer.text
        && !out.chunk(result, false, true).await
    {
        return;
    }
    let status = render::view_status(&view, version);
    out.send(render::status_update(
        &task.id,
        &task.context_id,
        status,
        true,
        version,
    ))
    .await;
}
