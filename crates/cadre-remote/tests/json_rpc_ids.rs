//! JSON-RPC ids and notifications: an id comes back exactly as written (a 36-digit number
//! keeps its digits, in results, errors and every streamed event), and a request without an
//! id — a notification — is carried out but never answered, not even with an error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

const BIG_ID: &str = "123456789012345678901234567890123456";

/// POST a raw JSON-RPC body; returns the status and the body text.
async fn post(url: &str, body: String) -> (u16, String) {
    let r = http()
        .post(format!("{url}/"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_36_digit_id_round_trips_exactly() {
    let n = node();
    let srv = serve(&n, options()).await;
    let msg = message("hi");
    let want = format!(r#""id":{BIG_ID},"#);
    for (method, params) in [
        ("SendMessage", json!({"message": msg})),
        ("ListTasks", json!({})),
        ("GetTask", json!({"id": "task_none"})),
        ("NoSuchMethod", json!({})),
    ] {
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":{BIG_ID},"method":"{method}","params":{params}}}"#);
        let (status, text) = post(&srv.url(), body).await;
        assert_eq!(status, 200, "{method}: {text}");
        assert!(text.contains(&want), "{method}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(
            v.get("result").is_some() || v.get("error").is_some(),
            "{text}"
        );
    }
    // A string id with escapes comes back as written too.
    let (_, text) = post(
        &srv.url(),
        r#"{"jsonrpc":"2.0","id":"a\u00e9\"b","method":"ListTasks"}"#.into(),
    )
    .await;
    assert!(text.contains(r#""id":"a\u00e9\"b""#), "{text}");
    // Every event of a stream carries it.
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{BIG_ID},"method":"SendStreamingMessage","params":{}}}"#,
        json!({"message": message("streamed")})
    );
    let r = http()
        .post(format!("{}/", srv.url()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let mut events = r.bytes_stream().eventsource();
    let mut seen = 0;
    while let Some(ev) = events.next().await {
        let ev = ev.unwrap();
        assert!(ev.data.contains(&want), "{}", ev.data);
        seen += 1;
    }
    assert!(seen >= 2, "{seen} events");
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_is_carried_out_but_not_answered() {
    let n = node();
    let srv = serve(&n, options()).await;
    let send = json!({"jsonrpc": "2.0", "method": "SendMessage",
        "params": {"message": message("fire and forget")}});
    let (status, text) = post(&srv.url(), send.to_string()).await;
    assert_eq!(status, 204);
    assert_eq!(text, "", "no response body");
    let rt = n.harness.runtime().clone();
    let session = srv.session.clone();
    assert!(
        eventually_async(10, || async {
            let tasks = rt.tasks_of(&session).await;
            tasks.len() == 1 && tasks[0].result.as_deref() == Some("echo: fire and forget")
        })
        .await,
        "the notification's task ran"
    );
    // Not answered even on error.
    for bad in [
        json!({"jsonrpc": "2.0", "method": "NoSuchMethod"}),
        json!({"jsonrpc": "1.0", "method": "ListTasks"}),
        json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "task_none"}}),
        json!({"jsonrpc": "2.0", "method": "GetTask", "params": [1]}),
        json!({"jsonrpc": "2.0", "method": "SendStreamingMessage", "params": {}}),
    ] {
        let (status, text) = post(&srv.url(), bad.to_string()).await;
        assert_eq!((status, text.as_str()), (204, ""), "{bad}");
    }
    // `"id": null` is a request, answered with null.
    let (status, text) = post(
        &srv.url(),
        r#"{"jsonrpc":"2.0","id":null,"method":"ListTasks"}"#.into(),
    )
    .await;
    assert_eq!(status, 200);
    assert!(text.contains(r#""id":null"#), "{text}");
    srv.stop().await.unwrap();
}
