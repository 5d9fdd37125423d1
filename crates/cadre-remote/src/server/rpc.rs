//! The A2A JSON-RPC endpoint and the agent card. Methods are accepted under their v1.0 names
//! (`SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`, `ListTasks`,
//! `SubscribeToTask`) and their v0.3 names (`message/send`, ..., `tasks/resubscribe`); a
//! message with a `taskId` continues that task. The answer's shapes follow the version the request
//! negotiates with `A2A-Version` (header or query parameter; absent: v0.3). Errors are
//! JSON-RPC error objects with HTTP 200, each with a `google.rpc.ErrorInfo` in `data`.

use super::approval::{answer_of, stored_answer};
use super::book::{Said, ServedTask};
use super::launch::{Launch, LaunchError, launch};
use super::state::State;
use super::stream;
use crate::a2a::card::{self, CardSpec};
use crate::a2a::parse::{BadParams, SendParams, member, non_negative, send_params};
use crate::a2a::render::{self, Detail, Role};
use crate::a2a::{A2aState, SUPPORTED_VERSIONS, VERSION_HEADER, Version};
use crate::jsonrpc::{self, ErrorKind, RpcError, RpcId};
use crate::time::{http_date, parse_rfc3339};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use cadre_subagents::Waited;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long `CancelTask` waits for the task to stop before answering.
const CANCEL_SETTLE: Duration = Duration::from_secs(5);
/// How long clients may cache the agent card.
const CARD_MAX_AGE_SECS: u64 = 300;
/// ListTasks pages: the default and the largest size.
const DEFAULT_PAGE_SIZE: u64 = 50;
const MAX_PAGE_SIZE: u64 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Send,
    Stream,
    Get,
    Cancel,
    List,
    Subscribe,
    /// Any of the push-notification config methods: not offered.
    PushConfig,
    /// The authenticated extended card: not offered.
    ExtendedCard,
}

fn method(name: &str) -> Option<Method> {
    Some(match name {
        "SendMessage" | "message/send" => Method::Send,
        "SendStreamingMessage" | "message/stream" => Method::Stream,
        "GetTask" | "tasks/get" => Method::Get,
        "CancelTask" | "tasks/cancel" => Method::Cancel,
        "ListTasks" | "tasks/list" => Method::List,
        "SubscribeToTask" | "tasks/resubscribe" => Method::Subscribe,
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig"
        | "tasks/pushNotificationConfig/set"
        | "tasks/pushNotificationConfig/get"
        | "tasks/pushNotificationConfig/list"
        | "tasks/pushNotificationConfig/delete" => Method::PushConfig,
        "GetExtendedAgentCard" | "agent/getAuthenticatedExtendedCard" => Method::ExtendedCard,
        _ => return None,
    })
}

/// The `A2A-Version` a request names: the header, else the query parameter.
fn requested_version<'a>(headers: &'a HeaderMap, uri: &'a Uri) -> Option<&'a str> {
    if let Some(h) = headers.get(VERSION_HEADER) {
        return Some(h.to_str().unwrap_or("\u{fffd}"));
    }
    uri.query()?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| k.eq_ignore_ascii_case(VERSION_HEADER))
        .map(|(_, v)| v)
}

/// The version a request negotiates, or the VersionNotSupported error naming what is served.
fn negotiate(headers: &HeaderMap, uri: &Uri) -> Result<Version, RpcError> {
    let asked = requested_version(headers, uri);
    Version::negotiate(asked).ok_or_else(|| {
        RpcError::new(
            ErrorKind::VersionNotSupported,
            format!(
                "A2A version {} is not supported; this server speaks {}",
                asked.unwrap_or_default(),
                SUPPORTED_VERSIONS.join(" and ")
            ),
        )
        .with("requestedVersion", asked.unwrap_or_default())
        .with("supportedVersions", SUPPORTED_VERSIONS.join(","))
    })
}

