//! Two `cadre serve` nodes on one PostgreSQL task store (a throwaway cluster): every node sees
//! every task. Node A runs the tasks; node B, which never ran them, answers for them from the
//! store: `GET /tasks/{id}` and `/wait`, A2A GetTask and ListTasks (with its filters and
//! pages), a cancel (which stops A's child: B stores the request, A's runtime acts on it) and
//! SubscribeToTask, whose stream follows A's task to its end. A task that takes several
//! messages on A is one task on B, with its history; an approval A's agent waits for reads
//! `input-required` on B, and an answer sent to B reaches A's agent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use cadre_testkit::eventually_some;
use serde_json::{Value, json};
use serve_support::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// A's worker: a "slow" task waits ten minutes for its model (a cancel stops the wait); a
/// "gated" task runs a command that ends once the test creates `release`, then answers.
const SCRIPT: &str = r#"
[[scripts]]
agent = "worker"
prompt_contains = "slow"
[[scripts.turns]]
text = "never said"
delay_ms = 600000

[[scripts]]
agent = "worker"
prompt_contains = "gated"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { command = "while [ ! -e release ]; do sleep 0.05; done; echo released" } }]
[[scripts.turns]]
text = "gate said {{tool_results}}"

[[scripts]]
agent = "worker"
prompt_contains = "twice"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { command = "while [ ! -e release ]; do sleep 0.05; done; echo released" } }]
[[scripts.turns]]
text = "first answer"
[[scripts.turns]]
text = "second answer"

[[scripts]]
agent = "worker"
prompt_contains = "quick"
[[scripts.turns]]
text = "quick answer"

[[scripts]]
agent = "worker"
prompt_contains = "asks"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { command = "echo approved | tee -a asked.txt" } }]
[[scripts.turns]]
text = "asked said {{tool_results}}"
"#;

/// One node: `cadre serve` in its own workspace (so its own node id) on the store `url`,
/// approving its agents' requests itself.
fn node(url: &str) -> (tempfile::TempDir, Served) {
    node_with(url, "approve")
}

/// One node whose approval requests are answered as `approvals` says.
fn node_with(url: &str, approvals: &str) -> (tempfile::TempDir, Served) {
    let ws = workspace(&[
        ("script.toml", SCRIPT),
        (
            ".cadre/agents/worker.md",
            "---\nname: worker\ndescription: Works.\nworkspace: {mode: shared}\n---\nYou work.\n",
        ),
        (
            ".cadre/config.toml",
            &format!("[serve]\ndefault_agent = \"worker\"\napprovals = \"{approvals}\"\n"),
        ),
    ]);
    let model = format!("scripted:{}", ws.path().join("script.toml").display());
    let srv = Served::start(ws.path(), &model, &[("CADRE_STORE_URL", url)]);
    (ws, srv)
}

