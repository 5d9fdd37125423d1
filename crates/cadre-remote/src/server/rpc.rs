//! The A2A JSON-RPC endpoint and the agent card. Methods are accepted under their v1.0 names
//! (`SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`, `ListTasks`) and their
//! v0.3 names (`message/send`, ...); each answers in its own version's shapes. Errors are
//! JSON-RPC error objects with HTTP 200.

use super::launch::{Launch, LaunchError, launch};
use super::state::{State, view};
use super::stream;
use crate::a2a::card::{self, CardSpec};
use crate::a2a::parse::{SendParams, send_params};
use crate::a2a::render::{self, Detail};
use crate::a2a::{A2aState, Version};
use crate::jsonrpc::{self, RpcError, RpcId};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cadre_subagents::Waited;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long `CancelTask` waits for the task to stop before answering.
const CANCEL_SETTLE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Send,
    Stream,
    Get,
    Cancel,
    List,
}

fn method(name: &str) -> Option<(Method, Version)> {
    Some(match name {
        "SendMessage" => (Method::Send, Version::V1),
        "SendStreamingMessage" => (Method::Stream, Version::V1),
        "GetTask" => (Method::Get, Version::V1),
        "CancelTask" => (Method::Cancel, Version::V1),
        "ListTasks" => (Method::List, Version::V1),
        "message/send" => (Method::Send, Version::V03),
        "message/stream" => (Method::Stream, Version::V03),
        "tasks/get" => (Method::Get, Version::V03),
        "tasks/cancel" => (Method::Cancel, Version::V03),
        "tasks/list" => (Method::List, Version::V03),
        _ => return None,
    })
}

/// `GET /.well-known/agent-card.json` (public).
pub(crate) async fn card(AxumState(state): AxumState<Arc<State>>, headers: HeaderMap) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| state.local_addr().map(|a| a.to_string()))
        .unwrap_or_else(|| "127.0.0.1".into());
    let endpoint = format!("http://{host}/");
    let names: Vec<&str> = state.skills.iter().map(|s| s.name.as_str()).collect();
    let description = format!(
        "cadre agents: {}. Name one in message metadata `agent` (default: {}).",
        names.join(", "),
        state.default_agent
    );
    Json(card::build(&CardSpec {
        name: &state.opts.name,
        description: &description,
        version: &state.opts.version,
        endpoint: &endpoint,
        skills: &state.skills,
        bearer: state.opts.token.is_some(),
    }))
    .into_response()
}

/// The answer to a request: its response, or for a notification (no id) `204` and no body,
/// whatever the outcome.
fn reply(id: Option<&RpcId>, outcome: Result<Value, RpcError>) -> Response {
    let Some(id) = id else {
        return StatusCode::NO_CONTENT.into_response();
    };
    let body = match outcome {
        Ok(result) => jsonrpc::success(id, result),
        Err(e) => jsonrpc::failure(id, &e),
    };
    Json(body).into_response()
}

/// `POST /` and `POST /a2a`. A notification is carried out (a send returns at once, there
/// is nobody to stream to) but never answered.
pub(crate) async fn handle(AxumState(state): AxumState<Arc<State>>, body: Bytes) -> Response {
    let req = match jsonrpc::parse_request(&body) {
        Ok(r) => r,
        Err(r) => return reply(r.id.as_ref(), Err(r.error)),
    };
    let id = req.id.as_ref();
    tracing::debug!(method = %req.method, notification = id.is_none(), "json-rpc call");
    let Some((m, version)) = method(&req.method) else {
        let e = RpcError::new(
            jsonrpc::METHOD_NOT_FOUND,
            format!("Method not found: {}", req.method),
        );
        return reply(id, Err(e));
    };
    if let (Method::Stream, Some(id)) = (m, id) {
        return match send_params(&req.params) {
            Ok(p) => stream::respond(state, id.clone(), p, version).await,
            Err(e) => reply(Some(id), Err(RpcError::invalid_params(e))),
        };
    }
    let outcome = match m {
        Method::Send | Method::Stream => send(&state, &req.params, version, id.is_some()).await,
        _ => {
            let budget = state.opts.request_timeout;
            let call = async {
                match m {
                    Method::Get => get(&state, &req.params, version),
                    Method::Cancel => cancel(&state, &req.params, version).await,
                    _ => list(&state, &req.params, version),
                }
            };
            tokio::time::timeout(budget, call)
                .await
                .unwrap_or_else(|_| {
                    Err(RpcError::new(
                        jsonrpc::INTERNAL_ERROR,
                        "the request timed out",
                    ))
                })
        }
    };
    reply(id, outcome)
}

/// The JSON-RPC error for a refused launch.
pub(crate) fn launch_error(e: &LaunchError) -> RpcError {
    let code = match e {
        LaunchError::Busy { .. } | LaunchError::Draining => jsonrpc::SERVER_BUSY,
        LaunchError::UnknownAgent { .. } | LaunchError::InputTooLarge { .. } => {
            jsonrpc::INVALID_PARAMS
        }
        LaunchError::Finished(_) | LaunchError::Spawn(_) => jsonrpc::INTERNAL_ERROR,
    };
    RpcError::new(code, e.message())
}

