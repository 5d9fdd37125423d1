//! The task protocol: `POST /tasks` (`{task_id, agent_id, input}` → `{task_id, status}`),
//! `GET /tasks/{id}`, `GET /tasks/{id}/wait?timeout_seconds=N`, `POST /tasks/{id}/cancel`.
//! Statuses are `pending`, `running`, `success`, `error` and `cancelled`. A resubmitted id
//! that is still pending or running gets the same answer and starts nothing; one that has
//! finished gets 409.

use super::book::ServedTask;
use super::guard::error;
use super::launch::{Launch, LaunchError, launch};
use super::state::{State, protocol_status};
use crate::time::rfc3339;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State as AxumState};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Wait of `/wait` when the caller gives none.
const DEFAULT_WAIT_SECS: u64 = 30;
/// How long a cancel waits for the task to stop before answering.
const CANCEL_SETTLE: Duration = Duration::from_secs(5);

#[derive(Debug, Deserialize)]
struct Submit {
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default, alias = "agent")]
    agent_id: Option<String>,
    input: String,
}

/// The query of `/wait`.
#[derive(Debug, Deserialize)]
pub(crate) struct WaitQuery {
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

/// The public id of a task: the caller's, else the runtime's.
fn public_id(t: &ServedTask) -> &str {
    t.external_id.as_deref().unwrap_or(&t.id)
}

/// `{task_id, agent_id, status, result?, error?, created_at, updated_at, usage, resumed?}`.
async fn record(state: &State, t: &ServedTask) -> Option<Value> {
    let snap = state.snapshot(t).await?;
    let mut v = json!({
        "task_id": public_id(t),
        "agent_id": t.agent,
        "status": protocol_status(snap.status),
        "created_at": rfc3339(t.created_at),
        "updated_at": rfc3339(snap.updated_at),
        "usage": snap.usage,
    });
    if let Some(obj) = v.as_object_mut() {
        if let Some(r) = &snap.result {
            obj.insert("result".into(), json!(r));
        }
        if let Some(e) = &snap.error {
            obj.insert("error".into(), json!(e));
        }
        if snap.resumes > 0 {
            obj.insert(
                "resumed".into(),
                json!({"times": snap.resumes, "node": snap.owner_node}),
            );
        }
        if snap.status.is_terminal() {
            let reason = snap.incomplete_reason();
            obj.insert("complete".into(), json!(reason.is_none()));
            if let Some(reason) = reason {
                obj.insert("reason".into(), json!(reason.as_str()));
            }
        }
    }
    Some(v)
}

fn not_found(id: &str) -> Response {
    error(StatusCode::NOT_FOUND, &format!("task {id} not found"))
}

async fn answer(state: &State, t: &ServedTask) -> Response {
    match record(state, t).await {
        Some(v) => Json(v).into_response(),
        None => not_found(public_id(t)),
    }
}

/// `POST /tasks`.
pub(crate) async fn submit(AxumState(state): AxumState<Arc<State>>, body: Bytes) -> Response {
    let req: Submit = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("expected {{\"task_id\", \"agent_id\", \"input\"}}: {e}"),
            );
        }
    };
    if req
        .task_id
        .as_deref()
        .is_some_and(|id| id.trim().is_empty() || id.contains('/'))
    {
        return error(
            StatusCode::BAD_REQUEST,
            "task_id must be non-empty and contain no '/'",
        );
    }
    let launched = launch(
        &state,
        Launch {
            agent: req.agent_id.filter(|a| !a.is_empty()),
            message_id: uuid::Uuid::new_v4().to_string(),
            text: req.input,
            context_id: None,
            conversation: false,
            external_id: req.task_id,
            follow: false,
            onto: None,
        },
    )
    .await;
    let task = match launched {
        Ok(l) => l.task,
        Err(e) => {
            let status = match &e {
                LaunchError::Busy { .. } => StatusCode::TOO_MANY_REQUESTS,
                LaunchError::Draining | LaunchError::StoreUnavailable(_) => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
                LaunchError::UnknownAgent { .. } => StatusCode::NOT_FOUND,
                LaunchError::InputTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                LaunchError::Finished(_) | LaunchError::CannotContinue(_) => StatusCode::CONFLICT,
                LaunchError::Spawn(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            let mut r = error(status, &e.message());
            if let Some(secs) = e.retry_after() {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static(secs));
            }
            return r;
        }
    };
    let status = state
        .snapshot(&task)
        .await
        .map_or("pending", |s| protocol_status(s.status));
    Json(json!({"task_id": public_id(&task), "status": status})).into_response()
}

/// `GET /tasks/{id}`.
pub(crate) async fn get_task(
    AxumState(state): AxumState<Arc<State>>,
    Path(id): Path<String>,
) -> Response {
    match state.find_task(&id, true).await {
        Some(t) => answer(&state, &t).await,
        None => not_found(&id),
    }
}

/// `GET /tasks/{id}/wait?timeout_seconds=N`: until the task is terminal or N seconds pass
/// (capped by `max_wait`).
pub(crate) async fn wait(
    AxumState(state): AxumState<Arc<State>>,
    Path(id): Path<String>,
    Query(q): Query<WaitQuery>,
) -> Response {
    let Some(t) = state.find_task(&id, true).await else {
        return not_found(&id);
    };
    let secs = q.timeout_seconds.unwrap_or(DEFAULT_WAIT_SECS);
    let limit = Duration::from_secs(secs).min(state.opts.max_wait);
    let _ = state
        .runtime
        .wait_for(&t.id, &CancellationToken::new(), Some(limit))
        .await;
    answer(&state, &t).await
}

/// `POST /tasks/{id}/cancel`: request cancellation, wait briefly for the task to stop, answer
/// with its record (a finished task is left as it is).
pub(crate) async fn cancel(
    AxumState(state): AxumState<Arc<State>>,
    Path(id): Path<String>,
) -> Response {
    let Some(t) = state.find_task(&id, true).await else {
        return not_found(&id);
    };
    if let Some(status) = state.runtime.cancel_task(&t.parent_session, &t.id).await
        && !status.is_terminal()
    {
        let _ = state
            .runtime
            .wait_for(&t.id, &CancellationToken::new(), Some(CANCEL_SETTLE))
            .await;
    }
    answer(&state, &t).await
}