/// `GET /.well-known/agent-card.json` (public): the v1.0 card, or the v0.3 one when the
/// request asks for 0.3 (`?A2A-Version=0.3` or the header); cacheable, with validators.
pub(crate) async fn card(
    AxumState(state): AxumState<Arc<State>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let version = match requested_version(&headers, &uri) {
        None => Version::V1,
        asked => Version::negotiate(asked).unwrap_or(Version::V1),
    };
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
    let body = card::build(
        &CardSpec {
            name: &state.opts.name,
            description: &description,
            version: &state.opts.version,
            endpoint: &endpoint,
            skills: &state.skills,
            bearer: state.opts.token.is_some(),
        },
        version,
    )
    .to_string();
    let etag = format!("\"{:016x}\"", fingerprint(&body));
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut r = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response()
    };
    let h = r.headers_mut();
    for (name, value) in [
        (
            header::CACHE_CONTROL,
            format!("public, max-age={CARD_MAX_AGE_SECS}"),
        ),
        (header::ETAG, etag),
        (header::LAST_MODIFIED, http_date(state.started_at)),
        (header::VARY, VERSION_HEADER.to_string()),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    r
}

/// A stable-within-the-process hash of the card's text, for its `ETag`.
fn fingerprint(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// The answer to a request: its response, or for a notification (no id) `204` and no body,
/// whatever the outcome.
fn reply(id: Option<&RpcId>, outcome: Result<Value, RpcError>) -> Response {
    let Some(id) = id else {
        return StatusCode::NO_CONTENT.into_response();
    };
    match outcome {
        Ok(result) => Json(jsonrpc::success(id, result)).into_response(),
        Err(e) => failure(id, &e),
    }
}

/// A JSON-RPC error response: HTTP 200, or for a refusal to retry elsewhere its status
/// (503) and `Retry-After`.
pub(crate) fn failure(id: &RpcId, e: &RpcError) -> Response {
    let body = Json(jsonrpc::failure(id, e));
    let Some((status, secs)) = e.refusal else {
        return body.into_response();
    };
    let mut r = body.into_response();
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static(secs));
    r
}

/// The JSON-RPC error for refused send parameters.
fn bad_params(e: BadParams) -> RpcError {
    match &e {
        BadParams::Invalid(_) => RpcError::invalid_params(e.to_string()),
        BadParams::MediaType(m) => {
            RpcError::new(ErrorKind::ContentTypeNotSupported, e.to_string()).with("mediaType", m)
        }
    }
}

/// `POST /` and `POST /a2a`. A notification is carried out (a send returns at once, there
/// is nobody to stream to) but never answered.
pub(crate) async fn handle(
    AxumState(state): AxumState<Arc<State>>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    let req = match jsonrpc::parse_request(&body) {
        Ok(r) => r,
        Err(r) => return reply(r.id.as_ref(), Err(r.error)),
    };
    let id = req.id.as_ref();
    tracing::debug!(method = %req.method, notification = id.is_none(), "json-rpc call");
    let version = match negotiate(&headers, &uri) {
        Ok(v) => v,
        Err(e) => return reply(id, Err(e)),
    };
    let Some(m) = method(&req.method) else {
        let e = RpcError::new(
            ErrorKind::MethodNotFound,
            format!("Method not found: {}", req.method),
        )
        .with("method", &req.method);
        return reply(id, Err(e));
    };
    match (m, id) {
        (Method::Stream, Some(id)) => {
            return match send_params(&req.params) {
                Ok(p) => stream::respond(state, id.clone(), p, version).await,
                Err(e) => reply(Some(id), Err(bad_params(e))),
            };
        }
        (Method::Subscribe, Some(id)) => {
            return subscribe(state, id.clone(), &req.params, version).await;
        }
        // Nobody to stream to.
        (Method::Subscribe, None) => return reply(None, Ok(Value::Null)),
        _ => {}
    }
    let outcome = match m {
        Method::Send | Method::Stream => send(&state, &req.params, version, id.is_some()).await,
        Method::PushConfig => Err(RpcError::new(
            ErrorKind::PushNotificationNotSupported,
            "push notifications are not supported; poll GetTask or stream instead",
        )),
        Method::ExtendedCard => Err(RpcError::new(
            ErrorKind::ExtendedCardNotConfigured,
            "there is no extended agent card; the public card is complete",
        )),
        _ => {
            let budget = state.opts.request_timeout;
            let call = async {
                match m {
                    Method::Get => get(&state, &req.params, version).await,
                    Method::Cancel => cancel(&state, &req.params, version).await,
                    _ => list(&state, &req.params, version).await,
                }
            };
            tokio::time::timeout(budget, call)
                .await
                .unwrap_or_else(|_| {
                    Err(RpcError::new(ErrorKind::Internal, "the request timed out"))
                })
        }
    };
    reply(id, outcome)
}

