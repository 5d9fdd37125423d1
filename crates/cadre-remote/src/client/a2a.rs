//! The A2A side of the client: `SendStreamingMessage` when the card says it streams (text
//! of artifact updates becomes text deltas, status messages become notices), else a
//! non-blocking `SendMessage` and `GetTask` polling with backoff. An approval the remote
//! agent asks for (`input-required` with an `approval` data part, as cadre servers send) goes
//! to the run's approval channel, and the answer back on the same task. Cancellation sends
//! `CancelTask` (best effort) and ends the run cancelled. Method names and shapes follow the
//! card's protocol version.

use super::adopt::Check;
use super::call::{Call, cancelled, failed};
use super::progress::Progress;
use crate::a2a::Version;
use crate::a2a::card::CardInfo;
use crate::a2a::parse::{Item, item};
use crate::a2a::render::{self, Role, Said};
use crate::jsonrpc;
use cadre_subagents::RemoteOutcome;
use cadre_types::{ApprovalDecision, ApprovalRequest, RiskLevel};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;

/// Consecutive failed polls tolerated before the run fails.
const MAX_POLL_ERRORS: u32 = 5;

/// Why a run stopped early.
enum Stop {
    Cancelled,
    Failed(String),
}

fn method(version: Version, v1: &'static str, v03: &'static str) -> &'static str {
    match version {
        Version::V1 => v1,
        Version::V03 => v03,
    }
}

fn send_params(call: &Call<'_>, card: &CardInfo, streaming: bool) -> Value {
    let v = card.version;
    let mut msg = render::message(
        Role::User,
        &call.request.prompt,
        &uuid::Uuid::new_v4().to_string(),
        None,
        call.request.context_id.as_deref(),
        v,
    );
    if let (Some(agent), Some(obj)) = (&call.agent_hint, msg.as_object_mut()) {
        obj.insert("metadata".into(), json!({"agent": agent}));
    }
    let mut params = json!({"message": msg});
    if !streaming {
        params["configuration"] = no_wait(v);
    }
    params
}

fn no_wait(version: Version) -> Value {
    match version {
        Version::V1 => json!({"returnImmediately": true}),
        Version::V03 => json!({"blocking": false}),
    }
}

/// Answer the approval the remote asks for, if it asks one: the run's approval channel
/// decides (the person sees which remote agent asks), and the decision goes back on the same
/// task as a data part `{"approve", "feedback"}` with the same in words. True when the
/// remote's reply shows the run is over.
async fn ask(call: &Call<'_>, card: &CardInfo, p: &mut Progress) -> Result<bool, Stop> {
    let (Some(q), Some(task_id)) = (p.take_question(), p.task_id.clone()) else {
        return Ok(false);
    };
    let remote_agent = if q.agent.is_empty() {
        "the agent"
    } else {
        &q.agent
    };
    let request = ApprovalRequest {
        call_id: q.call_id.clone(),
        tool: q.tool.clone(),
        args: q.args.clone(),
        subject: q.subject.clone(),
        reason: q.reason.clone(),
        risk: match q.risk.as_str() {
            "low" => RiskLevel::Low,
            "high" => RiskLevel::High,
            _ => RiskLevel::Medium,
        },
        agent: format!(
            "{remote_agent} on {} (via {})",
            call.base, call.request.agent
        ),
        task_id: Some(call.request.task_id.clone()),
        // The remote question carries no old text of a file.
        replaces: None,
    };
    tracing::debug!(url = %call.base, tool = %q.tool, "remote agent asks for approval");
    let decision = tokio::select! {
        d = call.request.approvals.0.decide(request) => d,
        _ = call.cancel.cancelled() => return Err(Stop::Cancelled),
    };
    let (text, data) = answer(&decision);
    let v = card.version;
    let message = render::said(
        &Said {
            role: Role::User,
            text,
            form: crate::a2a::parts::AnswerForm::Text,
            data: Some(data),
            message_id: uuid::Uuid::new_v4().to_string(),
        },
        &task_id,
        p.context_id.as_deref().unwrap_or_default(),
        v,
    );
    let reply = rpc(
        call,
        card,
        method(v, "SendMessage", "message/send"),
        json!({"message": message, "configuration": no_wait(v)}),
    )
    .await?;
    Ok(p.apply(reply, call))
}

