//! The A2A JSON-RPC endpoint: the card, blocking and non-blocking sends in v1.0 and v0.3
//! shapes, streaming, conversations continued by `contextId`, `GetTask`, `CancelTask` and
//! `ListTasks`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_describes_the_agents_and_the_endpoint() {
    let n = node();
    let mut opts = options();
    opts.token = Some("card-token".into());
    let srv = serve(&n, opts).await;
    let r = http()
        .get(format!("{}/.well-known/agent-card.json", srv.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "the card is public");
    let card: Value = r.json().await.unwrap();
    let iface = &card["supportedInterfaces"][0];
    assert_eq!(iface["protocolBinding"], "JSONRPC");
    assert_eq!(iface["protocolVersion"], "1.0");
    assert_eq!(iface["url"], format!("{}/", srv.url()));
    assert_eq!(card["supportedInterfaces"][1]["protocolVersion"], "0.3.0");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(
        card["defaultInputModes"],
        json!(["text/plain", "application/json"])
    );
    assert_eq!(card["defaultOutputModes"], json!(["text/plain"]));
    let ids: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    for a in ["echo", "chatty", "slow", "general-purpose"] {
        assert!(ids.contains(&a), "{ids:?}");
    }
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert!(card["securityRequirements"][0]["schemes"]["bearer"].is_object());
    assert!(!card.to_string().contains("card-token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_send_answers_in_the_callers_version() {
    let n = node();
    let srv = serve(&n, options()).await;
    let (s, v) = rpc(
        &srv.url(),
        "SendMessage",
        json!({"message": message("hello")}),
    )
    .await;
    assert_eq!(s, 200);
    let t = &v["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    assert_eq!(t["artifacts"][0]["parts"][0]["text"], "echo: hello");
    assert_eq!(t["history"][0]["role"], "ROLE_USER");
    assert_eq!(t["metadata"]["agent"], "echo");
    assert!(t["id"].as_str().unwrap().starts_with("task_"));
    // The task is an ordinary task of the runtime.
    let snap = n
        .harness
        .runtime()
        .task_record(t["id"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(snap.result.as_deref(), Some("echo: hello"));

    let v03 = json!({"message": {"kind": "message", "messageId": "m1", "role": "user",
        "parts": [{"kind": "text", "text": "old"}], "metadata": {"agent": "chatty"}}});
    let (_, v) = rpc(&srv.url(), "message/send", v03).await;
    let t = &v["result"];
    assert_eq!(t["kind"], "task", "{v}");
    assert_eq!(t["status"]["state"], "completed");
    assert_eq!(t["artifacts"][0]["parts"][0]["kind"], "text");
    assert_eq!(t["artifacts"][0]["parts"][0]["text"], "The answer is 42.");
    assert_eq!(t["history"][0]["role"], "user");

    let (_, v) = rpc(
        &srv.url(),
        "SendMessage",
        json!({"message": {"messageId": "m9", "parts": [{"text": "x"}], "metadata": {"skillId": "ghost"}}}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32602);
    assert!(v["error"]["message"].as_str().unwrap().contains("ghost"));
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_blocking_send_then_get_list_and_cancel() {
    let n = node();
    let srv = serve(&n, options()).await;
    let url = srv.url();
    let params = json!({"message": {"messageId": "m1", "parts": [{"text": "wait"}], "metadata": {"agent": "slow"}},
        "configuration": {"returnImmediately": true}});
    let (_, v) = rpc(&url, "SendMessage", params).await;
    let slow = v["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(v["result"]["task"]["status"]["state"], "TASK_STATE_WORKING");
    let (_, v) = rpc(
        &url,
        "message/send",
        json!({"message": {"messageId": "m2", "parts": [{"kind": "text", "text": "q"}]},
        "configuration": {"blocking": false}}),
    )
    .await;
    let quick = v["result"]["id"].as_str().unwrap().to_string();
    // The echo may already be done by the time the answer is written.
    let state = v["result"]["status"]["state"].as_str().unwrap();
    assert!(["working", "completed"].contains(&state), "{v}");

    let v = cadre_testkit::eventually_some(
        "the quick echo to complete",
        std::time::Duration::from_secs(4),
        || async {
            let (_, v) = rpc(&url, "GetTask", json!({"id": quick})).await;
            (v["result"]["status"]["state"] == "TASK_STATE_COMPLETED").then_some(v)
        },
    )
    .await;
    assert_eq!(v["result"]["artifacts"][0]["parts"][0]["text"], "echo: q");

    let (_, v) = rpc(&url, "ListTasks", json!({})).await;
    assert_eq!(v["result"]["totalSize"], 2, "{v}");
    let (_, v) = rpc(&url, "ListTasks", json!({"status": "TASK_STATE_COMPLETED"})).await;
    assert_eq!(v["result"]["totalSize"], 1);
    assert_eq!(v["result"]["tasks"][0]["id"], quick);
    let (_, v) = rpc(&url, "ListTasks", json!({"pageSize": 1})).await;
    assert_eq!(v["result"]["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(v["result"]["nextPageToken"], "1");
    let (_, v) = rpc(&url, "tasks/list", json!({"pageToken": "1"})).await;
    assert_eq!(v["result"]["tasks"][0]["kind"], "task");

    let (_, v) = rpc(&url, "CancelTask", json!({"id": slow})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
    let (_, v) = rpc(&url, "tasks/cancel", json!({"id": slow})).await;
    assert_eq!(v["error"]["code"], -32002, "already terminal: {v}");
    let (_, v) = rpc(&url, "GetTask", json!({"id": "task_nope"})).await;
    assert_eq!(v["error"]["code"], -32001);
    let (_, v) = rpc(&url, "tasks/get", json!({"id": quick, "historyLength": 0})).await;
    assert!(v["result"].get("history").is_none());
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_id_continues_the_same_child() {
    let n = node();
    let srv = serve(&n, options()).await;
    let (_, v) = rpc(
        &srv.url(),
        "SendMessage",
        json!({"message": message("one")}),
    )
    .await;
    let ctx = v["result"]["task"]["contextId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut m = message("two");
    m["contextId"] = json!(ctx);
    let (_, v) = rpc(&srv.url(), "SendMessage", json!({"message": m})).await;
    let t = &v["result"]["task"];
    assert_eq!(t["contextId"], ctx.as_str());
    // The second scripted turn plays: the child kept its history.
    assert_eq!(t["artifacts"][0]["parts"][0]["text"], "again: two", "{v}");
    // A message naming the ended task is refused (it would continue that task, which
    // takes no more messages); the context continues in a new task.
    let mut m = message("three");
    m["taskId"] = t["id"].clone();
    let (_, v) = rpc(&srv.url(), "SendMessage", json!({"message": m})).await;
    assert_eq!(v["error"]["code"], -32004, "{v}");
    let mut m = message("three");
    m["contextId"] = json!(ctx);
    let (_, v) = rpc(&srv.url(), "SendMessage", json!({"message": m})).await;
    assert_eq!(
        v["result"]["task"]["artifacts"][0]["parts"][0]["text"],
        "third: three"
    );
    // A client-chosen context id opens a new conversation under that id.
    let mut m = message("fresh");
    m["contextId"] = json!("my-own-context");
    let (_, v) = rpc(&srv.url(), "SendMessage", json!({"message": m})).await;
    assert_eq!(v["result"]["task"]["contextId"], "my-own-context");
    assert_eq!(
        v["result"]["task"]["artifacts"][0]["parts"][0]["text"],
        "echo: fresh"
    );
    srv.stop().await.unwrap();
}

async fn stream_events(url: &str, method: &str, params: Value) -> Vec<Value> {
    let mut rb = http()
        .post(format!("{url}/"))
        .json(&json!({"jsonrpc": "2.0", "id": "s", "method": method, "params": params}));
    if !method.contains('/') {
        rb = rb.header("A2A-Version", "1.0");
    }
    let resp = rb.send().await.unwrap();
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .contains("text/event-stream")
    );
    let mut out = Vec::new();
    let mut es = resp.bytes_stream().eventsource();
    while let Some(ev) = tokio::time::timeout(std::time::Duration::from_secs(10), es.next())
        .await
        .unwrap()
    {
        let v: Value = serde_json::from_str(&ev.unwrap().data).unwrap();
        assert_eq!(v["id"], "s");
        out.push(v["result"].clone());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_sends_a_snapshot_then_updates_and_a_final_status() {
    let n = node();
    let srv = serve(&n, options()).await;
    let mut m = message("go");
    m["metadata"] = json!({"agent": "chatty"});
    let evs = stream_events(&srv.url(), "SendStreamingMessage", json!({"message": m})).await;
    assert!(
        evs[0]["task"]["id"].is_string(),
        "first a task: {:?}",
        evs[0]
    );
    let last = evs.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let notes: Vec<String> = evs
        .iter()
        .filter_map(|e| e["statusUpdate"]["status"]["message"]["parts"][0]["text"].as_str())
        .map(str::to_string)
        .collect();
    assert!(notes.iter().any(|n| n.contains("list_dir")), "{notes:?}");
    // Rebuilding the artifact from the chunks gives the answer.
    let mut answer = String::new();
    for e in evs.iter().filter_map(|e| e.get("artifactUpdate")) {
        let t = e["artifact"]["parts"][0]["text"].as_str().unwrap();
        if e["append"] == true {
            answer.push_str(t);
        } else {
            answer = t.to_string();
        }
    }
    assert_eq!(answer, "The answer is 42.");

    let v03 = json!({"message": {"kind": "message", "messageId": "m", "role": "user",
        "parts": [{"kind": "text", "text": "hey"}]}});
    let evs = stream_events(&srv.url(), "message/stream", v03).await;
    assert_eq!(evs[0]["kind"], "task");
    let last = evs.last().unwrap();
    assert_eq!(last["kind"], "status-update");
    assert_eq!(last["final"], true);
    assert_eq!(last["status"]["state"], "completed");
    assert!(evs.iter().any(|e| {
        e["kind"] == "artifact-update"
            && e["artifact"]["parts"][0]["text"]
                .as_str()
                .unwrap()
                .contains("hey")
    }));
    srv.stop().await.unwrap();
}