/// The JSON-RPC error for a refused launch.
pub(crate) fn launch_error(e: &LaunchError) -> RpcError {
    let kind = match e {
        LaunchError::Busy { .. } | LaunchError::Draining | LaunchError::StoreUnavailable(_) => {
            ErrorKind::ServerBusy
        }
        LaunchError::UnknownAgent { .. } | LaunchError::InputTooLarge { .. } => {
            ErrorKind::InvalidParams
        }
        LaunchError::CannotContinue(_) => ErrorKind::UnsupportedOperation,
        LaunchError::Finished(_) | LaunchError::Spawn(_) => ErrorKind::Internal,
    };
    let mut rpc = RpcError::new(kind, e.message());
    // A node that is draining or has lost its store says so in the HTTP status too: a load
    // balancer retries only what it can see failed. A full node keeps the JSON-RPC answer
    // (its readiness says so to the balancer) and says when to come back.
    rpc.refusal = match e {
        LaunchError::Draining | LaunchError::StoreUnavailable(_) => {
            e.retry_after().map(|secs| (503, secs))
        }
        LaunchError::Busy { .. } => e.retry_after().map(|secs| (200, secs)),
        _ => None,
    };
    rpc
}

/// The task a message names with `taskId`, if it may take the message: it exists (else
/// TaskNotFound), the message's `contextId`, if any, is the task's (else InvalidParams), it
/// has not ended and was started over A2A (else UnsupportedOperation). A task another node
/// runs is returned too: only an answer to its question may go to it (`relay_answer`).
async fn target(state: &State, p: &SendParams) -> Result<Option<Arc<ServedTask>>, RpcError> {
    let Some(id) = p.message.task_id.as_deref() else {
        return Ok(None);
    };
    let task = state
        .find_task(id, false)
        .await
        .ok_or_else(|| RpcError::task_not_found(id))?;
    if let Some(ctx) = p.message.context_id.as_deref()
        && ctx != task.context_id
    {
        return Err(RpcError::invalid_params(format!(
            "contextId {ctx} is not the context of task {id} ({}); leave it out or send the task's",
            task.context_id
        ))
        .with("taskId", id)
        .with("contextId", ctx));
    }
    let state_now = state
        .view(&task)
        .await
        .map_or(A2aState::Unknown, |v| v.state);
    if state_now.is_terminal() {
        return Err(RpcError::new(
            ErrorKind::UnsupportedOperation,
            format!(
                "task {id} is {} and takes no more messages; send one without taskId (same contextId) to continue the conversation in a new task",
                state_now.wire(Version::V03)
            ),
        )
        .with("taskId", id));
    }
    if state.is_from_store(&task) {
        // Only an answer to its question may be sent here (see `relay_answer`).
        return Ok(Some(task));
    }
    if !task.continuable {
        return Err(RpcError::new(
            ErrorKind::UnsupportedOperation,
            format!("task {id} was submitted over the task protocol and takes no messages"),
        )
        .with("taskId", id));
    }
    Ok(Some(task))
}

/// What a message on a task another node runs gets: an answer to the question the task
/// waits on is stored for that node to take (the task goes on there), and the task is
/// returned; anything else is refused, naming the node (error UnsupportedOperation).
async fn relay_answer(state: &State, task: &ServedTask, p: &SendParams) -> Result<(), RpcError> {
    let id = &task.id;
    let turn = state.snapshot(task).await;
    let node = turn
        .as_ref()
        .map_or_else(|| "?".to_string(), |t| t.owner_node.clone());
    if let (Some(turn), Some(decision)) = (&turn, answer_of(&p.message))
        && let Some(question) = turn.question.as_deref()
        && turn.answer.is_none()
    {
        let answer = stored_answer(&decision, &p.message);
        match state
            .runtime
            .store()
            .answer_question(&turn.id, question, &answer)
            .await
        {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => tracing::warn!(task = %id, error = %e, "store: storing an answer failed"),
        }
    }
    Err(RpcError::new(
        ErrorKind::UnsupportedOperation,
        format!(
            "task {id} is run by another cadre serve node of this task store, `{node}`; only an answer to the question it waits on can be sent here: send its other messages to that node"
        ),
    )
    .with("taskId", id)
    .with("node", &node))
}

