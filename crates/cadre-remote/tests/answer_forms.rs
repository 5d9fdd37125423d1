//! How served agents' answers reach A2A callers (`ServeOptions::answers`, `[serve.agents.NAME]`):
//! an agent served with `answer = "parts"` answers in A2A parts (a file's bytes, a file's URL,
//! data), in the task's artifact, its history and its stream; one served with
//! `reply = "message"` answers a blocking send with a Message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_remote::{AnswerForm, AnswerStyle, ServeOptions, Server};
use cadre_subagents::{AgentDefinition, Harness};
use common::*;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

const SCRIPT: &str = r#"
[[scripts]]
agent = "filer"
[[scripts.turns]]
text = '''```json
[{"raw": "aGk=", "filename": "out.txt", "mediaType": "text/plain"},
 {"url": "https://example.com/out.txt", "filename": "out.txt"},
 {"data": {"count": 42}}]
```'''

[[scripts]]
agent = "sloppy"
[[scripts.turns]]
text = "[{\"url\": \"file:///etc/passwd\"}]"

[[scripts]]
agent = "greeter"
[[scripts.turns]]
text = "hello {{user}}"
[[scripts.turns]]
text = "again {{user}}"
"#;

fn parts_node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let mut b = Harness::builder()
        .model(format!("scripted:{}", script.display()))
        .workspace(dir.path())
        .without_agent_files()
        .user_agents_dir(None)
        .in_memory_sessions();
    for name in ["filer", "sloppy", "greeter"] {
        let mut d = AgentDefinition::new(name, "answers");
        d.workspace.mode = cadre_subagents::WorkspaceMode::Shared;
        b = b.subagent(d);
    }
    Node {
        harness: b.build().unwrap(),
        dir,
    }
}

fn styled() -> ServeOptions {
    let parts = AnswerStyle {
        form: AnswerForm::Parts,
        message: false,
    };
    let message = AnswerStyle {
        form: AnswerForm::Text,
        message: true,
    };
    ServeOptions {
        default_agent: Some("greeter".into()),
        answers: [
            ("filer".to_string(), parts),
            ("sloppy".to_string(), parts),
            ("greeter".to_string(), message),
        ]
        .into(),
        ..ServeOptions::default()
    }
}

fn to(agent: &str, text: &str) -> Value {
    let mut m = message(text);
    m["metadata"] = json!({ "agent": agent });
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parts_answer_is_a_file_url_and_data_artifact_in_both_versions() {
    let n = parts_node();
    let srv = serve(&n, styled()).await;
    let (_, v) = rpc(
        &srv.url(),
        "SendMessage",
        json!({"message": to("filer", "go")}),
    )
    .await;
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    let parts = &task["artifacts"][0]["parts"];
    assert_eq!(
        parts[0],
        json!({"raw": "aGk=", "filename": "out.txt", "mediaType": "text/plain"})
    );
    assert_eq!(parts[1]["url"], "https://example.com/out.txt");
    assert_eq!(parts[2]["data"], json!({"count": 42}));
    // The answer in the history is the same parts.
    let history = task["history"].as_array().unwrap();
    assert_eq!(&history.last().unwrap()["parts"], parts);

    // GetTask under v0.3: the v0.3 shapes of the same parts.
    let (_, v) = rpc(&srv.url(), "tasks/get", json!({"id": task["id"]})).await;
    let parts = &v["result"]["artifacts"][0]["parts"];
    assert_eq!(parts[0]["kind"], "file", "{v}");
    assert_eq!(parts[0]["file"]["bytes"], "aGk=");
    assert_eq!(parts[0]["file"]["name"], "out.txt");
    assert_eq!(parts[0]["file"]["mimeType"], "text/plain");
    assert_eq!(parts[1]["file"]["uri"], "https://example.com/out.txt");
    assert_eq!(parts[2], json!({"kind": "data", "data": {"count": 42}}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_spells_no_valid_parts_is_kept_as_text() {
    let n = parts_node();
    let srv = serve(&n, styled()).await;
    let (_, v) = rpc(
        &srv.url(),
        "SendMessage",
        json!({"message": to("sloppy", "go")}),
    )
    .await;
    let parts = &v["result"]["task"]["artifacts"][0]["parts"];
    assert_eq!(
        parts,
        &json!([{"text": "[{\"url\": \"file:///etc/passwd\"}]"}]),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parts_answer_streams_whole_not_as_chunks_of_json() {
    let n = parts_node();
    let srv = serve(&n, styled()).await;
    let resp = http()
        .post(format!("{}/", srv.url()))
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": to("filer", "go")}}),
        )
        .send()
        .await
        .unwrap();
    let mut es = resp.bytes_stream().eventsource();
    let mut artifacts = Vec::new();
    let mut last = Value::Null;
    while let Some(ev) = tokio::time::timeout(std::time::Duration::from_secs(20), es.next())
        .await
        .unwrap()
    {
        let v: Value = serde_json::from_str(&ev.unwrap().data).unwrap();
        if let Some(a) = v["result"].get("artifactUpdate") {
            artifacts.push(a.clone());
        }
        last = v["result"].clone();
    }
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    assert_eq!(artifacts[0]["lastChunk"], true);
    assert_eq!(artifacts[0]["artifact"]["parts"][2]["data"]["count"], 42);
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_agent_answers_a_blocking_send_with_a_message_in_its_context() {
    let n = parts_node();
    let srv = serve(&n, styled()).await;
    let (_, v) = rpc(
        &srv.url(),
        "SendMessage",
        json!({"message": message("ann")}),
    )
    .await;
    let m = &v["result"]["message"];
    assert!(v["result"].get("task").is_none(), "{v}");
    assert_eq!(m["role"], "ROLE_AGENT");
    assert_eq!(m["parts"], json!([{"text": "hello ann"}]));
    assert!(m["messageId"].is_string());
    assert!(m.get("taskId").is_none());
    let ctx = m["contextId"].as_str().unwrap().to_string();

    // The next message in that context continues the conversation, v0.3 shapes this time.
    let mut next = json!({"messageId": "m2", "role": "user", "kind": "message",
        "parts": [{"kind": "text", "text": "bob"}], "contextId": ctx});
    next["metadata"] = json!({"agent": "greeter"});
    let (_, v) = rpc(&srv.url(), "message/send", json!({"message": next})).await;
    assert_eq!(v["result"]["kind"], "message", "{v}");
    assert_eq!(v["result"]["parts"][0]["text"], "again bob");
    assert_eq!(v["result"]["contextId"], ctx.as_str());

    // Not waiting: the caller gets the task, as there is no answer yet.
    let (_, v) = rpc(
        &srv.url(),
        "SendMessage",
        json!({"message": message("cy"), "configuration": {"returnImmediately": true}}),
    )
    .await;
    assert!(v["result"]["task"]["id"].is_string(), "{v}");
}

#[tokio::test]
async fn answer_styles_for_unknown_agents_are_refused() {
    let n = parts_node();
    let mut opts = styled();
    opts.answers.insert("nobody".into(), AnswerStyle::default());
    let e = Server::new(
        n.harness.runtime().clone(),
        &n.harness.agent().config().model.spec,
        opts,
    )
    .err()
    .expect("refused");
    assert!(e.to_string().contains("nobody"), "{e}");
}