/// The answer sent back for `decision`: words for a person and data for a cadre server. A
/// policy's refusal names the policy, so the remote agent is told who refused (never "the
/// user" when nobody was asked).
fn answer(decision: &ApprovalDecision) -> (String, Value) {
    match decision {
        ApprovalDecision::AllowOnce | ApprovalDecision::AllowSession => {
            ("yes".to_string(), json!({"approve": true}))
        }
        ApprovalDecision::Deny { feedback } => {
            let f = feedback.clone().unwrap_or_default();
            let text = if f.is_empty() {
                "no".to_string()
            } else {
                format!("no: {f}")
            };
            (text, json!({"approve": false, "feedback": f}))
        }
        ApprovalDecision::Refused { policy, feedback } => {
            let text = decision.refusal_text().unwrap_or_default();
            let f = feedback.clone().unwrap_or_default();
            (
                format!("no: {text}"),
                json!({"approve": false, "policy": policy, "feedback": f}),
            )
        }
    }
}

fn post(call: &Call<'_>, card: &CardInfo, body: &Value) -> reqwest::RequestBuilder {
    let mut rb = call
        .http
        .post(&card.endpoint)
        .headers(call.headers.clone())
        .json(body);
    if card.version == Version::V1 {
        rb = rb.header("A2A-Version", Version::V1.as_str());
    }
    rb
}

/// The `result` of a JSON-RPC response, or the failure it reports.
fn result_of(call: &Call<'_>, v: &Value) -> Result<Item, Stop> {
    if let Some(e) = v.get("error") {
        let code = e.get("code").and_then(Value::as_i64).unwrap_or(0);
        let msg = e.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(Stop::Failed(format!(
            "remote agent at {} refused the request ({code}): {msg}",
            call.base
        )));
    }
    v.get("result").and_then(item).ok_or_else(|| {
        Stop::Failed(format!(
            "remote agent at {} sent an answer cadre cannot read",
            call.base
        ))
    })
}

/// One JSON-RPC call, answered within `timeout`.
async fn rpc_within(
    call: &Call<'_>,
    card: &CardInfo,
    method: &str,
    params: Value,
    timeout: Duration,
) -> Result<Item, Stop> {
    let body = jsonrpc::request(method, params);
    let resp = post(call, card, &body)
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| Stop::Failed(call.send_failure(&e)))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(Stop::Failed(call.http_failure(status, &text)));
    }
    let v: Value = serde_json::from_str(&text).map_err(|_| {
        Stop::Failed(format!(
            "remote agent at {} answered with invalid JSON",
            call.base
        ))
    })?;
    result_of(call, &v)
}

/// One JSON-RPC call that does not wait for the task.
async fn rpc(call: &Call<'_>, card: &CardInfo, method: &str, params: Value) -> Result<Item, Stop> {
    rpc_within(call, card, method, params, call.settings.request_timeout).await
}

/// Ask the remote to cancel task `id` (best effort, within the cancel timeout).
pub(crate) async fn cancel(call: &Call<'_>, card: &CardInfo, id: &str) {
    let sent = rpc(
        call,
        card,
        method(card.version, "CancelTask", "tasks/cancel"),
        json!({"id": id}),
    );
    if !matches!(
        tokio::time::timeout(call.settings.cancel_timeout, sent).await,
        Ok(Ok(_))
    ) {
        tracing::debug!(url = %call.base, task = id, "remote cancel not confirmed");
    }
}

/// Run the request over A2A.
pub(crate) async fn run(call: &Call<'_>, card: &CardInfo) -> RemoteOutcome {
    let mut p = Progress {
        context_id: call.request.context_id.clone(),
        ..Progress::default()
    };
    let ended = if card.streaming {
        stream(call, card, &mut p).await
    } else {
        poll(call, card, &mut p).await
    };
    match ended {
        Ok(()) => {
            settle_usage(call, card, &mut p).await;
            p.outcome(call)
        }
        Err(Stop::Cancelled) => {
            if let Some(id) = &p.task_id {
                cancel(call, card, id).await;
            }
            cancelled(p.task_id, p.context_id)
        }
        Err(Stop::Failed(e)) => failed(e, p.task_id, p.context_id),
    }
}