/// Act on a send: a message without `taskId` starts a task (in its `contextId`'s
/// conversation, with its history, when it names one); a message with one continues that
/// task: it answers the question the task waits on, or is kept in its history while the
/// question stays open, or starts its next turn.
pub(crate) async fn start(
    state: &Arc<State>,
    p: &SendParams,
    follow: bool,
) -> Result<super::launch::Launched, RpcError> {
    let onto = target(state, p).await?;
    if let Some(task) = &onto
        && state.is_from_store(task)
    {
        relay_answer(state, task, p).await?;
        return Ok(super::launch::Launched {
            task: task.clone(),
            follow: None,
        });
    }
    if let Some(task) = &onto
        && task.gate.question().is_some()
    {
        if !task.journal.has_room(0, 2) {
            return Err(RpcError::invalid_params(format!(
                "task {} has taken as many messages as a task may; answer yes or no",
                task.id
            )));
        }
        let answered = match answer_of(&p.message) {
            Some(decision) => task.gate.answer(decision, &p.message),
            None => false,
        };
        if !answered {
            // Not an answer (or the question was withdrawn meanwhile): kept, still asked.
            let bytes = task.journal.record(Said::User {
                text: p.message.text.clone(),
                message_id: p.message.message_id.clone(),
                turn: None,
            });
            state.book.lock().task_grew(bytes);
        }
        return Ok(super::launch::Launched {
            task: task.clone(),
            follow: follow.then(|| state.sink.subscribe(&task.session_id)),
        });
    }
    let context_id = match &onto {
        Some(t) => Some(t.context_id.clone()),
        None => p.message.context_id.clone(),
    };
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
            onto,
        },
    )
    .await
    .map_err(|e| launch_error(&e))
}

/// Render a served task.
async fn render(
    state: &State,
    task: &ServedTask,
    detail: Detail,
    version: Version,
) -> Option<Value> {
    Some(render::task(&state.view(task).await?, detail, version))
}

/// Render a served task by id.
async fn render_task(state: &State, id: &str, detail: Detail, version: Version) -> Option<Value> {
    let task = state.find_task(id, false).await?;
    render(state, &task, detail, version).await
}

/// Start or continue a task; unless the caller asked to return at once or awaits no answer
/// (`answered` false: a notification), wait until it ends or waits for the caller.
async fn send(
    state: &Arc<State>,
    params: &Value,
    version: Version,
    answered: bool,
) -> Result<Value, RpcError> {
    let p = send_params(params).map_err(bad_params)?;
    let launched = start(state, &p, false).await?;
    let task = launched.task;
    if answered && !p.return_immediately {
        // Blocking: until the task ends or is interrupted, or max_wait (the caller then
        // polls GetTask).
        state.settled(&task, state.opts.max_wait).await;
        if state.answer_style(&task.agent).message
            && let Some(m) = answer_message(state, &task, version).await
        {
            return Ok(render::message_result(m, version));
        }
    }
    let detail = Detail {
        history: p.history_length,
        artifacts: true,
    };
    let mut rendered = render(state, &task, detail, version)
        .await
        .ok_or_else(|| RpcError::new(ErrorKind::Internal, "the task vanished"))?;
    if p.return_immediately && rendered["status"]["state"] == A2aState::Submitted.wire(version) {
        // Accepted and queued for its child: the caller sees it as being worked on.
        rendered["status"]["state"] = json!(A2aState::Working.wire(version));
    }
    Ok(render::task_result(rendered, version))
}

