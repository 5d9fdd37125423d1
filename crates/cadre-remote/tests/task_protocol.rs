//! The task protocol over HTTP: submit, get, wait, cancel, 409 for a finished id, idempotent
//! resubmission of a running id, unknown ids and agents, and 429 at the concurrency cap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

async fn post(url: &str, body: Value) -> (u16, Value) {
    let r = http().post(url).json(&body).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn get(url: &str) -> (u16, Value) {
    let r = http().get(url).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_wait_get_and_conflict() {
    let n = node();
    let srv = serve(&n, options()).await;
    let base = srv.url();
    let (s, v) = post(
        &format!("{base}/tasks"),
        json!({"task_id": "job-1", "agent_id": "echo", "input": "ping"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["task_id"], "job-1");
    assert!(["pending", "running", "success"].contains(&v["status"].as_str().unwrap()));

    let (s, v) = get(&format!("{base}/tasks/job-1/wait?timeout_seconds=10")).await;
    assert_eq!(s, 200);
    assert_eq!(v["status"], "success", "{v}");
    assert_eq!(v["result"], "echo: ping");
    assert_eq!(v["agent_id"], "echo");
    assert!(v["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(v["updated_at"].as_str().is_some());

    let (s, v) = get(&format!("{base}/tasks/job-1")).await;
    assert_eq!((s, v["status"].as_str()), (200, Some("success")));

    // The id is finished: a resubmission conflicts and starts nothing.
    let (s, v) = post(
        &format!("{base}/tasks"),
        json!({"task_id": "job-1", "agent_id": "echo", "input": "again"}),
    )
    .await;
    assert_eq!(s, 409, "{v}");
    assert!(v["error"].as_str().unwrap().contains("already finished"));
    assert_eq!(task_count(&n, &srv).await, 1);

    let (s, _) = get(&format!("{base}/tasks/nope")).await;
    assert_eq!(s, 404);
    let (s, v) = post(
        &format!("{base}/tasks"),
        json!({"task_id": "x", "agent_id": "ghost", "input": "hi"}),
    )
    .await;
    assert_eq!(s, 404);
    assert!(
        v["error"].as_str().unwrap().contains("echo"),
        "lists agents: {v}"
    );
    let (s, _) = post(&format!("{base}/tasks"), json!({"task_id": "x"})).await;
    assert_eq!(s, 400, "input is required");
    // Without agent_id the default agent runs; without task_id the server names the task.
    let (s, v) = post(&format!("{base}/tasks"), json!({"input": "anon"})).await;
    assert_eq!(s, 200);
    let id = v["task_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("task_"));
    let (_, v) = get(&format!("{base}/tasks/{id}/wait?timeout_seconds=10")).await;
    assert_eq!(v["result"], "echo: anon");
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resubmitting_a_running_id_is_idempotent_and_cancel_stops_it() {
    let n = node();
    let srv = serve(&n, options()).await;
    let base = srv.url();
    let body = json!({"task_id": "long", "agent_id": "slow", "input": "take your time"});
    let (s1, v1) = post(&format!("{base}/tasks"), body.clone()).await;
    let (s2, v2) = post(&format!("{base}/tasks"), body).await;
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(v1["task_id"], v2["task_id"]);
    assert_eq!(task_count(&n, &srv).await, 1, "no second run");

    // A short wait returns the running task.
    let (s, v) = get(&format!("{base}/tasks/long/wait?timeout_seconds=1")).await;
    assert_eq!(s, 200);
    assert!(
        ["pending", "running"].contains(&v["status"].as_str().unwrap()),
        "{v}"
    );

    let (s, v) = post(&format!("{base}/tasks/long/cancel"), json!({})).await;
    assert_eq!(s, 200);
    assert_eq!(v["status"], "cancelled", "{v}");
    // Cancelling again leaves it as it is.
    let (s, v) = post(&format!("{base}/tasks/long/cancel"), json!({})).await;
    assert_eq!((s, v["status"].as_str()), (200, Some("cancelled")));
    let (s, _) = post(&format!("{base}/tasks/nope/cancel"), json!({})).await;
    assert_eq!(s, 404);
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_cap_is_429_until_a_slot_frees() {
    let n = node();
    let mut opts = options();
    opts.max_concurrent_tasks = 1;
    let srv = serve(&n, opts).await;
    let base = srv.url();
    let (s, _) = post(
        &format!("{base}/tasks"),
        json!({"task_id": "a", "agent_id": "slow", "input": "x"}),
    )
    .await;
    assert_eq!(s, 200);
    let r = http()
        .post(format!("{base}/tasks"))
        .json(&json!({"task_id": "b", "agent_id": "echo", "input": "y"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 429);
    assert_eq!(r.headers()["retry-after"], "1");
    let v: Value = r.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("busy"), "{v}");
    // A2A gets a JSON-RPC error saying the same.
    let (s, v) = rpc(&base, "SendMessage", json!({"message": message("z")})).await;
    assert_eq!(s, 200);
    assert_eq!(v["error"]["code"], -32000);
    assert!(v["error"]["message"].as_str().unwrap().contains("busy"));

    let (_, v) = post(&format!("{base}/tasks/a/cancel"), json!({})).await;
    assert_eq!(v["status"], "cancelled");
    // The slot is released once the cancelled task has ended.
    cadre_testkit::eventually(
        "the freed slot to admit a task",
        std::time::Duration::from_secs(2),
        || async {
            let (s, _) = post(
                &format!("{base}/tasks"),
                json!({"task_id": "b", "agent_id": "echo", "input": "y"}),
            )
            .await;
            s == 200
        },
    )
    .await;
    srv.stop().await.unwrap();
}