/// A task that ended without reporting its usage with the end is read once more (within
/// the request timeout): its tokens are billed whether or not the end event carried them,
/// and they count toward the caller's budget. A remote that never reports usage stays at
/// "cost unknown".
async fn settle_usage(call: &Call<'_>, card: &CardInfo, p: &mut Progress) {
    if !p.usage_unsettled() {
        return;
    }
    let Some(id) = p.task_id.clone() else {
        return;
    };
    let got = rpc(
        call,
        card,
        method(card.version, "GetTask", "tasks/get"),
        json!({"id": id}),
    )
    .await;
    match got {
        Ok(Item::Task(t)) if t.usage.is_some() => {
            p.usage = t.usage;
            p.usage_final = t.state.is_terminal();
        }
        Ok(_) => {}
        Err(Stop::Failed(e)) => {
            tracing::debug!(url = %call.base, task = %id, error = %e, "cannot read the remote task's usage");
        }
        Err(Stop::Cancelled) => {}
    }
}

async fn stream(call: &Call<'_>, card: &CardInfo, p: &mut Progress) -> Result<(), Stop> {
    let body = jsonrpc::request(
        method(card.version, "SendStreamingMessage", "message/stream"),
        send_params(call, card, true),
    );
    let send = post(call, card, &body)
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .send();
    let (resp, mut cancelled_at) = settle(call, send).await?;
    let resp = resp.map_err(|e| Stop::Failed(call.send_failure(&e)))?;
    let status = resp.status();
    let is_sse = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if !status.is_success() || !is_sse {
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(Stop::Failed(call.http_failure(status, &text)));
        }
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if p.apply(result_of(call, &v)?, call) {
            return Ok(());
        }
        if cancelled_at.is_some() {
            return Err(Stop::Cancelled);
        }
        if ask(call, card, p).await? {
            return Ok(());
        }
        return follow(call, card, p).await;
    }
    let mut events = resp.bytes_stream().eventsource();
    loop {
        // Once cancelled, read on only until the remote task's id is known, so that the
        // cancel can name it.
        let ev = match cancelled_at {
            Some(deadline) => {
                if p.task_id.is_some() {
                    return Err(Stop::Cancelled);
                }
                match tokio::time::timeout_at(deadline, events.next()).await {
                    Ok(ev) => ev,
                    Err(_) => return Err(Stop::Cancelled),
                }
            }
            None => tokio::select! {
                ev = events.next() => ev,
                _ = call.cancel.cancelled() => {
                    cancelled_at = Some(tokio::time::Instant::now() + call.settings.cancel_timeout);
                    continue;
                }
            },
        };
        match ev {
            Some(Ok(ev)) if ev.data.trim().is_empty() => continue,
            Some(Ok(ev)) => {
                let v: Value = serde_json::from_str(&ev.data).unwrap_or(Value::Null);
                if p.apply(result_of(call, &v)?, call) {
                    return Ok(());
                }
                // The stream goes on after the answer (a server that ends it at the
                // question is polled instead, below).
                if cancelled_at.is_none() && ask(call, card, p).await? {
                    return Ok(());
                }
            }
            Some(Err(e)) => {
                tracing::debug!(url = %call.base, error = %e, "stream broke; polling instead");
                break;
            }
            None => break,
        }
    }
    if cancelled_at.is_some() {
        return Err(Stop::Cancelled);
    }
    follow(call, card, p).await
}