/// A completed task's answer as a Message of the agent in the task's context: what an agent
/// served with `reply = "message"` answers a blocking send with. `None` while the task has
/// not completed (the caller then gets the task).
async fn answer_message(state: &State, task: &ServedTask, version: Version) -> Option<Value> {
    let view = state.view(task).await?;
    if view.state != A2aState::Completed {
        return None;
    }
    let answer = view.output.unwrap_or_default();
    Some(render::message_of(
        Role::Agent,
        crate::a2a::parts::render_parts(&answer, view.form, version),
        &format!("{}-answer", task.last_turn()),
        None,
        Some(&task.context_id),
        version,
    ))
}

fn task_id(params: &Value) -> Result<String, RpcError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| RpcError::invalid_params("params.id (the task id) must be a string"))
}

fn history_length(params: &Value) -> Result<Option<usize>, RpcError> {
    non_negative(params, "historyLength", "params")
        .map(|n| n.map(|n| n as usize))
        .map_err(RpcError::invalid_params)
}

async fn get(state: &Arc<State>, params: &Value, version: Version) -> Result<Value, RpcError> {
    let id = task_id(params)?;
    let detail = Detail {
        history: history_length(params)?,
        artifacts: true,
    };
    render_task(state, &id, detail, version)
        .await
        .ok_or_else(|| RpcError::task_not_found(&id))
}

/// CancelTask: cancel every turn that has not ended, wait briefly for the task to stop.
async fn cancel(state: &Arc<State>, params: &Value, version: Version) -> Result<Value, RpcError> {
    let id = task_id(params)?;
    let task = state
        .find_task(&id, false)
        .await
        .ok_or_else(|| RpcError::task_not_found(&id))?;
    let now = state
        .view(&task)
        .await
        .ok_or_else(|| RpcError::task_not_found(&id))?
        .state;
    if now.is_terminal() {
        return Err(RpcError::new(
            ErrorKind::TaskNotCancelable,
            format!(
                "Task cannot be canceled: it is already {}",
                now.wire(Version::V03)
            ),
        )
        .with("taskId", &id));
    }
    for turn in task.journal.copy().turns.iter().rev() {
        let _ = state.runtime.cancel_task(&task.parent_session, turn).await;
    }
    let abort = CancellationToken::new();
    if let Waited::TimedOut = state
        .runtime
        .wait_for(&task.last_turn(), &abort, Some(CANCEL_SETTLE))
        .await
    {
        tracing::warn!(task = %task.id, "cancel requested; the task has not stopped yet");
    }
    render(state, &task, Detail::default(), version)
        .await
        .ok_or_else(|| RpcError::task_not_found(&id))
}

/// SubscribeToTask: the task's updates from now on, as a stream; an unknown task is
/// TaskNotFound, one that has ended UnsupportedOperation.
async fn subscribe(state: Arc<State>, id: RpcId, params: &Value, version: Version) -> Response {
    let found = match task_id(params) {
        Ok(t) => state
            .find_task(&t, false)
            .await
            .ok_or_else(|| RpcError::task_not_found(&t)),
        Err(e) => Err(e),
    };
    let task = match found {
        Ok(t) => t,
        Err(e) => return reply(Some(&id), Err(e)),
    };
    let now = state
        .view(&task)
        .await
        .map_or(A2aState::Unknown, |v| v.state);
    if now.is_terminal() || now == A2aState::Unknown {
        let e = RpcError::new(
            ErrorKind::UnsupportedOperation,
            format!(
                "task {} is {}: there is nothing more to stream; read it with GetTask",
                task.id,
                now.wire(Version::V03)
            ),
        )
        .with("taskId", &task.id);
        return reply(Some(&id), Err(e));
    }
    stream::subscribe(state, id, task, version)
}

/// What a ListTasks asks for, checked.
struct ListQuery<'a> {
    context: Option<&'a str>,
    status: Option<A2aState>,
    page_size: usize,
    offset: usize,
    /// Unix ms: only tasks whose status changed at or after it.
    changed_since: Option<u64>,
    detail: Detail,
}

