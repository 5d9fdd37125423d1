//! `SendStreamingMessage` / `message/stream`: Server-Sent Events, each a JSON-RPC response.
//! First the task snapshot; then a `working` status when the child starts, its text as
//! artifact chunks (a tool call starts the artifact over, since only the last turn's text is
//! the answer) and tool calls as status messages; last, the complete answer when the chunks
//! did not already spell it, and the final status. A client that disconnects stops the
//! stream, not the task.

use super::launch::Launched;
use super::rpc::start;
use super::state::{State, view};
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
use tokio::sync::mpsc;

/// Start the task and answer with its event stream.
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
    let (tx, rx) = mpsc::channel::<RpcResponse>(64);
    tokio::spawn(produce(state, id, launched, version, tx));
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

    /// Forward one update of the child; false when the client is gone.
    async fn update(&self, u: SubagentUpdate, answer: &mut Answer) -> bool {
        if u.task_id.as_deref() != Some(self.task_id.as_str()) {
            return true;
        }
        match u.kind {
            UpdateKind::Start => self.working(None).await,
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

async fn produce(
    state: Arc<State>,
    id: RpcId,
    launched: Launched,
    version: Version,
    tx: mpsc::Sender<RpcResponse>,
) {
    let task = launched.task;
    let Some(mut sub) = launched.follow else {
        return;
    };
    let Some(mut watch) = state.runtime.tracker().watch(&task.id) else {
        return;
    };
    let out = Emitter {
        id,
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        version,
        tx,
    };
    let Some(snap) = state.snapshot(&task) else {
        return;
    };
    let first = render::task(&view(&task, &snap), Detail::default(), version);
    if !out.send(render::task_result(first, version)).await {
        return;
    }
    let mut answer = Answer::default();
    loop {
        tokio::select! {
            u = sub.recv() => match u {
                Some(u) => if !out.update(u, &mut answer).await { return },
                None => break,
            },
            _ = async { watch.wait_for(|s| s.is_terminal()).await.map(|_| ()) } => break,
        }
    }
    // Updates emitted before the task turned terminal are already buffered.
    while let Some(u) = sub.try_recv() {
        if !out.update(u, &mut answer).await {
            return;
        }
    }
    let Some(snap) = state.snapshot(&task) else {
        return;
    };
    if let Some(result) = snap.result.as_deref().filter(|r| !r.is_empty())
        && result != answer.text
        && !out.chunk(result, false, true).await
    {
        return;
    }
    let status = render::view_status(&view(&task, &snap), version);
    out.send(render::status_update(
        &task.id,
        &task.context_id,
        status,
        true,
        version,
    ))
    .await;
}
