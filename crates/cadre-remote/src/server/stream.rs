//! Task streams over Server-Sent Events, each event a JSON-RPC response:
//! `SendStreamingMessage` / `message/stream` (start or continue a task and follow it) and
//! `SubscribeToTask` / `tasks/resubscribe` (follow a task from now on).
//!
//! Both send the task snapshot first (a stream that starts the work shows the task as its
//! message was accepted, since it follows that work from the start); then every state change as a status update (`working`
//! when the child starts, `input-required` with the question when it waits for the caller,
//! `working` again once answered), the child's text as chunks of the answer artifact (a tool
//! call starts the artifact over, since only the last turn's text is the answer) and tool
//! calls as status messages; last, the complete answer when the chunks did not already spell
//! it, and the final status. A stream ends when the task does; a client that disconnects
//! stops its stream, not the task. Any number of streams can follow one task.
//!
//! What a stream follows comes from [`TaskFeed`]: the child's progress and the task's own
//! changes while this node runs it, and its last turn's status, which is read from the task
//! store when the turn runs elsewhere. So `SubscribeToTask` on one node follows a task another
//! node on the same store runs: its state changes (the end through the store's notifications,
//! anything else within [`LOOK_AGAIN`]) and its answer at the end, without the chunks, which
//! only the running node sees.

use super::book::ServedTask;
use super::rpc::start;
use super::sink::Subscription;
use super::state::State;
use crate::a2a::parse::SendParams;
use crate::a2a::parts::{AnswerForm, render_parts};
use crate::a2a::render::{self, Detail, Role};
use crate::a2a::{A2aState, Version};
use crate::jsonrpc::{self, RpcId, RpcResponse};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use cadre_types::{SubagentUpdate, UpdateKind, unix_millis};
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// How often a followed task is looked at again when nothing woke the stream.
const LOOK_AGAIN: Duration = Duration::from_secs(2);

/// Start or continue the task and answer with its event stream.
pub(crate) async fn respond(
    state: Arc<State>,
    id: RpcId,
    params: SendParams,
    version: Version,
) -> Response {
    let launched = match start(&state, &params, true).await {
        Ok(l) => l,
        Err(e) => return super::rpc::failure(&id, &e),
    };
    let sub = launched
        .follow
        .unwrap_or_else(|| state.sink.subscribe(&launched.task.session_id));
    // The stream follows the work from when the message was accepted (its subscription
    // began before the work did), so the snapshot shows the task as of then.
    let accepted = if params.message.task_id.is_some() {
        A2aState::Working
    } else {
        A2aState::Submitted
    };
    sse(state, id, launched.task, sub, version, Some(accepted))
}

/// Follow a task that is already running.
pub(crate) fn subscribe(
    state: Arc<State>,
    id: RpcId,
    task: Arc<ServedTask>,
    version: Version,
) -> Response {
    let sub = state.sink.subscribe(&task.session_id);
    sse(state, id, task, sub, version, None)
}

