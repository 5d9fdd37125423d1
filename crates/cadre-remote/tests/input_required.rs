//! `input-required` for approvals: with `approvals = ask`, a served agent whose tool needs
//! approval puts its task in `input-required` with a question naming the agent, the tool and
//! the arguments; the caller's next message on the task answers it (`yes`, `no: …`, or a
//! data part), other messages are kept and the question stays open; no answer in time,
//! cancellation and shutdown deny or withdraw it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_remote::ApprovalPolicy;
use common::*;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;

fn asking() -> cadre_remote::ServeOptions {
    let mut o = options();
    o.approvals = Some(ApprovalPolicy::Ask);
    o
}

fn to(agent: &str, text: &str) -> Value {
    let mut m = message(text);
    m["metadata"] = json!({"agent": agent});
    m
}

fn on_task(id: &str, text: &str) -> Value {
    let mut m = message(text);
    m["taskId"] = json!(id);
    m
}

fn texts(task: &Value) -> Vec<(String, String)> {
    task["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["parts"][0]["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_is_asked_and_an_approval_lets_the_tool_run() {
    let n = node();
    let srv = serve(&n, asking()).await;
    let url = srv.url();
    let ran = n.dir.path().join("ran.txt");

    let (_, v) = rpc(
        &url,
        "SendMessage",
        json!({"message": to("asker", "please run it")}),
    )
    .await;
    let t = &v["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{v}");
    let q = &t["status"]["message"];
    let text = q["parts"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("`asker`") && text.contains("`bash`") && text.contains("echo ran"),
        "{text}"
    );
    assert_eq!(q["parts"][1]["data"]["approval"]["tool"], "bash");
    assert_eq!(
        q["parts"][1]["data"]["approval"]["args"]["command"],
        "echo ran | tee ran.txt"
    );
    assert!(!ran.exists(), "nothing ran before the answer");
    let id = t["id"].as_str().unwrap().to_string();

    // Not an answer: kept in the history, still asked.
    let (_, v) = rpc(
        &url,
        "SendMessage",
        json!({"message": on_task(&id, "what will it do?")}),
    )
    .await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{v}"
    );
    let (_, v) = rpc(&url, "GetTask", json!({"id": id})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let (_, v) = rpc(
        &url,
        "ListTasks",
        json!({"status": "TASK_STATE_INPUT_REQUIRED"}),
    )
    .await;
    assert_eq!(v["result"]["tasks"][0]["id"], id.as_str(), "{v}");

    // The answer: the same task goes on and completes.
    let (_, v) = rpc(&url, "SendMessage", json!({"message": on_task(&id, "yes")})).await;
    let t = &v["result"]["task"];
    assert_eq!(t["id"], id.as_str());
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    assert!(
        t["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("ran"),
        "{t}"
    );
    assert!(ran.exists(), "approved, the command ran");
    let h = texts(t);
    let roles: Vec<&str> = h.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        [
            "ROLE_USER",
            "ROLE_USER",
            "ROLE_AGENT",
            "ROLE_USER",
            "ROLE_AGENT"
        ],
        "{h:?}"
    );
    assert_eq!(h[0].1, "please run it");
    assert_eq!(h[1].1, "what will it do?");
    assert!(h[2].1.contains("`bash`"));
    assert_eq!(h[3].1, "yes");
    assert!(h[4].1.starts_with("done:"));
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_reaches_the_agent_with_its_reason() {
    let n = node();
    let srv = serve(&n, asking()).await;
    let url = srv.url();
    for answer in [
        json!({"messageId": "a1", "role": "ROLE_USER", "parts": [
            {"data": {"approve": false, "feedback": "not on a Friday"}}]}),
        json!({"messageId": "a2", "role": "ROLE_USER", "parts": [{"text": "no: not on a Friday"}]}),
    ] {
        let (_, v) = rpc(&url, "SendMessage", json!({"message": to("asker", "go")})).await;
        let id = v["result"]["task"]["id"].as_str().unwrap().to_string();
        assert_eq!(
            v["result"]["task"]["status"]["state"],
            "TASK_STATE_INPUT_REQUIRED"
        );
        let mut m = answer;
        m["taskId"] = json!(id);
        let (_, v) = rpc(&url, "SendMessage", json!({"message": m})).await;
        let t = &v["result"]["task"];
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
        let out = t["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
        assert!(out.contains("denied by the user: not on a Friday"), "{out}");
    }
    assert!(!n.dir.path().join("ran.txt").exists());
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agents_question_reaches_the_caller_of_the_served_task() {
    let n = node();
    let srv = serve(&n, asking()).await;
    let url = srv.url();
    let (_, v) = rpc(
        &url,
        "SendMessage",
        json!({"message": to("boss", "delegate")}),
    )
    .await;
    let t = &v["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{v}");
    let q = &t["status"]["message"]["parts"][1]["data"]["approval"];
    assert_eq!(q["agent"], "asker", "the asking agent is named: {q}");
    let id = t["id"].as_str().unwrap().to_string();
    let (_, v) = rpc(&url, "SendMessage", json!({"message": on_task(&id, "y")})).await;
    let t = &v["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    assert!(n.dir.path().join("ran.txt").exists());
    srv.stop().await.unwrap();
}

/// The next event of a stream, within 10 s.
async fn next(es: &mut (impl futures::Stream<Item = Value> + Unpin)) -> Option<Value> {
    tokio::time::timeout(Duration::from_secs(10), es.next())
        .await
        .expect("an event in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_shows_the_question_and_goes_on_after_the_answer() {
    let n = node();
    let srv = serve(&n, asking()).await;
    let url = srv.url();
    let resp = http()
        .post(format!("{url}/"))
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": to("asker", "stream it")}}),
        )
        .send()
        .await
        .unwrap();
    let mut es = Box::pin(
        resp.bytes_stream()
            .eventsource()
            .map(|e| serde_json::from_str::<Value>(&e.unwrap().data).unwrap()["result"].clone()),
    );
    let first = next(&mut es).await.unwrap();
    let id = first["task"]["id"].as_str().unwrap().to_string();
    // Up to the question.
    loop {
        let ev = next(&mut es).await.expect("the stream stays open");
        if ev["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" {
            let m = &ev["statusUpdate"]["status"]["message"];
            assert!(m["parts"][0]["text"].as_str().unwrap().contains("`bash`"));
            break;
        }
    }
    let (_, v) = rpc(
        &url,
        "SendMessage",
        json!({"message": on_task(&id, "yes"), "configuration": {"returnImmediately": true}}),
    )
    .await;
    assert!(v["result"]["task"].is_object(), "{v}");
    let mut states = Vec::new();
    while let Some(ev) = next(&mut es).await {
        if let Some(s) = ev["statusUpdate"]["status"]["state"].as_str() {
            states.push(s.to_string());
        }
    }
    assert_eq!(
        states.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED"),
        "{states:?}"
    );
    assert!(
        states.contains(&"TASK_STATE_WORKING".to_string()),
        "{states:?}"
    );
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_in_time_cancel_and_shutdown_end_the_question() {
    let n = node();
    let mut opts = asking();
    opts.approval_timeout = Duration::from_millis(200);
    let srv = serve(&n, opts).await;
    let url = srv.url();
    // No answer: the call is refused and the task goes on without it.
    let (_, v) = rpc(&url, "SendMessage", json!({"message": to("asker", "go")})).await;
    let id = v["result"]["task"]["id"].as_str().unwrap().to_string();
    let rt = n.harness.runtime();
    assert!(
        eventually_async(20, || async {
            rt.task_record(&id)
                .await
                .is_some_and(|s| s.status.is_terminal())
        })
        .await
    );
    let (_, v) = rpc(&url, "GetTask", json!({"id": id})).await;
    let out = v["result"]["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(out.contains("serve.approval_timeout_secs"), "{out}");
    srv.stop().await.unwrap();

    // Cancelled while asking: the question goes with the task.
    let srv = serve(&n, asking()).await;
    let url = srv.url();
    let (_, v) = rpc(&url, "SendMessage", json!({"message": to("asker", "go")})).await;
    let id = v["result"]["task"]["id"].as_str().unwrap().to_string();
    let (_, v) = rpc(&url, "CancelTask", json!({"id": id})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
    assert!(v["result"]["status"].get("message").is_none(), "{v}");

    // Shutdown: open questions are refused, so their tasks end within the grace period.
    let (_, v) = rpc(&url, "SendMessage", json!({"message": to("asker", "go")})).await;
    let id = v["result"]["task"]["id"].as_str().unwrap().to_string();
    srv.stop().await.unwrap();
    let snap = n.harness.runtime().task_record(&id).await.unwrap();
    assert_eq!(
        snap.status,
        cadre_subagents::TaskStatus::Completed,
        "{snap:?}"
    );
    assert!(snap.result.unwrap().contains("shutting down"));
    assert!(!n.dir.path().join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn who_is_asked_depends_on_the_setting_and_the_protocol() {
    let n = node();
    // Without a token nobody is asked by default: the call is refused.
    let srv = serve(&n, options()).await;
    let (_, v) = rpc(
        &srv.url(),
        "SendMessage",
        json!({"message": to("asker", "go")}),
    )
    .await;
    let t = &v["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    let out = t["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(out.contains("serve.approvals = \"deny\""), "{out}");
    srv.stop().await.unwrap();
    // With a token, asking is the default.
    let mut o = options();
    o.token = Some("tok".into());
    let server = cadre_remote::Server::new(
        n.harness.runtime().clone(),
        &n.harness.agent().config().model.spec,
        o,
    )
    .unwrap();
    assert_eq!(server.approvals(), ApprovalPolicy::Ask);

    // The task protocol cannot ask: refused even when asking.
    let srv = serve(&n, asking()).await;
    let r: Value = http()
        .post(format!("{}/tasks", srv.url()))
        .json(&json!({"task_id": "p1", "agent_id": "asker", "input": "go"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["task_id"], "p1");
    let r: Value = http()
        .get(format!("{}/tasks/p1/wait?timeout_seconds=20", srv.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["status"], "success", "{r}");
    assert!(
        r["result"]
            .as_str()
            .unwrap()
            .contains("task-protocol callers cannot be asked"),
        "{r}"
    );
    assert!(!n.dir.path().join("ran.txt").exists());
    srv.stop().await.unwrap();
}