/// Start a task for a send.
pub(crate) async fn start(
    state: &Arc<State>,
    p: &SendParams,
    follow: bool,
) -> Result<super::launch::Launched, RpcError> {
    // A message naming an earlier task continues that task's conversation.
    let context_id = p.message.context_id.clone().or_else(|| {
        p.message
            .task_id
            .as_deref()
            .and_then(|t| state.book.get(t))
            .map(|t| t.context_id.clone())
    });
    launch(
        state,
        Launch {
            agent: p.message.agent.clone(),
            text: p.message.text.clone(),
            message_id: p.message.message_id.clone(),
            context_id,
            conversation: true,
            external_id: None,
            follow,
        },
    )
    .await
    .map_err(|e| launch_error(&e))
}

/// Render a served task by id.
fn render_task(state: &State, id: &str, detail: Detail, version: Version) -> Option<Value> {
    let task = state.book.get(id)?;
    let snap = state.snapshot(&task)?;
    Some(render::task(&view(&task, &snap), detail, version))
}

/// Start a task; unless the caller asked to return at once or awaits no answer
/// (`answered` false: a notification), wait for it to end.
async fn send(
    state: &Arc<State>,
    params: &Value,
    version: Version,
    answered: bool,
) -> Result<Value, RpcError> {
    let p = send_params(params).map_err(RpcError::invalid_params)?;
    let launched = start(state, &p, false).await?;
    let id = launched.task.id.clone();
    if answered && !p.return_immediately {
        // Blocking: until the task ends, or max_wait (the caller then polls GetTask).
        let _ = state
            .runtime
            .wait_for(&id, &CancellationToken::new(), Some(state.opts.max_wait))
            .await;
    }
    let detail = Detail {
        history: p.history_length,
        artifacts: true,
    };
    let mut task = render_task(state, &id, detail, version)
        .ok_or_else(|| RpcError::new(jsonrpc::INTERNAL_ERROR, "the task vanished"))?;
    if p.return_immediately && task["status"]["state"] == A2aState::Submitted.wire(version) {
        // Accepted and queued for its child: the caller sees it as being worked on.
        task["status"]["state"] = json!(A2aState::Working.wire(version));
    }
    Ok(render::task_result(task, version))
}

fn task_id(params: &Value) -> Result<String, RpcError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| RpcError::invalid_params("params.id (the task id) must be a string"))
}

fn history_length(params: &Value) -> Option<usize> {
    params
        .get("historyLength")
        .and_then(Value::as_u64)
        .map(|n| n as usize)
}

fn get(state: &Arc<State>, params: &Value, version: Version) -> Result<Value, RpcError> {
    let id = task_id(params)?;
    let detail = Detail {
        history: history_length(params),
        artifacts: true,
    };
    render_task(state, &id, detail, version).ok_or_else(|| RpcError::task_not_found(&id))
}

async fn cancel(state: &Arc<State>, params: &Value, version: Version) -> Result<Value, RpcError> {
    let id = task_id(params)?;
    let task = state
        .book
        .get(&id)
        .ok_or_else(|| RpcError::task_not_found(&id))?;
    let status = state
        .runtime
        .cancel_task(&state.parent.run.session_id, &task.id)
        .await
        .ok_or_else(|| RpcError::task_not_found(&id))?;
    if status.is_terminal() {
        return Err(RpcError::new(
            jsonrpc::TASK_NOT_CANCELABLE,
            format!("Task cannot be canceled: it is already {status}"),
        ));
    }
    let abort = CancellationToken::new();
    if let Waited::TimedOut = state
        .runtime
        .wait_for(&task.id, &abort, Some(CANCEL_SETTLE))
        .await
    {
        tracing::warn!(task = %task.id, "cancel requested; the task has not stopped yet");
    }
    render_task(state, &id, Detail::default(), version).ok_or_else(|| RpcError::task_not_found(&id))
}

fn list(state: &Arc<State>, params: &Value, version: Version) -> Result<Value, RpcError> {
    let context = params.get("contextId").and_then(Value::as_str);
    let wanted = params
        .get("status")
        .and_then(Value::as_str)
        .map(A2aState::parse)
        .filter(|s| *s != A2aState::Unknown);
    let page_size = params
        .get("pageSize")
        .and_then(Value::as_u64)
        .map_or(50, |n| n.clamp(1, 1000)) as usize;
    let offset = match params.get("pageToken").and_then(Value::as_str) {
        None | Some("") => 0,
        Some(t) => t.parse::<usize>().map_err(|_| {
            RpcError::invalid_params("params.pageToken is not a token this server gave")
        })?,
    };
    let detail = Detail {
        history: Some(history_length(params).unwrap_or(0)),
        artifacts: params.get("includeArtifacts").and_then(Value::as_bool) == Some(true),
    };
    let mut rows = Vec::new();
    for task in state.book.list().into_iter().rev() {
        if context.is_some_and(|c| c != task.context_id) {
            continue;
        }
        let Some(snap) = state.snapshot(&task) else {
            continue;
        };
        if wanted.is_some_and(|w| A2aState::from_status(snap.status) != w) {
            continue;
        }
        rows.push((task, snap));
    }
    let total = rows.len();
    let tasks: Vec<Value> = rows
        .iter()
        .skip(offset)
        .take(page_size)
        .map(|(t, s)| render::task(&view(t, s), detail, version))
        .collect();
    let next = if offset + page_size < total {
        (offset + page_size).to_string()
    } else {
        String::new()
    };
    Ok(json!({
        "tasks": tasks,
        "nextPageToken": next,
        "pageSize": page_size,
        "totalSize": total,
    }))
}