/// Await `send`; when the run is cancelled meanwhile, still wait for the answer a little
/// (it names the remote task to cancel). Returns the answer and, if cancelled, until when
/// the caller may keep reading.
async fn settle<F, T>(call: &Call<'_>, send: F) -> Result<(T, Option<tokio::time::Instant>), Stop>
where
    F: std::future::Future<Output = T>,
{
    let mut send = std::pin::pin!(send);
    tokio::select! {
        r = &mut send => Ok((r, None)),
        _ = call.cancel.cancelled() => {
            let deadline = tokio::time::Instant::now() + call.settings.cancel_timeout;
            match tokio::time::timeout_at(deadline, send).await {
                Ok(r) => Ok((r, Some(deadline))),
                Err(_) => Err(Stop::Cancelled),
            }
        }
    }
}

async fn poll(call: &Call<'_>, card: &CardInfo, p: &mut Progress) -> Result<(), Stop> {
    let send = rpc_within(
        call,
        card,
        method(card.version, "SendMessage", "message/send"),
        send_params(call, card, false),
        call.settings.send_timeout,
    );
    let (first, cancelled_at) = settle(call, send).await?;
    if p.apply(first?, call) {
        return Ok(());
    }
    if cancelled_at.is_some() {
        return Err(Stop::Cancelled);
    }
    if ask(call, card, p).await? {
        return Ok(());
    }
    follow(call, card, p).await
}

/// Poll `GetTask` with backoff until the task ends.
async fn follow(call: &Call<'_>, card: &CardInfo, p: &mut Progress) -> Result<(), Stop> {
    let Some(id) = p.task_id.clone() else {
        return Err(Stop::Failed(format!(
            "remote agent at {} ended the exchange before naming a task",
            call.base
        )));
    };
    let mut delay = Duration::from_millis(100);
    let mut errors = 0;
    let mut last_note = p.status_text.clone();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = call.cancel.cancelled() => return Err(Stop::Cancelled),
        }
        delay = (delay * 3 / 2).min(Duration::from_secs(2));
        let get = rpc(
            call,
            card,
            method(card.version, "GetTask", "tasks/get"),
            json!({"id": id}),
        );
        let got = tokio::select! {
            r = get => r,
            _ = call.cancel.cancelled() => return Err(Stop::Cancelled),
        };
        match got {
            Ok(Item::Task(t)) => {
                errors = 0;
                let note = t.status_text.clone().filter(|_| t.question.is_none());
                let over = p.apply(Item::Task(t), call);
                if !over && note.is_some() && note != last_note {
                    call.notice(note.as_deref().unwrap_or(""));
                    last_note = note;
                }
                if over || ask(call, card, p).await? {
                    return Ok(());
                }
            }
            Ok(other) => {
                if p.apply(other, call) || ask(call, card, p).await? {
                    return Ok(());
                }
            }
            Err(Stop::Failed(e)) => {
                errors += 1;
                if errors >= MAX_POLL_ERRORS {
                    return Err(Stop::Failed(e));
                }
            }
            Err(Stop::Cancelled) => return Err(Stop::Cancelled),
        }
    }
}

/// One `GetTask` for an adopted task with remote id `id`.
pub(crate) async fn check(call: &Call<'_>, card: &CardInfo, id: &str) -> Check {
    let body = jsonrpc::request(
        method(card.version, "GetTask", "tasks/get"),
        json!({"id": id}),
    );
    let sent = post(call, card, &body)
        .timeout(call.settings.request_timeout)
        .send()
        .await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) => return Check::Error(call.send_failure(&e)),
    };
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Check::Lost(call.http_failure(status, &text));
    }
    if !status.is_success() {
        return Check::Error(call.http_failure(status, &text));
    }
    let Ok(v) = serde_json::from_str::<Value>(&text) else {
        return Check::Error(format!(
            "remote agent at {} answered with invalid JSON",
            call.base
        ));
    };
    if let Some(e) = v.get("error")
        && e.get("code").and_then(Value::as_i64) == Some(jsonrpc::TASK_NOT_FOUND)
    {
        let msg = e.get("message").and_then(Value::as_str).unwrap_or("");
        return Check::Lost(format!(
            "remote agent at {} does not know task {id}: {msg}",
            call.base
        ));
    }
    match result_of(call, &v) {
        Ok(it) => {
            let mut p = Progress::default();
            if p.apply(it, call) {
                Check::Done(p.outcome(call))
            } else {
                Check::Running
            }
        }
        Err(Stop::Failed(e)) => Check::Error(e),
        Err(Stop::Cancelled) => Check::Running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_refusal_is_answered_as_the_policy_not_as_the_user() {
        let (text, data) = answer(&ApprovalDecision::Refused {
            policy: "subagents.background_approvals = \"deny\"".into(),
            feedback: None,
        });
        assert_eq!(data["approve"], false);
        assert_eq!(data["policy"], "subagents.background_approvals = \"deny\"");
        assert!(!text.contains("user"), "{text}");
        let (_, person) = answer(&ApprovalDecision::Deny {
            feedback: Some("not now".into()),
        });
        assert!(person.get("policy").is_none());
        assert_eq!(person["feedback"], "not now");
    }
}
