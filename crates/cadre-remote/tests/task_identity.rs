//! A2A task identity: a message with a `taskId` continues that task (same id, its history
//! kept), an unknown one is TaskNotFound, an ended one UnsupportedOperation, a `contextId`
//! that is not the task's is refused; and `SubscribeToTask` / `tasks/resubscribe` streams a
//! running task from now on to its end, to any number of subscribers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;

fn on_task(text: &str, task_id: &str) -> Value {
    let mut m = message(text);
    m["taskId"] = json!(task_id);
    m
}

async fn start_slow(url: &str) -> Value {
    let mut m = message("take your time");
    m["metadata"] = json!({"agent": "slow"});
    let (_, v) = rpc(
        url,
        "SendMessage",
        json!({"message": m, "configuration": {"returnImmediately": true}}),
    )
    .await;
    v["result"]["task"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_with_the_task_id_continues_the_same_task() {
    let n = node();
    let srv = serve(&n, options()).await;
    let url = srv.url();
    let task = start_slow(&url).await;
    let id = task["id"].as_str().unwrap();
    let ctx = task["contextId"].as_str().unwrap();

    // Only the taskId: the context is the task's.
    let (_, v) = rpc(
        &url,
        "SendMessage",
        json!({"message": on_task("and then?", id), "configuration": {"returnImmediately": true}}),
    )
    .await;
    let t = &v["result"]["task"];
    assert_eq!(t["id"], id, "the same task: {v}");
    assert_eq!(t["contextId"], ctx);
    assert_eq!(t["status"]["state"], "TASK_STATE_WORKING");
    let texts: Vec<&str> = t["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["parts"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["take your time", "and then?"], "{t}");
    // The task's own contextId is accepted too; it is still one task.
    let mut m = on_task("more", id);
    m["contextId"] = json!(ctx);
    let (_, v) = rpc(
        &url,
        "SendMessage",
        json!({"message": m, "configuration": {"returnImmediately": true}}),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], id, "{v}");
    let (_, v) = rpc(&url, "ListTasks", json!({"contextId": ctx})).await;
    assert_eq!(v["result"]["tasks"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(task_count(&n, &srv).await, 3, "three turns on the runtime");

    // Cancelling the task stops every turn.
    let (_, v) = rpc(&url, "CancelTask", json!({"id": id})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
    let rt = n.harness.runtime();
    assert!(
        eventually_async(10, || async {
            rt.tasks_of(&srv.session)
                .await
                .iter()
                .all(|t| t.status.is_terminal())
        })
        .await
    );
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ended_and_mismatched_tasks_are_refused() {
    let n = node();
    let srv = serve(&n, options()).await;
    let url = srv.url();
    let (_, v) = rpc(&url, "SendMessage", json!({"message": message("hi")})).await;
    let done = v["result"]["task"].clone();
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    let id = done["id"].as_str().unwrap();
    let before = task_count(&n, &srv).await;

    for method in ["SendMessage", "SendStreamingMessage"] {
        let (_, v) = rpc(
            &url,
            method,
            json!({"message": on_task("x", "task_nonexistent")}),
        )
        .await;
        assert_eq!(v["error"]["code"], -32001, "{method}: {v}");
        let (_, v) = rpc(&url, method, json!({"message": on_task("again", id)})).await;
        assert_eq!(v["error"]["code"], -32004, "{method}: {v}");
        assert_eq!(v["error"]["data"][0]["reason"], "UNSUPPORTED_OPERATION");
        let mut m = on_task("elsewhere", id);
        m["contextId"] = json!("some-other-context");
        let (_, v) = rpc(&url, method, json!({"message": m})).await;
        assert_eq!(v["error"]["code"], -32602, "{method}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("some-other-context")
        );
    }
    // v0.3 the same.
    let v03 = json!({"message": {"kind": "message", "messageId": "m", "role": "user",
        "taskId": "task_nonexistent", "parts": [{"kind": "text", "text": "x"}]}});
    let (_, v) = rpc(&url, "message/send", v03).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    assert_eq!(task_count(&n, &srv).await, before, "nothing started");

    // Only a contextId: a new task in that conversation, with its history.
    let mut m = message("two");
    m["contextId"] = done["contextId"].clone();
    let (_, v) = rpc(&url, "SendMessage", json!({"message": m})).await;
    let t = &v["result"]["task"];
    assert_ne!(t["id"], id);
    assert_eq!(t["artifacts"][0]["parts"][0]["text"], "again: two", "{v}");
    srv.stop().await.unwrap();
}

/// Open a subscription; the response must be a stream.
async fn subscribe(url: &str, method: &str, id: &str) -> impl futures::Stream<Item = Value> {
    let mut rb = http()
        .post(format!("{url}/"))
        .json(&json!({"jsonrpc": "2.0", "id": "sub", "method": method, "params": {"id": id}}));
    if !method.contains('/') {
        rb = rb.header("A2A-Version", "1.0");
    }
    let resp = rb.send().await.unwrap();
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .contains("text/event-stream"),
        "{method}: {:?}",
        resp.headers()
    );
    resp.bytes_stream()
        .eventsource()
        .map(|ev| serde_json::from_str::<Value>(&ev.unwrap().data).unwrap())
}

/// The next event, within 10 s.
async fn next(s: &mut (impl futures::Stream<Item = Value> + Unpin)) -> Option<Value> {
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("an event in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_follow_a_running_task_to_its_end() {
    let n = node();
    let srv = serve(&n, options()).await;
    let url = srv.url();
    let task = start_slow(&url).await;
    let id = task["id"].as_str().unwrap().to_string();

    let mut a = Box::pin(subscribe(&url, "SubscribeToTask", &id).await);
    let mut b = Box::pin(subscribe(&url, "SubscribeToTask", &id).await);
    let mut old = Box::pin(subscribe(&url, "tasks/resubscribe", &id).await);
    let first_a = next(&mut a).await.unwrap();
    let first_b = next(&mut b).await.unwrap();
    assert_eq!(first_a["id"], "sub");
    assert_eq!(first_a["result"]["task"]["id"], id.as_str(), "{first_a}");
    assert_eq!(
        first_a["result"], first_b["result"],
        "both see the same snapshot"
    );
    let first_old = next(&mut old).await.unwrap();
    assert_eq!(first_old["result"]["kind"], "task", "{first_old}");

    // The task ends: every stream says so and closes.
    let (_, v) = rpc(&url, "CancelTask", json!({"id": id})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
    let mut rest_a = Vec::new();
    while let Some(ev) = next(&mut a).await {
        rest_a.push(ev["result"].clone());
    }
    let mut rest_b = Vec::new();
    while let Some(ev) = next(&mut b).await {
        rest_b.push(ev["result"].clone());
    }
    let last = rest_a.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_CANCELED",
        "{rest_a:?}"
    );
    assert_eq!(rest_a, rest_b, "the same events in the same order");
    let mut last_old = Value::Null;
    while let Some(ev) = next(&mut old).await {
        last_old = ev["result"].clone();
    }
    assert_eq!(last_old["status"]["state"], "canceled", "{last_old}");
    assert_eq!(last_old["final"], true);

    // An ended task cannot be subscribed to; an unknown one is not found.
    let (_, v) = rpc(&url, "SubscribeToTask", json!({"id": id})).await;
    assert_eq!(v["error"]["code"], -32004, "{v}");
    let (_, v) = rpc(&url, "SubscribeToTask", json!({"id": "task_nope"})).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    let (_, v) = rpc(&url, "tasks/resubscribe", json!({"id": "task_nope"})).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    srv.stop().await.unwrap();
}
