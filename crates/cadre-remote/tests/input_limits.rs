//! Task inputs are bounded in size (413 on the task protocol, an "invalid params" error on
//! A2A, nothing started), and the inputs the server remembers are bounded in bytes, not only
//! in count: past the budget the oldest finished tasks are forgotten by the server's book,
//! and read from the store, which owns them, from then on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

async fn post(url: &str, body: Value) -> (u16, Value) {
    let r = http().post(url).json(&body).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_above_the_limit_are_refused() {
    let n = node();
    let mut opts = options();
    opts.max_input_bytes = 1000;
    let srv = serve(&n, opts).await;
    let big = "x".repeat(1001);
    let (s, v) = post(
        &format!("{}/tasks", srv.url()),
        json!({"task_id": "big", "input": big}),
    )
    .await;
    assert_eq!(s, 413, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("max_input_bytes"),
        "{v}"
    );
    let (s, v) = rpc(&srv.url(), "SendMessage", json!({"message": message(&big)})).await;
    assert_eq!(s, 200);
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert_eq!(task_count(&n, &srv).await, 0);
    // At the limit is fine.
    let (s, v) = post(
        &format!("{}/tasks", srv.url()),
        json!({"task_id": "ok", "input": "y".repeat(1000)}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_the_server_forgot_are_read_from_the_store() {
    let n = node();
    let mut opts = options();
    // About ten 10 kB inputs fit: the book forgets the oldest finished tasks (its count
    // bound, 10 000, takes the same path), but the store still has them.
    opts.max_remembered_input_bytes = 100_000;
    let srv = serve(&n, opts).await;
    let base = srv.url();
    let input = "z".repeat(10_000);
    // An A2A task first, so that it is among the forgotten ones.
    let (s, v) = rpc(&base, "SendMessage", json!({"message": message(&input)})).await;
    assert_eq!(s, 200, "{v}");
    let a2a = v["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    for i in 0..30 {
        let (s, v) = post(
            &format!("{base}/tasks"),
            json!({"task_id": format!("job-{i}"), "input": input}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        // Each finishes before the next is sent, so all but the newest are forgettable.
        let r = http()
            .get(format!("{base}/tasks/job-{i}/wait?timeout_seconds=10"))
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["status"], "success", "{v}");
    }
    for i in 0..30 {
        let r = http()
            .get(format!("{base}/tasks/job-{i}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "job-{i}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            (v["task_id"].as_str(), v["status"].as_str()),
            (Some(&*format!("job-{i}")), Some("success")),
            "{v}"
        );
    }
    // The oldest, surely forgotten, through every reader.
    let r = http()
        .get(format!("{base}/tasks/job-0/wait?timeout_seconds=10"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], "success", "{v}");
    let (_, v) = rpc(&base, "GetTask", json!({"id": a2a})).await;
    assert_eq!(v["result"]["id"], a2a, "{v}");
    assert_eq!(
        v["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    // A forgotten caller id is still taken: submitting it again answers with that task
    // instead of starting another.
    let before = task_count(&n, &srv).await;
    let (s, v) = post(
        &format!("{base}/tasks"),
        json!({"task_id": "job-0", "input": "again"}),
    )
    .await;
    assert_eq!(s, 409, "the id of a finished task: {v}");
    assert_eq!(task_count(&n, &srv).await, before, "{v}");
    srv.stop().await.unwrap();
}
