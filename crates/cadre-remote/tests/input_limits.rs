//! Task inputs are bounded in size (413 on the task protocol, an "invalid params" error on
//! A2A, nothing started), and the inputs the server remembers are bounded in bytes, not only
//! in count: past the budget the oldest finished tasks are forgotten.
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
async fn remembered_input_bytes_are_bounded() {
    let n = node();
    let mut opts = options();
    opts.max_remembered_input_bytes = 100_000;
    let srv = serve(&n, opts).await;
    let base = srv.url();
    let input = "z".repeat(10_000);
    for i in 0..60 {
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
    let status = |i: usize| {
        let url = format!("{base}/tasks/job-{i}");
        async move { http().get(url).send().await.unwrap().status().as_u16() }
    };
    // About ten 10 kB inputs fit in 100 kB: the oldest are forgotten, the newest kept.
    let kept: Vec<usize> = {
        let mut kept = Vec::new();
        for i in 0..60 {
            if status(i).await == 200 {
                kept.push(i);
            }
        }
        kept
    };
    assert!(kept.len() >= 5 && kept.len() <= 10, "kept {kept:?}");
    assert_eq!(kept, ((60 - kept.len())..60).collect::<Vec<_>>());
    srv.stop().await.unwrap();
}