fn sse(
    state: Arc<State>,
    id: RpcId,
    task: Arc<ServedTask>,
    sub: Subscription,
    version: Version,
    accepted: Option<A2aState>,
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
        form: state.answer_style(&task.agent).form,
        tx,
    };
    tokio::spawn(produce(state, task, feed, out, accepted));
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
    /// Progress of one of its turns (boxed: an end update carries its end state, and a
    /// `Look` should not be as large).
    Progress(Box<SubagentUpdate>),
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
    /// The next change of `task`; `None` when nothing more can come.
    async fn next(&mut self, state: &State, task: &ServedTask) -> Option<Change> {
        let turn = task.last_turn();
        // The turn's end: through its status watch while it runs here, else through the
        // store (it ended a moment ago, or another node runs it). Its other changes are
        // looked for now and then.
        let never = CancellationToken::new();
        let ended = state.runtime.wait_for(&turn, &never, Some(LOOK_AGAIN));
        tokio::select! {
            u = self.sub.recv() => u.map(|u| Change::Progress(Box::new(u))),
            _ = ended => Some(Change::Look),
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
    /// How the agent's answer becomes parts: an answer that spells parts is sent whole at
    /// the end, never as chunks of its JSON.
    form: AnswerForm,
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

    async fn chunk(&self, text: &str, append: bool) -> bool {
        let parts = vec![render::text_part(text, self.version)];
        self.send(render::artifact_update(
            &self.task_id,
            &self.context_id,
            parts,
            append,
            false,
            self.version,
        ))
        .await
    }

    /// The whole answer, as the last chunk of the answer artifact.
    async fn whole(&self, answer: &str) -> bool {
        let parts = render_parts(answer, self.form, self.version);
        self.send(render::artifact_update(
            &self.task_id,
            &self.context_id,
            parts,
            false,
            true,
            self.version,
        ))
        .await
    }

    /// Forward one update of the task's child (one of `task`'s turns); false when the
    /// client is gone.
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
        self.forward(u, answer, shown).await
    }

    /// Forward one update. Once the stream has shown a terminal state (the snapshot of a task
    /// that ended before its stream began), updates that were still buffered send no status:
    /// a state never follows a terminal one.
    async fn forward(&self, u: SubagentUpdate, answer: &mut Answer, shown: &mut A2aState) -> bool {
        let ended = shown.is_terminal();
        match u.kind {
            UpdateKind::Start if *shown != A2aState::Working && !ended => {
                *shown = A2aState::Working;
                self.working(None).await
            }
            UpdateKind::Resumed if !ended => {
                *shown = A2aState::Working;
                self.working(Some(&u.text)).await
            }
            UpdateKind::Delta if !u.text.is_empty() && self.form == AnswerForm::Text => {
                let append = answer.started;
                answer.started = true;
                answer.text.push_str(&u.text);
                self.chunk(&u.text, append).await
            }
            UpdateKind::ToolStart => {
                *answer = Answer::default();
                if ended {
                    return true;
                }
                let tool = u.tool.unwrap_or_default();
                self.working(Some(&format!("using tool {tool}"))).await
            }
            _ => true,
        }
    }
}