/// Start an A2A task on `node` and return its id at once (`text` names its message).
async fn send(node: &str, text: &str) -> String {
    let v = rpc(
        node,
        "SendMessage",
        json!({
            "message": {"messageId": format!("m-{text}"), "role": "ROLE_USER", "parts": [{"text": text}]},
            "configuration": {"returnImmediately": true},
        }),
    )
    .await;
    v["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_string()
}

/// Poll `node`'s GetTask of `id` until its state is `want` (bounded).
async fn until_state(node: &str, id: &str, want: &str) -> Value {
    let what = format!("{id} to reach {want} on {node}");
    eventually_some(&what, Duration::from_secs(30), || async {
        let v = rpc(node, "GetTask", json!({"id": id})).await;
        (v["result"]["status"]["state"] == want).then(|| v["result"].clone())
    })
    .await
}

/// Poll `node`'s task protocol for `id` until its status is `want` (bounded).
async fn until_status(node: &str, id: &str, want: &str) -> Value {
    let what = format!("{id} to reach {want} on {node}");
    eventually_some(&what, Duration::from_secs(30), || async {
        let v = get(&format!("{node}/tasks/{id}")).await;
        (v["status"] == want).then_some(v)
    })
    .await
}

fn ids(list: &Value) -> Vec<String> {
    list["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_b_reads_lists_waits_for_and_cancels_the_tasks_node_a_runs() {
    let Some(db) = database().await else { return };
    let (_a_ws, mut a) = node(&db);
    let (_b_ws, mut b) = node(&db);

    let t1 = send(&a.url, "slow one").await;
    let submitted = post(&format!("{}/tasks", a.url), json!({"input": "slow two"})).await;
    let t2 = submitted["task_id"].as_str().unwrap().to_string();
    let on_a = until_state(&a.url, &t1, "TASK_STATE_WORKING").await;
    until_status(&a.url, &t2, "running").await;

    // GetTask and GET /tasks/{id} on B: A's running tasks, in the same context.
    let got = until_state(&b.url, &t1, "TASK_STATE_WORKING").await;
    assert_eq!(got["id"], t1);
    assert_eq!(got["contextId"], on_a["contextId"], "{got}\n{on_a}");
    let rec = get(&format!("{}/tasks/{t2}", b.url)).await;
    assert_eq!(rec["status"], "running", "{rec}");
    assert_eq!(rec["agent_id"], "worker");
    // /wait on B waits through the store and answers when its time is up.
    let waited = get(&format!("{}/tasks/{t2}/wait?timeout_seconds=1", b.url)).await;
    assert_eq!(waited["status"], "running", "{waited}");
    // Messages for the task go to the node that runs it.
    let follow_up = rpc(
        &b.url,
        "SendMessage",
        json!({"message": {"messageId": "m-more", "role": "ROLE_USER", "taskId": t1,
                           "parts": [{"text": "more"}]}}),
    )
    .await;
    assert_eq!(follow_up["error"]["code"], -32004, "{follow_up}");
    assert!(
        follow_up["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another cadre serve node"),
        "{follow_up}"
    );
    let unknown = rpc(&b.url, "GetTask", json!({"id": "task_nope"})).await;
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");

    // ListTasks on B: both tasks, filtered and paged as A2A defines it.
    let all = rpc(&b.url, "ListTasks", json!({})).await;
    let mut listed = ids(&all);
    listed.sort();
    let mut both = vec![t1.clone(), t2.clone()];
    both.sort();
    assert_eq!(listed, both, "{all}");
    assert_eq!(all["result"]["totalSize"], 2);
    let page1 = rpc(
        &b.url,
        "ListTasks",
        json!({"status": "TASK_STATE_WORKING", "pageSize": 1}),
    )
    .await;
    assert_eq!(ids(&page1).len(), 1, "{page1}");
    assert_eq!(page1["result"]["totalSize"], 2);
    let token = page1["result"]["nextPageToken"].as_str().unwrap();
    assert!(!token.is_empty(), "{page1}");
    let page2 = rpc(
        &b.url,
        "ListTasks",
        json!({"status": "TASK_STATE_WORKING", "pageSize": 1, "pageToken": token}),
    )
    .await;
    assert_eq!(ids(&page2).len(), 1, "{page2}");
    assert_ne!(ids(&page1), ids(&page2));
    assert_eq!(page2["result"]["nextPageToken"], "");
    let done = rpc(
        &b.url,
        "ListTasks",
        json!({"status": "TASK_STATE_COMPLETED"}),
    )
    .await;
    assert!(ids(&done).is_empty(), "{done}");
    let in_context = rpc(&b.url, "ListTasks", json!({"contextId": got["contextId"]})).await;
    assert_eq!(ids(&in_context), [t1.as_str()], "{in_context}");

    // Cancel on B stops A's children: A waits ten minutes for the model otherwise.
    let cancelled = rpc(&b.url, "CancelTask", json!({"id": t1})).await;
    assert_eq!(
        cancelled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    until_state(&a.url, &t1, "TASK_STATE_CANCELED").await;
    let stopped = post(&format!("{}/tasks/{t2}/cancel", b.url), json!({})).await;
    assert_eq!(stopped["status"], "cancelled", "{stopped}");
    until_status(&a.url, &t2, "cancelled").await;
    let ended = rpc(
        &b.url,
        "ListTasks",
        json!({"status": "TASK_STATE_CANCELED"}),
    )
    .await;
    assert_eq!(ids(&ended).len(), 2, "{ended}");

    assert!(a.terminate(Duration::from_secs(20)), "{}", a.stderr());
    assert!(b.terminate(Duration::from_secs(20)), "{}", b.stderr());
}

/// The `data:` payloads of an SSE body, as JSON.
fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_on_node_b_streams_a_task_node_a_runs_to_its_end() {
    let Some(db) = database().await else { return };
    let (a_ws, mut a) = node(&db);
    let (_b_ws, mut b) = node(&db);

    let t = send(&a.url, "gated").await;
    until_state(&a.url, &t, "TASK_STATE_WORKING").await;
    let stream = reqwest::Client::new()
        .post(format!("{}/", b.url))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask", "params": {"id": t}}))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut stream = stream;
    // The snapshot comes first, while the task still waits for the gate.
    let mut body = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while events(&body).is_empty() || !body.ends_with("\n\n") {
        assert!(Instant::now() < deadline, "no snapshot: {body}");
        let chunk = tokio::time::timeout(Duration::from_secs(30), stream.chunk())
            .await
            .unwrap()
            .unwrap()
            .expect("the stream ended before its snapshot");
        body.push_str(&String::from_utf8_lossy(&chunk));
    }
    let first = &events(&body)[0];
    assert_eq!(first["id"], 7);
    assert_eq!(first["result"]["task"]["id"], t, "{first}");
    assert_eq!(
        first["result"]["task"]["status"]["state"],
        "TASK_STATE_WORKING"
    );

    std::fs::write(Path::new(a_ws.path()).join("release"), "").unwrap();
    let rest = tokio::time::timeout(Duration::from_secs(30), stream.text())
        .await
        .expect("the stream did not end with the task")
        .unwrap();
    body.push_str(&rest);
    let all = events(&body);
    let last = all.last().unwrap();
    let update = &last["result"]["statusUpdate"];
    assert_eq!(update["taskId"], t, "{last}");
    assert_eq!(update["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    assert!(
        all.iter().any(
            |e| e["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"]
                .as_str()
                .is_some_and(|s| s.contains("gate said released"))
        ),
        "the answer came through the store: {body}"
    );

    // A task that has ended, or never was, cannot be subscribed to.
    let again = rpc(&b.url, "SubscribeToTask", json!({"id": t})).await;
    assert!(again["error"]["code"].is_i64(), "{again}");
    let unknown = rpc(&b.url, "SubscribeToTask", json!({"id": "task_nope"})).await;
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");

    assert!(a.terminate(Duration::from_secs(20)), "{}", a.stderr());
    assert!(b.terminate(Duration::from_secs(20)), "{}", b.stderr());
}

/// The texts of a task's history, in order.
fn history(task: &Value) -> Vec<String> {
    task["history"]
        .as_array()
        .unwrap_or_else(|| panic!("{task}"))
        .iter()
        .map(|m| m["parts"][0]["text"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_takes_two_messages_on_node_a_is_one_task_on_node_b() {
    let Some(db) = database().await else { return };
    let (a_ws, mut a) = node(&db);
    let (_b_ws, mut b) = node(&db);

    let t = send(&a.url, "twice").await;
    until_state(&a.url, &t, "TASK_STATE_WORKING").await;
    // A second message on the same task: its next turn, queued while the first runs.
    let more = rpc(
        &a.url,
        "SendMessage",
        json!({"message": {"messageId": "m-again", "role": "ROLE_USER", "taskId": t,
                           "parts": [{"text": "and again"}]},
               "configuration": {"returnImmediately": true}}),
    )
    .await;
    assert_eq!(more["result"]["task"]["id"], t, "{more}");
    std::fs::write(a_ws.path().join("release"), "").unwrap();
    let on_a = until_state(&a.url, &t, "TASK_STATE_COMPLETED").await;
    let want = ["twice", "first answer", "and again", "second answer"];
    assert_eq!(history(&on_a), want, "{on_a}");

    // B shows the one task, with both turns' messages and answers and the last answer.
    let on_b = until_state(&b.url, &t, "TASK_STATE_COMPLETED").await;
    assert_eq!(history(&on_b), want, "{on_b}");
    assert_eq!(on_b["history"][2]["messageId"], "m-again", "{on_b}");
    assert_eq!(
        on_b["artifacts"][0]["parts"][0]["text"], "second answer",
        "{on_b}"
    );
    assert_eq!(on_b["contextId"], on_a["contextId"]);
    let all = rpc(&b.url, "ListTasks", json!({"historyLength": 10})).await;
    assert_eq!(ids(&all), [t.as_str()], "one task, not one per turn: {all}");
    assert_eq!(history(&all["result"]["tasks"][0]), want, "{all}");

    assert!(a.terminate(Duration::from_secs(20)), "{}", a.stderr());
    assert!(b.terminate(Duration::from_secs(20)), "{}", b.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_node_a_waits_for_reads_input_required_on_node_b_and_is_answered_there() {
    let Some(db) = database().await else { return };
    let (a_ws, mut a) = node_with(&db, "ask");
    let (_b_ws, mut b) = node_with(&db, "ask");

    let t = send(&a.url, "asks").await;
    until_state(&a.url, &t, "TASK_STATE_INPUT_REQUIRED").await;
    let asked = until_state(&b.url, &t, "TASK_STATE_INPUT_REQUIRED").await;
    let question = asked["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("the question: {asked}"));
    assert!(
        question.contains("`worker`") && question.contains("`bash`"),
        "{question}"
    );
    assert_eq!(
        asked["status"]["message"]["parts"][1]["data"]["approval"]["tool"], "bash",
        "{asked}"
    );
    let waiting = rpc(
        &b.url,
        "ListTasks",
        json!({"status": "TASK_STATE_INPUT_REQUIRED"}),
    )
    .await;
    assert_eq!(ids(&waiting), [t.as_str()], "{waiting}");

    // What is not an answer is refused on B, naming the node that runs the task.
    let remark = rpc(
        &b.url,
        "SendMessage",
        json!({"message": {"messageId": "m-what", "role": "ROLE_USER", "taskId": t,
                           "parts": [{"text": "what does it do?"}]}}),
    )
    .await;
    assert_eq!(remark["error"]["code"], -32004, "{remark}");
    let owner = remark["error"]["data"][0]["metadata"]["node"]
        .as_str()
        .unwrap_or_else(|| panic!("the node: {remark}"));
    assert!(!owner.is_empty(), "{remark}");
    assert!(
        remark["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("`{owner}`")),
        "{remark}"
    );

    // A yes on B lets A's tool run; the blocking send on B waits for the end.
    let yes = rpc(
        &b.url,
        "SendMessage",
        json!({"message": {"messageId": "m-yes", "role": "ROLE_USER", "taskId": t,
                           "parts": [{"text": "yes"}]}}),
    )
    .await;
    let done = &yes["result"]["task"];
    assert_eq!(done["id"], t, "{yes}");
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{yes}");
    assert!(
        done["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("asked said approved"),
        "{yes}"
    );
    assert!(
        a_ws.path().join("asked.txt").exists(),
        "approved on B, the tool ran on A"
    );

    // A refusal on B reaches A's agent with its reason.
    std::fs::remove_file(a_ws.path().join("asked.txt")).unwrap();
    let t2 = send(&a.url, "asks again").await;
    until_state(&b.url, &t2, "TASK_STATE_INPUT_REQUIRED").await;
    let no = rpc(
        &b.url,
        "SendMessage",
        json!({"message": {"messageId": "m-no", "role": "ROLE_USER", "taskId": t2,
                           "parts": [{"data": {"approve": false, "feedback": "not from node B"}}]}}),
    )
    .await;
    let refused = &no["result"]["task"];
    assert_eq!(refused["status"]["state"], "TASK_STATE_COMPLETED", "{no}");
    assert!(
        refused["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("denied by the user: not from node B"),
        "{no}"
    );
    assert!(
        !a_ws.path().join("asked.txt").exists(),
        "refused, nothing ran"
    );
    // A answered question cannot be answered again.
    let late = rpc(
        &b.url,
        "SendMessage",
        json!({"message": {"messageId": "m-late", "role": "ROLE_USER", "taskId": t2,
                           "parts": [{"text": "yes"}]}}),
    )
    .await;
    assert!(late["error"]["code"].is_i64(), "{late}");

    assert!(a.terminate(Duration::from_secs(20)), "{}", a.stderr());
    assert!(b.terminate(Duration::from_secs(20)), "{}", b.stderr());
}

/// Submit `input` to `node` until it is taken, as a load balancer does with a 503 that
/// carries Retry-After; any other refusal fails. The task's id.
async fn taken(node: &str, input: &str) -> String {
    eventually_some(
        &format!("{input:?} taken"),
        Duration::from_secs(30),
        || async {
            let r = reqwest::Client::new()
                .post(format!("{node}/tasks"))
                .json(&json!({"input": input}))
                .send()
                .await
                .ok()?;
            let status = r.status();
            if !status.is_success() {
                assert!(
                    status == reqwest::StatusCode::SERVICE_UNAVAILABLE
                        && r.headers().contains_key("retry-after"),
                    "{status} (not a 503 with Retry-After)"
                );
                return None;
            }
            let body: Value = r.json().await.ok()?;
            body["task_id"].as_str().map(str::to_string)
        },
    )
    .await
}

// A database restart between two submissions: the first write after it meets the node's
// dead connection and is tried again on a fresh one, so the submission is taken (it was
// answered 500). While the database is down, a submission is answered 503 with
// Retry-After within the create's retry window (2 s here), not 500 and not after the
// request timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_is_waited_out_and_an_outage_answered_503() {
    if !postgres_installed() {
        return;
    }
    // A cluster of its own: this test stops it.
    let cluster = cadre_store::testing::PgCluster::start(&[]).unwrap();
    let url = cluster.create_database().await.unwrap();
    let ws = workspace(&[
        ("script.toml", SCRIPT),
        (
            ".cadre/agents/worker.md",
            "---\nname: worker\ndescription: Works.\nworkspace: {mode: shared}\n---\nYou work.\n",
        ),
        (
            ".cadre/config.toml",
            "[serve]\ndefault_agent = \"worker\"\n[store]\nconnect_timeout_secs = 1\nwrite_retry_secs = 2\n",
        ),
    ]);
    let model = format!("scripted:{}", ws.path().join("script.toml").display());
    let a = Served::start(ws.path(), &model, &[("CADRE_STORE_URL", &url)]);
    let submit = |input: &str| {
        reqwest::Client::new()
            .post(format!("{}/tasks", a.url))
            .json(&json!({"input": input}))
            .send()
    };
    // On a loaded machine the node's connections may take longer than its one-second
    // connect timeout: it then answers 503 with Retry-After (never 500), and a caller (a
    // load balancer) sends again. The submissions here do so until taken.
    taken(&a.url, "quick one").await;
    cluster.pause().unwrap();
    cluster.resume().unwrap();
    let id = taken(&a.url, "quick two").await;
    until_status(&a.url, &id, "success").await;

    cluster.pause().unwrap();
    let down = submit("quick three").await.unwrap();
    assert_eq!(
        down.status(),
        reqwest::StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        a.stderr()
    );
    assert_eq!(down.headers()["retry-after"], "5");
    // The store's answer, not the request timeout's.
    let body: Value = down.json().await.unwrap();
    assert!(
        body.to_string().contains("the task store is unavailable"),
        "{body}"
    );
    cluster.resume().unwrap();
}
