//! The server's guards: bearer auth on every protected route, the body limit, malformed
//! JSON-RPC answered with error objects (never a 500), 500 concurrent sends with none lost,
//! and graceful shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const TOKEN: &str = "tok-9f2c1e77";

/// Every protected route with a body it accepts.
fn routes(base: &str) -> Vec<(reqwest::Method, String, Value)> {
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    vec![
        (reqwest::Method::POST, format!("{base}/"), rpc.clone()),
        (reqwest::Method::POST, format!("{base}/a2a"), rpc),
        (
            reqwest::Method::POST,
            format!("{base}/tasks"),
            json!({"task_id": "t1", "input": "hi"}),
        ),
        (
            reqwest::Method::GET,
            format!("{base}/tasks/t1"),
            Value::Null,
        ),
        (
            reqwest::Method::GET,
            format!("{base}/tasks/t1/wait?timeout_seconds=1"),
            Value::Null,
        ),
        (
            reqwest::Method::POST,
            format!("{base}/tasks/t1/cancel"),
            Value::Null,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_but_the_card_needs_the_token() {
    let n = node();
    let mut opts = options();
    opts.token = Some(TOKEN.into());
    let srv = serve(&n, opts).await;
    let c = http();
    for (method, url, body) in routes(&srv.url()) {
        for token in [
            None,
            Some("wrong"),
            Some("tok-9f2c1e7"),
            Some("tok-9f2c1e777"),
        ] {
            let mut rb = c.request(method.clone(), &url);
            if !body.is_null() {
                rb = rb.json(&body);
            }
            if let Some(t) = token {
                rb = rb.bearer_auth(t);
            }
            let r = rb.send().await.unwrap();
            assert_eq!(r.status().as_u16(), 401, "{method} {url} with {token:?}");
            assert!(
                r.headers()["www-authenticate"]
                    .to_str()
                    .unwrap()
                    .starts_with("Bearer")
            );
        }
        let mut rb = c.request(method.clone(), &url).bearer_auth(TOKEN);
        if !body.is_null() {
            rb = rb.json(&body);
        }
        let status = rb.send().await.unwrap().status().as_u16();
        assert_ne!(status, 401, "{method} {url} with the token");
        assert!(status < 500, "{method} {url}: {status}");
    }
    let card = c
        .get(format!("{}/.well-known/agent-card.json", srv.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(card.status().as_u16(), 200);
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_get_413() {
    let n = node();
    let mut opts = options();
    opts.max_body_bytes = 2048;
    let srv = serve(&n, opts).await;
    let big = "x".repeat(4096);
    for path in ["/", "/a2a", "/tasks"] {
        let r = http()
            .post(format!("{}{path}", srv.url()))
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": message(&big)}, "input": big}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 413, "{path}");
    }
    // A chunked body (no Content-Length) is cut off at the limit too.
    let chunks =
        futures::stream::iter((0..8).map(|_| Ok::<_, std::io::Error>(bytes_of(&"y".repeat(512)))));
    let r = http()
        .post(format!("{}/", srv.url()))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    assert_eq!(task_count(&n, &srv).await, 0);
    srv.stop().await.unwrap();
}

fn bytes_of(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_rpc_gets_error_objects_with_http_200() {
    let n = node();
    let srv = serve(&n, options()).await;
    let cases: Vec<(&str, i64)> = vec![
        ("{not json", -32700),
        ("", -32700),
        ("[]", -32600),
        (
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\"}]",
            -32600,
        ),
        ("\"text\"", -32600),
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"x"}}"#,
            -32600,
        ),
        (r#"{"id":1,"method":"GetTask"}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":1}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":[1],"method":"GetTask"}"#, -32600),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"NoSuchMethod"}"#,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/explode"}"#,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":7}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":"x"}}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{}}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"parts":[{"kind":"file","file":{}}]}}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageToken":"zz"}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"task_none"}}"#,
            -32001,
        ),
    ];
    let c = http();
    for (body, code) in cases {
        let r = c
            .post(format!("{}/", srv.url()))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{body}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["jsonrpc"], "2.0", "{body}");
        assert_eq!(v["error"]["code"], code, "{body} -> {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        assert!(v.get("result").is_none());
    }
    assert_eq!(task_count(&n, &srv).await, 0);
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_concurrent_sends_all_complete() {
    let n = node();
    let mut opts = options();
    opts.max_concurrent_tasks = 1000;
    let srv = serve(&n, opts).await;
    let url = srv.url();
    let c = http();
    let started = Instant::now();
    let calls = (0..500).map(|i| {
        let c = c.clone();
        let url = url.clone();
        async move {
            rpc_with(
                &c,
                &url,
                None,
                "SendMessage",
                json!({"message": message(&format!("n{i}"))}),
            )
            .await
        }
    });
    let results = futures::future::join_all(calls).await;
    let mut completed = 0;
    for (i, (status, v)) in results.iter().enumerate() {
        assert_eq!(*status, 200);
        let t = &v["result"]["task"];
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
        assert_eq!(t["artifacts"][0]["parts"][0]["text"], format!("echo: n{i}"));
        completed += 1;
    }
    assert_eq!(completed, 500);
    let (_, v) = rpc(
        &url,
        "ListTasks",
        json!({"status": "TASK_STATE_COMPLETED", "pageSize": 1}),
    )
    .await;
    assert_eq!(v["result"]["totalSize"], 500);
    assert_eq!(task_count(&n, &srv).await, 500);
    assert!(started.elapsed() < Duration::from_secs(60));
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_tasks_finish_then_cancels_the_rest() {
    let n = node();
    let mut opts = options();
    opts.grace = Duration::from_millis(800);
    let srv = serve(&n, opts).await;
    let url = srv.url();
    let (_, v) = rpc(
        &url,
        "SendMessage",
        json!({"message": {"messageId": "mz", "parts": [{"text": "zz"}],
        "metadata": {"agent": "slow"}}, "configuration": {"returnImmediately": true}}),
    )
    .await;
    let slow = v["result"]["task"]["id"].as_str().unwrap().to_string();
    // A blocking caller is waiting on the slow task when the signal comes.
    let waiter = tokio::spawn({
        let url = url.clone();
        async move {
            let mut m = message("later");
            m["metadata"] = json!({"agent": "slow"});
            rpc(&url, "SendMessage", json!({"message": m})).await
        }
    });
    let rt = n.harness.runtime().clone();
    assert!(eventually_async(5, || async { rt.tasks_of(&srv.session).await.len() == 2 }).await);
    let t0 = Instant::now();
    srv.stop().await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let snap = rt.task_record(&slow).await.unwrap();
    assert_eq!(snap.status, cadre_subagents::TaskStatus::Cancelled);
    let (status, v) = waiter.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_CANCELED",
        "{v}"
    );
    // Nothing is accepted any more.
    assert!(
        http()
            .get(format!("{url}/.well-known/agent-card.json"))
            .send()
            .await
            .is_err()
    );
}