/// Send the snapshot, then the task's changes until it ends. With `accepted`, the stream
/// follows the task from when its message was accepted: the snapshot shows it in that state
/// (without the answer, which the updates then bring), however far a fast agent has got.
async fn produce(
    state: Arc<State>,
    task: Arc<ServedTask>,
    mut feed: TaskFeed,
    out: Emitter,
    accepted: Option<A2aState>,
) {
    let version = out.version;
    let Some(mut first) = state.view(&task).await else {
        return;
    };
    let mut detail = Detail::default();
    if let Some(s) = accepted {
        first.state = s;
        detail.artifacts = false;
    }
    let mut shown = first.state;
    if !out
        .send(render::task_result(
            render::task(&first, detail, version),
            version,
        ))
        .await
    {
        return;
    }
    let mut answer = Answer::default();
    loop {
        // Updates already buffered happened before the state seen next: they go first.
        while let Some(u) = feed.buffered() {
            if !out.update(u, &task, &mut answer, &mut shown).await {
                return;
            }
        }
        let Some(view) = state.view(&task).await else {
            return;
        };
        if view.state.is_terminal() {
            break;
        }
        if view.state != shown {
            shown = view.state;
            let status = render::view_status(&view, version);
            let update = render::status_update(&task.id, &task.context_id, status, false, version);
            if !out
                .send(render::with_metadata(update, render::view_metadata(&view)))
                .await
            {
                return;
            }
        }
        // A gone client stops its stream (a task run elsewhere may send nothing for long).
        if out.tx.is_closed() {
            return;
        }
        match feed.next(&state, &task).await {
            Some(Change::Progress(u)) => {
                if !out.update(*u, &task, &mut answer, &mut shown).await {
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
    let Some(view) = state.view(&task).await else {
        return;
    };
    if let Some(result) = view.output.as_deref().filter(|r| !r.is_empty())
        && result != answer.text
        && !out.whole(result).await
    {
        return;
    }
    let status = render::view_status(&view, version);
    let last = render::status_update(&task.id, &task.context_id, status, true, version);
    out.send(render::with_metadata(last, render::view_metadata(&view)))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(kind: UpdateKind, text: &str) -> SubagentUpdate {
        SubagentUpdate {
            agent: "a".into(),
            task_id: Some("t".into()),
            session_id: "s".into(),
            kind,
            text: text.into(),
            tool: Some("bash".into()),
            usage: None,
            end: None,
        }
    }

    fn states(rx: &mut mpsc::Receiver<RpcResponse>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(r) = rx.try_recv() {
            let v = serde_json::to_value(&r).unwrap_or_default();
            if let Some(s) = v["result"]["statusUpdate"]["status"]["state"].as_str() {
                out.push(s.to_string());
            } else if v["result"]["artifactUpdate"].is_object() {
                out.push("artifact".into());
            }
        }
        out
    }

    fn emitter(form: AnswerForm) -> (Emitter, mpsc::Receiver<RpcResponse>) {
        let (tx, rx) = mpsc::channel(16);
        let out = Emitter {
            id: RpcId::Null,
            task_id: "t".into(),
            context_id: "c".into(),
            version: Version::V1,
            form,
            tx,
        };
        (out, rx)
    }

    /// A task that ended before its stream's snapshot was taken still has its child's
    /// updates buffered; replaying them must not show `working` after the terminal snapshot
    /// (the TCK's STREAM-ORDER-001 saw exactly that against a fast scripted model).
    #[tokio::test]
    async fn buffered_updates_after_a_terminal_snapshot_send_no_state() {
        let (out, mut rx) = emitter(AnswerForm::Text);
        let mut answer = Answer::default();
        let mut shown = A2aState::Completed;
        for u in [
            update(UpdateKind::Start, ""),
            update(UpdateKind::ToolStart, ""),
            update(UpdateKind::Delta, "hi"),
        ] {
            assert!(out.forward(u, &mut answer, &mut shown).await);
        }
        assert_eq!(states(&mut rx), ["artifact"]);
        assert_eq!(shown, A2aState::Completed);
    }

    #[tokio::test]
    async fn a_running_task_shows_working_then_tool_notes() {
        let (out, mut rx) = emitter(AnswerForm::Text);
        let mut answer = Answer::default();
        let mut shown = A2aState::Submitted;
        for u in [
            update(UpdateKind::Start, ""),
            update(UpdateKind::Delta, "a"),
            update(UpdateKind::ToolStart, ""),
        ] {
            assert!(out.forward(u, &mut answer, &mut shown).await);
        }
        assert_eq!(
            states(&mut rx),
            ["TASK_STATE_WORKING", "artifact", "TASK_STATE_WORKING"]
        );
        assert!(answer.text.is_empty(), "a tool call starts the answer over");
    }

    /// An answer that spells parts streams no chunks of its JSON: the parts come whole.
    #[tokio::test]
    async fn a_parts_answer_is_sent_whole() {
        let (out, mut rx) = emitter(AnswerForm::Parts);
        let mut answer = Answer::default();
        let mut shown = A2aState::Working;
        assert!(
            out.forward(
                update(UpdateKind::Delta, "[{\"data\""),
                &mut answer,
                &mut shown
            )
            .await
        );
        assert!(states(&mut rx).is_empty());
        assert!(out.whole(r#"[{"data": {"n": 1}}]"#).await);
        let r = serde_json::to_value(rx.try_recv().unwrap()).unwrap();
        let a = &r["result"]["artifactUpdate"];
        assert_eq!(a["artifact"]["parts"][0]["data"]["n"], 1);
        assert_eq!(a["lastChunk"], true);
    }
}