fn list_query(params: &Value) -> Result<ListQuery<'_>, RpcError> {
    let status = match member(params, "status") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() || s == "TASK_STATE_UNSPECIFIED" => None,
        Some(Value::String(s)) => match A2aState::parse(s) {
            A2aState::Unknown => {
                return Err(RpcError::invalid_params(format!(
                    "params.status `{s}` is not a task state (TASK_STATE_WORKING, ...)"
                )));
            }
            state => Some(state),
        },
        Some(_) => return Err(RpcError::invalid_params("params.status must be a string")),
    };
    let page_size = match non_negative(params, "pageSize", "params") {
        Ok(None) => DEFAULT_PAGE_SIZE,
        Ok(Some(n)) if (1..=MAX_PAGE_SIZE).contains(&n) => n,
        Ok(Some(n)) => {
            return Err(RpcError::invalid_params(format!(
                "params.pageSize must be between 1 and {MAX_PAGE_SIZE} (got {n})"
            )));
        }
        Err(e) => return Err(RpcError::invalid_params(e)),
    } as usize;
    let offset = match member(params, "pageToken").and_then(Value::as_str) {
        None | Some("") => 0,
        Some(t) => t.parse::<usize>().map_err(|_| {
            RpcError::invalid_params("params.pageToken is not a token this server gave")
        })?,
    };
    let changed_since = match member(params, "statusTimestampAfter") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_str().and_then(parse_rfc3339).ok_or_else(|| {
            RpcError::invalid_params(
                "params.statusTimestampAfter must be an RFC 3339 UTC timestamp (2026-01-02T03:04:05Z)",
            )
        })?),
    };
    let detail = Detail {
        history: Some(history_length(params)?.unwrap_or(0)),
        artifacts: member(params, "includeArtifacts").and_then(Value::as_bool) == Some(true),
    };
    Ok(ListQuery {
        context: member(params, "contextId").and_then(Value::as_str),
        status,
        page_size,
        offset,
        changed_since,
        detail,
    })
}

/// ListTasks: the remembered tasks and those other nodes on the same store serve, matching
/// the filters, most recently changed first.
async fn list(state: &Arc<State>, params: &Value, version: Version) -> Result<Value, RpcError> {
    let q = list_query(params)?;
    // One read of the store for every served turn (all are children of the serve session).
    let mut stored: std::collections::HashMap<String, cadre_subagents::TaskRecord> = state
        .runtime
        .tasks_of(&state.parent.run.session_id)
        .await
        .into_iter()
        .map(|r| (r.id.clone(), r))
        .collect();
    let mut rows = Vec::new();
    for task in state.book.list() {
        if q.context.is_some_and(|c| c != task.context_id) {
            continue;
        }
        let turns = task.journal.copy().turns;
        let snaps = turns.iter().map(|t| stored.remove(t)).collect();
        let Some(view) = state.view_of(&task, snaps) else {
            continue;
        };
        if q.status.is_some_and(|w| view.state != w)
            || q.changed_since.is_some_and(|t| view.updated_at < t)
        {
            continue;
        }
        rows.push(view);
    }
    // Tasks the book does not hold (other nodes', earlier processes', ours it forgot),
    // from their stored records.
    let statuses = q.status.map(A2aState::statuses);
    if statuses.is_none_or(|s| !s.is_empty()) {
        let status = statuses.and_then(|s| (s.len() == 1).then(|| s[0]));
        for (task, turns) in state.stored_tasks(status).await {
            if q.context.is_some_and(|c| c != task.context_id) {
                continue;
            }
            let Some(view) = state.view_of(&task, turns.into_iter().map(Some).collect()) else {
                continue;
            };
            if q.status.is_some_and(|w| view.state != w)
                || q.changed_since.is_some_and(|t| view.updated_at < t)
            {
                continue;
            }
            rows.push(view);
        }
    }
    // Newest change first; among equal times, the later task first.
    rows.reverse();
    rows.sort_by_key(|v| std::cmp::Reverse(v.updated_at));
    let total = rows.len();
    let tasks: Vec<Value> = rows
        .iter()
        .skip(q.offset)
        .take(q.page_size)
        .map(|v| render::task(v, q.detail, version))
        .collect();
    let next = if q.offset + q.page_size < total {
        (q.offset + q.page_size).to_string()
    } else {
        String::new()
    };
    Ok(json!({
        "tasks": tasks,
        "nextPageToken": next,
        "pageSize": q.page_size,
        "totalSize": total,
    }))
}
