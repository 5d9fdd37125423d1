//! What the A2A conformance suite (TCK) checks of the JSON-RPC binding, apart from task
//! identity and input-required: version negotiation by `A2A-Version`, `google.rpc.ErrorInfo`
//! in every error, the A2A error codes, input checks, ListTasks filters and paging, camelCase
//! on the wire, and the agent card in both shapes with its caching headers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

/// A JSON-RPC call with exactly these headers (no `A2A-Version` unless given).
async fn call(url: &str, version: Option<&str>, method: &str, params: Value) -> Value {
    let mut rb = http().post(format!("{url}/")).json(&json!({
        "jsonrpc": "2.0", "id": 7, "method": method, "params": params,
    }));
    if let Some(v) = version {
        rb = rb.header("A2A-Version", v);
    }
    let r = rb.send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json().await.unwrap()
}

fn error_info(v: &Value) -> &Value {
    let data = v["error"]["data"]
        .as_array()
        .expect("error.data is an array");
    let info = data
        .iter()
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo")
        .expect("an ErrorInfo");
    assert_eq!(info["domain"], "a2a-protocol.org");
    info
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_header_decides_the_shapes_and_unknown_versions_are_refused() {
    let n = node();
    let srv = serve(&n, options()).await;
    let url = srv.url();
    let send = || json!({"message": message("hi")});

    let v = call(&url, Some("99.0"), "SendMessage", send()).await;
    assert_eq!(v["error"]["code"], -32009, "{v}");
    let info = error_info(&v);
    assert_eq!(info["reason"], "VERSION_NOT_SUPPORTED");
    assert_eq!(info["metadata"]["supportedVersions"], "1.0,0.3");
    assert_eq!(info["metadata"]["requestedVersion"], "99.0");
    assert_eq!(task_count(&n, &srv).await, 0, "nothing started");

    // No header: v0.3, even under the v1.0 method name.
    let v = call(&url, None, "SendMessage", send()).await;
    assert_eq!(v["result"]["kind"], "task", "{v}");
    assert_eq!(v["result"]["status"]["state"], "completed");
    // 1.0 (any patch): v1.0, even under the v0.3 method name.
    let v = call(&url, Some("1.0.3"), "message/send", send()).await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    let v = call(&url, Some("0.3"), "SendMessage", send()).await;
    assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
    // The query parameter names the version too.
    let r: Value = http()
        .post(format!("{url}/?A2A-Version=1.0"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send()}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        r["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_carries_error_info_and_the_a2a_codes() {
    let n = node();
    let srv = serve(&n, options()).await;
    let url = srv.url();
    let v = call(&url, Some("1.0"), "GetTask", json!({"id": "task_nope"})).await;
    assert_eq!(v["error"]["code"], -32001);
    let info = error_info(&v);
    assert_eq!(info["reason"], "TASK_NOT_FOUND");
    assert_eq!(info["metadata"]["taskId"], "task_nope");

    for (method, params) in [
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t", "url": "https://example.com"}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": "t", "id": "c"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": "t"})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": "t", "id": "c"}),
        ),
        ("tasks/pushNotificationConfig/set", json!({"taskId": "t"})),
    ] {
        let v = call(&url, Some("1.0"), method, params).await;
        assert_eq!(v["error"]["code"], -32003, "{method}: {v}");
        assert_eq!(error_info(&v)["reason"], "PUSH_NOTIFICATION_NOT_SUPPORTED");
    }
    let v = call(&url, Some("1.0"), "GetExtendedAgentCard", json!({})).await;
    assert_eq!(v["error"]["code"], -32007, "{v}");
    let v = call(&url, Some("1.0"), "NoSuchMethod", json!({})).await;
    assert_eq!(v["error"]["code"], -32601);
    assert_eq!(error_info(&v)["reason"], "METHOD_NOT_FOUND");
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_are_checked_before_anything_starts() {
    let n = node();
    let srv = serve(&n, options()).await;
    let url = srv.url();
    let cases = [
        (
            json!({"message": {"role": "ROLE_USER", "parts": [{"text": "no id"}]}}),
            -32602,
            "messageId",
        ),
        (
            json!({"message": message("x"), "configuration": {"historyLength": -1}}),
            -32602,
            "negative",
        ),
        (
            json!({"message": {"messageId": "m", "role": "ROLE_USER",
                "parts": [{"raw": "dGNr", "mediaType": "application/x-unsupported-tck-type"}]}}),
            -32005,
            "application/x-unsupported-tck-type",
        ),
        (
            json!({"message": {"messageId": "m", "role": "ROLE_USER",
                "parts": [{"url": "https://x/cat.png", "mediaType": "image/png"}]}}),
            -32005,
            "image/png",
        ),
    ];
    for (params, code, says) in cases {
        for method in ["SendMessage", "SendStreamingMessage"] {
            let v = call(&url, Some("1.0"), method, params.clone()).await;
            assert_eq!(v["error"]["code"], code, "{method} {params}: {v}");
            let msg = v["error"]["message"].as_str().unwrap();
            assert!(msg.contains(says), "{msg}");
            error_info(&v);
        }
    }
    assert_eq!(task_count(&n, &srv).await, 0, "nothing started");
    let v = call(
        &url,
        Some("1.0"),
        "GetTask",
        json!({"id": "x", "historyLength": -2}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    srv.stop().await.unwrap();
}

async fn send_in(url: &str, context: &str, text: &str) -> Value {
    let mut m = message(text);
    m["contextId"] = json!(context);
    let v = call(url, Some("1.0"), "SendMessage", json!({"message": m})).await;
    v["result"]["task"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_tasks_validates_filters_pages_newest_change_first() {
    let n = node();
    let srv = serve(&n, options()).await;
    let url = srv.url();
    let first = send_in(&url, "ctx-a", "one").await;
    let second = send_in(&url, "ctx-a", "two").await;
    send_in(&url, "ctx-b", "other").await;

    for bad in [
        json!({"status": "TASK_STATE_NAPPING"}),
        json!({"status": 3}),
        json!({"pageSize": 0}),
        json!({"pageSize": 101}),
        json!({"pageSize": -5}),
        json!({"historyLength": -1}),
        json!({"statusTimestampAfter": "last tuesday"}),
    ] {
        let v = call(&url, Some("1.0"), "ListTasks", bad.clone()).await;
        assert_eq!(v["error"]["code"], -32602, "{bad}: {v}");
        assert_eq!(error_info(&v)["reason"], "INVALID_PARAMS");
    }

    // The protobuf JSON mapping allows snake_case names too.
    for params in [
        json!({"contextId": "ctx-a", "pageSize": 100}),
        json!({"context_id": "ctx-a", "page_size": 100}),
    ] {
        let v = call(&url, Some("1.0"), "ListTasks", params).await;
        let ids: Vec<&str> = v["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            [
                second["id"].as_str().unwrap(),
                first["id"].as_str().unwrap()
            ],
            "most recently changed first"
        );
        assert_eq!(v["result"]["nextPageToken"], "");
    }
    let v = call(
        &url,
        Some("1.0"),
        "ListTasks",
        json!({"status": "TASK_STATE_COMPLETED", "pageSize": 1}),
    )
    .await;
    assert_eq!(v["result"]["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(v["result"]["totalSize"], 3);
    assert_eq!(v["result"]["nextPageToken"], "1");

    // statusTimestampAfter keeps the tasks changed at or after the instant.
    let at = second["status"]["timestamp"].as_str().unwrap();
    let v = call(
        &url,
        Some("1.0"),
        "ListTasks",
        json!({"contextId": "ctx-a", "statusTimestampAfter": at}),
    )
    .await;
    let ids: Vec<&str> = v["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&second["id"].as_str().unwrap()), "{v}");
    let v = call(
        &url,
        Some("1.0"),
        "ListTasks",
        json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(v["result"]["tasks"], json!([]));
    srv.stop().await.unwrap();
}

fn keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                out.push(k.clone());
                keys(v, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_on_the_wire_are_camel_case() {
    let n = node();
    let srv = serve(&n, options()).await;
    let t = send_in(&srv.url(), "ctx", "hi").await;
    let mut all = Vec::new();
    keys(&t, &mut all);
    let snake: Vec<&String> = all.iter().filter(|k| k.contains('_')).collect();
    assert!(snake.is_empty(), "snake_case keys: {snake:?} in {t}");
    assert!(t["metadata"]["usage"]["inputTokens"].is_u64(), "{t}");
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_has_a_v1_and_a_v03_shape_and_caching_headers() {
    let n = node();
    let mut opts = options();
    opts.token = Some("tok".into());
    let srv = serve(&n, opts).await;
    let card_url = format!("{}/.well-known/agent-card.json", srv.url());
    let r = http().get(&card_url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let h = r.headers().clone();
    let cache = h["cache-control"].to_str().unwrap();
    assert!(cache.contains("max-age="), "{cache}");
    let etag = h["etag"].to_str().unwrap().to_string();
    assert!(etag.starts_with('"'), "{etag}");
    assert!(h["last-modified"].to_str().unwrap().ends_with("GMT"));
    let card: Value = r.json().await.unwrap();
    for old in ["url", "preferredTransport", "protocolVersion", "security"] {
        assert!(card.get(old).is_none(), "{old} in the v1.0 card");
    }
    assert_eq!(
        card["securitySchemes"]["bearer"],
        json!({"httpAuthSecurityScheme": {"scheme": "Bearer"}})
    );

    // A client with the cached copy gets 304.
    let r = http()
        .get(&card_url)
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 304);

    // The old shape for v0.3 clients, by query parameter or header.
    for rb in [
        http().get(format!("{card_url}?A2A-Version=0.3")),
        http().get(&card_url).header("A2A-Version", "0.3"),
    ] {
        let r = rb.send().await.unwrap();
        assert_ne!(r.headers()["etag"].to_str().unwrap(), etag);
        let old: Value = r.json().await.unwrap();
        assert_eq!(old["url"], format!("{}/", srv.url()), "{old}");
        assert_eq!(old["protocolVersion"], "0.3.0");
        assert_eq!(old["preferredTransport"], "JSONRPC");
        assert_eq!(old["securitySchemes"]["bearer"]["scheme"], "bearer");
        assert_eq!(old["security"], json!([{"bearer": []}]));
        assert!(old.get("supportedInterfaces").is_none());
    }
    srv.stop().await.unwrap();
}
