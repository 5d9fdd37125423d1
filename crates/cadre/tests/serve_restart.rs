//! `cadre serve` restarted in the same workspace (its SQLite task store) still answers for
//! the tasks its earlier process took: by the caller's id over the task protocol, by task id
//! over A2A with the task's history, and a caller's id that finished stays taken.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use serde_json::{Value, json};
use serve_support::*;
use std::time::Duration;

const SCRIPT: &str = r#"
[[scripts]]
agent = "worker"
prompt_contains = "quick"
[[scripts.turns]]
text = "quick answer"
"#;

fn start(ws: &tempfile::TempDir) -> Served {
    let model = format!("scripted:{}", ws.path().join("script.toml").display());
    Served::start(ws.path(), &model, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_answers_for_the_tasks_of_its_earlier_process() {
    let ws = workspace(&[
        ("script.toml", SCRIPT),
        (
            ".cadre/agents/worker.md",
            "---\nname: worker\ndescription: Works.\n---\nYou work.\n",
        ),
        (
            ".cadre/config.toml",
            "[serve]\ndefault_agent = \"worker\"\n",
        ),
    ]);
    let http = reqwest::Client::new();
    let mut first = start(&ws);
    let submitted: Value = http
        .post(format!("{}/tasks", first.url))
        .json(&json!({"task_id": "job-7", "input": "quick job"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(submitted["task_id"], "job-7", "{submitted}");
    let waited: Value = http
        .get(format!("{}/tasks/job-7/wait?timeout_seconds=30", first.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(waited["status"], "success", "{waited}");
    let sent = rpc(
        &first.url,
        "SendMessage",
        json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "quick a2a"}]}}),
    )
    .await;
    let a2a = sent["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        sent["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert!(
        first.terminate(Duration::from_secs(20)),
        "{}",
        first.stderr()
    );

    let mut second = start(&ws);
    let got = http
        .get(format!("{}/tasks/job-7", second.url))
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 200, "the caller's id survives the restart");
    let got: Value = got.json().await.unwrap();
    assert_eq!(got["task_id"], "job-7", "{got}");
    assert_eq!(got["status"], "success", "{got}");
    assert_eq!(got["result"], "quick answer", "{got}");
    let waited: Value = http
        .get(format!("{}/tasks/job-7/wait?timeout_seconds=1", second.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(waited["status"], "success", "{waited}");
    // The id stays taken: submitting it again is a conflict, and starts nothing.
    let again = http
        .post(format!("{}/tasks", second.url))
        .json(&json!({"task_id": "job-7", "input": "quick again"}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 409);

    let task = rpc(&second.url, "GetTask", json!({"id": a2a})).await;
    let task = &task["result"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["history"][0]["messageId"], "m-1", "{task}");
    assert_eq!(
        task["history"][1]["parts"][0]["text"], "quick answer",
        "{task}"
    );
    assert!(
        second.terminate(Duration::from_secs(20)),
        "{}",
        second.stderr()
    );
}
