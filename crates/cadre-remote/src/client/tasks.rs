//! The task-protocol side of the client: `POST /tasks` with the local task id (a busy remote
//! is retried for a while), then `GET /tasks/{id}/wait` in a loop until the task ends.
//! Cancellation sends `POST /tasks/{id}/cancel` (best effort) and ends the run cancelled.

use super::adopt::Check;
use super::call::{Call, cancelled, failed};
use cadre_subagents::RemoteOutcome;
use cadre_types::{EndState, Usage};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Consecutive failed waits tolerated before the run fails.
const MAX_WAIT_ERRORS: u32 = 5;

enum Polled {
    Running(String),
    Done(RemoteOutcome),
}

fn outcome_of(call: &Call<'_>, v: &Value) -> Polled {
    let status = v.get("status").and_then(Value::as_str).unwrap_or("");
    let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let usage: Usage = v
        .get("usage")
        .and_then(|u| serde_json::from_value(u.clone()).ok())
        .unwrap_or_default();
    let state = match status {
        "success" | "completed" => EndState::Completed,
        "cancelled" | "canceled" => EndState::Cancelled,
        "error" | "failed" => {
            let e = text("error");
            EndState::Failed {
                error: format!(
                    "remote agent at {} failed: {}",
                    call.base,
                    if e.is_empty() { "no reason given" } else { &e }
                ),
            }
        }
        other => return Polled::Running(other.to_string()),
    };
    Polled::Done(RemoteOutcome {
        state,
        output: text("result"),
        usage,
        remote_task_id: Some(call.request.task_id.clone()),
        context_id: None,
    })
}

async fn submit(call: &Call<'_>) -> Result<(), String> {
    let mut body = json!({"task_id": call.request.task_id, "input": call.request.prompt});
    if let Some(agent) = &call.agent_hint {
        body["agent_id"] = json!(agent);
    }
    let started = Instant::now();
    let mut delay = Duration::from_millis(200);
    loop {
        let resp = call
            .http
            .post(format!("{}/tasks", call.base))
            .headers(call.headers.clone())
            .timeout(call.settings.request_timeout)
            .json(&body)
            .send()
            .await
            .map_err(|e| call.send_failure(&e))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let text = resp.text().await.unwrap_or_default();
        if status != StatusCode::TOO_MANY_REQUESTS || started.elapsed() >= call.settings.busy_retry
        {
            return Err(call.http_failure(status, &text));
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

async fn wait_once(call: &Call<'_>) -> Result<Value, String> {
    let secs = call.settings.wait_secs;
    let resp = call
        .http
        .get(format!(
            "{}/tasks/{}/wait?timeout_seconds={secs}",
            call.base, call.request.task_id
        ))
        .headers(call.headers.clone())
        .timeout(Duration::from_secs(secs + 15))
        .send()
        .await
        .map_err(|e| call.send_failure(&e))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(call.http_failure(status, &text));
    }
    serde_json::from_str(&text)
        .map_err(|_| format!("remote agent at {} answered with invalid JSON", call.base))
}

/// Ask the remote to cancel the task (best effort, within the cancel timeout).
pub(crate) async fn cancel_remote(call: &Call<'_>) {
    let send = call
        .http
        .post(format!(
            "{}/tasks/{}/cancel",
            call.base, call.request.task_id
        ))
        .headers(call.headers.clone())
        // Servers may require a JSON body on every POST (cadre's does).
        .json(&json!({}))
        .timeout(call.settings.cancel_timeout)
        .send();
    if let Err(e) = send.await {
        tracing::debug!(url = %call.base, error = %e, "remote cancel not delivered");
    }
}

/// Run the request over the task protocol.
pub(crate) async fn run(call: &Call<'_>) -> RemoteOutcome {
    let id = Some(call.request.task_id.clone());
    let mut submit = std::pin::pin!(submit(call));
    let submitted = tokio::select! {
        r = &mut submit => r,
        _ = call.cancel.cancelled() => {
            // Let the submission land (briefly) so the cancel finds the task.
            let _ = tokio::time::timeout(call.settings.cancel_timeout, submit).await;
            cancel_remote(call).await;
            return cancelled(id, None);
        }
    };
    if let Err(e) = submitted {
        return failed(e, id, None);
    }
    call.report_remote_id(&call.request.task_id);
    let mut errors = 0;
    let mut last = String::new();
    loop {
        let waited = tokio::select! {
            r = wait_once(call) => r,
            _ = call.cancel.cancelled() => {
                cancel_remote(call).await;
                return cancelled(id, None);
            }
        };
        match waited {
            Ok(v) => {
                errors = 0;
                match outcome_of(call, &v) {
                    Polled::Done(o) => return o,
                    Polled::Running(status) => {
                        if status != last {
                            call.notice(&format!("remote task {status}"));
                            last = status;
                        }
                    }
                }
            }
            Err(e) => {
                errors += 1;
                if errors >= MAX_WAIT_ERRORS {
                    return failed(e, id, None);
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = call.cancel.cancelled() => {
                        cancel_remote(call).await;
                        return cancelled(id, None);
                    }
                }
            }
        }
    }
}

/// One `/wait` for an adopted task (the request's task id is the remote one).
pub(crate) async fn check(call: &Call<'_>) -> Check {
    let secs = call.settings.wait_secs;
    let sent = call
        .http
        .get(format!(
            "{}/tasks/{}/wait?timeout_seconds={secs}",
            call.base, call.request.task_id
        ))
        .headers(call.headers.clone())
        .timeout(Duration::from_secs(secs + 15))
        .send()
        .await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) => return Check::Error(call.send_failure(&e)),
    };
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if status == StatusCode::NOT_FOUND {
        return Check::Lost(call.http_failure(status, &text));
    }
    if !status.is_success() {
        return Check::Error(call.http_failure(status, &text));
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => match outcome_of(call, &v) {
            Polled::Done(o) => Check::Done(o),
            Polled::Running(_) => Check::Running,
        },
        Err(_) => Check::Error(format!(
            "remote agent at {} answered with invalid JSON",
            call.base
        )),
    }
}
