//! Durable tasks across `cadre serve` nodes: two nodes on one throwaway PostgreSQL, both
//! with `on_orphan = "resume"` and second-scale liveness. A task submitted to node A is in
//! its second model turn (or in a mutating tool call) when A is killed with SIGKILL; node B
//! adopts it once A's heartbeat is old, rebuilds its child from the definition and the
//! checkpoint, and finishes it. The mock model (real HTTP, shared by both nodes) shows the
//! child's first turn was asked exactly once: the task continued, it did not start again.
//! The same holds for two processes of one workspace on its SQLite store. And a parent
//! resumes too: a `cadre run` killed while its two background children work is resumed
//! with `--resume`, which takes the children up from their checkpoints and delivers both
//! results once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use cadre_testkit::{MockServer, OpenAiStream, RecordedRequest, eventually, poll_some};
use serde_json::{Value, json};
use serve_support::*;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// What a lost node's mutating call in flight is answered with on the adopting node.
const INTERRUPTED: &str = "interrupted: outcome unknown (the node running it was lost)";

/// A node's workspace: the worker, the notes it reads, and second-scale liveness with
/// `on_orphan = "resume"`.
fn node_workspace() -> tempfile::TempDir {
    workspace(&[
        ("notes.txt", "the notes say 42\n"),
        (
            ".cadre/agents/worker.md",
            "---\nname: worker\ndescription: Works.\nworkspace: {mode: shared}\n---\nYou work.\n",
        ),
        (
            ".cadre/config.toml",
            "[serve]\ndefault_agent = \"worker\"\napprovals = \"approve\"\n\n\
             [store]\nheartbeat_secs = 1\nsweep_secs = 1\norphan_timeout_secs = 3\n\n\
             [subagents]\non_orphan = \"resume\"\n",
        ),
    ])
}

/// `cadre serve` in `ws` on the store `url` (none: the workspace's SQLite), its model on
/// `mock`.
fn serve(ws: &Path, url: Option<&str>, mock: &MockServer) -> Served {
    let base = mock.openai_base_url();
    let mut env = vec![
        ("OPENAI_BASE_URL", base.as_str()),
        ("OPENAI_API_KEY", "test-key"),
    ];
    if let Some(url) = url {
        env.push(("CADRE_STORE_URL", url));
    }
    Served::start(ws, "openai:mock-model", &env)
}

/// One node: `cadre serve` in its own workspace (its own node id) on the store `url`.
fn node(url: &str, mock: &MockServer) -> (tempfile::TempDir, Served) {
    let ws = node_workspace();
    let srv = serve(ws.path(), Some(url), mock);
    (ws, srv)
}

/// `cadre tasks show ID` in `ws` on the store `url` (none: the workspace's).
fn tasks_show(ws: &Path, url: Option<&str>, id: &str) -> String {
    let mut cmd = cadre(ws);
    if let Some(url) = url {
        cmd.env("CADRE_STORE_URL", url);
    }
    let out = cmd.args(["tasks", "show", id]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A model whose first turn reads the notes, whose first second turn (the killed node's)
/// never answers and whose next one does; and the count of second turns.
async fn slow_second_turn_model() -> (MockServer, Arc<AtomicUsize>) {
    let second_turns = Arc::new(AtomicUsize::new(0));
    let seen = second_turns.clone();
    let mock = MockServer::start_with(Arc::new(move |r: &RecordedRequest| {
        if first_turn(r) {
            return call("read_file", json!({"path": "notes.txt"}));
        }
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            return answer("never said").delayed(Duration::from_secs(600));
        }
        answer(&format!("the answer is 42, from {:?}", tool_results(r)))
    }))
    .await
    .unwrap();
    (mock, second_turns)
}

/// Submit to `a`, kill it in its second turn, and check that `b` finished the task from its
/// checkpoint; the task's id.
async fn killed_mid_turn(
    mock: &MockServer,
    second_turns: &AtomicUsize,
    a: &mut Served,
    b: &Served,
) -> String {
    let id = submit(&a.url, "what do the notes say?").await;
    until("node A's second turn", Duration::from_secs(30), || {
        second_turns.load(Ordering::SeqCst) == 1
    })
    .await;
    a.kill();

    let rec = ended(b, &id).await;
    assert_eq!(rec["status"], "success", "{rec}\n{}", b.stderr());
    let result = rec["result"].as_str().unwrap();
    assert!(result.contains("the answer is 42"), "{rec}");
    // The read's result came from the checkpoint, not from a second read on B.
    assert!(result.contains("the notes say 42"), "{rec}");
    assert_eq!(
        first_turns(mock),
        1,
        "the child's first turn was asked again"
    );
    assert_eq!(second_turns.load(Ordering::SeqCst), 2);
    // The usage recorded on A (turn 1) continues on B (turn 2; A's never answered).
    assert_eq!(rec["usage"]["input_tokens"], 70, "{rec}");
    // Both protocols say where it was resumed.
    assert_eq!(rec["resumed"]["times"], 1, "{rec}");
    let got = rpc(&b.url, "GetTask", json!({"id": id})).await;
    assert_eq!(
        got["result"]["metadata"]["resumed"], rec["resumed"],
        "{got}"
    );
    id
}

/// The tool results a request carries.
fn tool_results(r: &RecordedRequest) -> Vec<String> {
    messages(r)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Submit `input` on the task protocol of `node`; the task's id.
async fn submit(node: &str, input: &str) -> String {
    let v: Value = reqwest::Client::new()
        .post(format!("{node}/tasks"))
        .json(&json!({"input": input}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string()
}

/// Wait (bounded) until `cond` holds.
async fn until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    eventually(what, within, || {
        let held = cond();
        async move { held }
    })
    .await;
}

/// `GET /tasks/{id}` on `node` once the task has ended (bounded: the orphan timeout, a
/// sweep and the resumed turn).
async fn ended(node: &Served, id: &str) -> Value {
    let look = || async {
        let v: Value = reqwest::get(format!("{}/tasks/{id}", node.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v.get("complete").is_some().then_some(v)
    };
    match poll_some(Duration::from_secs(60), look).await {
        Some(v) => v,
        None => panic!(
            "{id} did not end on the adopting node within 60 s\n{}",
            node.stderr()
        ),
    }
}

fn first_turns(mock: &MockServer) -> usize {
    mock.requests().iter().filter(|r| first_turn(r)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_node_is_killed_mid_turn_finishes_on_the_other_node() {
    let Some(db) = database().await else { return };
    let (mock, second_turns) = slow_second_turn_model().await;
    let (a_ws, mut a) = node(&db, &mock);
    let (b_ws, b) = node(&db, &mock);
    let id = killed_mid_turn(&mock, &second_turns, &mut a, &b).await;
    let shown = tasks_show(b_ws.path(), Some(&db), &id);
    assert!(
        shown.contains("resumed         1 time(s); owner epoch 1"),
        "{shown}"
    );
    // The owners over time: A's node at epoch 0, B's at 1.
    let owners: Vec<&str> = shown
        .lines()
        .filter(|l| l.starts_with("  epoch "))
        .collect();
    assert_eq!(owners.len(), 2, "{shown}");
    let node_of = |ws: &Path| cadre_store::NodeId::detect(ws).as_str().to_string();
    assert!(owners[0].contains(&node_of(a_ws.path())), "{shown}");
    assert!(owners[1].contains(&node_of(b_ws.path())), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_a_second_process_of_the_workspace_finishes_a_killed_ones_task() {
    let (mock, second_turns) = slow_second_turn_model().await;
    // One workspace, one SQLite file, one node id: two processes told apart by instance.
    let ws = node_workspace();
    let mut a = serve(ws.path(), None, &mock);
    let b = serve(ws.path(), None, &mock);
    let id = killed_mid_turn(&mock, &second_turns, &mut a, &b).await;
    let shown = tasks_show(ws.path(), None, &id);
    assert!(
        shown.contains("resumed         1 time(s); owner epoch 1"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_call_in_flight_is_reported_as_interrupted_not_run_again() {
    let Some(db) = database().await else { return };
    // The call appends to `marker` in the workspace of the node that runs it, then waits
    // for `release` (created at the end, so nothing is left running). Its node is killed
    // with SIGKILL, so nothing stops it: it also ends once the workspace is gone, in case
    // the test removes it before the loop saw `release` (a leftover loop ran for good).
    let command =
        "echo ran >> marker; while [ ! -e release ] && [ -d \"$PWD\" ]; do sleep 0.05; done";
    let mock = MockServer::start_with(Arc::new(move |r: &RecordedRequest| {
        if first_turn(r) {
            return call("bash", json!({"command": command}));
        }
        let results = tool_results(r);
        if results.iter().any(|t| t.contains(INTERRUPTED)) {
            answer("the call was interrupted; I checked the marker")
        } else {
            answer(&format!("unexpected tool results: {results:?}"))
        }
    }))
    .await
    .unwrap();
    let (a_ws, mut a) = node(&db, &mock);
    let (b_ws, b) = node(&db, &mock);

    let id = submit(&a.url, "append to the marker").await;
    let marker = a_ws.path().join("marker");
    until(
        "the call running on node A",
        Duration::from_secs(30),
        || marker.exists(),
    )
    .await;
    a.kill();

    let rec = ended(&b, &id).await;
    std::fs::write(a_ws.path().join("release"), "").unwrap();
    assert_eq!(rec["status"], "success", "{rec}\n{}", b.stderr());
    assert!(
        rec["result"]
            .as_str()
            .unwrap()
            .contains("the call was interrupted"),
        "{rec}"
    );
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
    assert!(
        !Path::new(&b_ws.path().join("marker")).exists(),
        "node B ran the mutating call again"
    );
    assert_eq!(
        first_turns(&mock),
        1,
        "the child's first turn was asked again"
    );
}

/// The mock of the parent-resume test: the main agent starts two background workers
/// (`job one`, `job two`) and answers `noted` to anything else; each worker reads the
/// notes, then its first second turn (the killed run's) never answers and its next one
/// does. Also the second turns counted per job.
async fn two_background_jobs_model() -> (MockServer, Arc<[AtomicUsize; 2]>) {
    let second_turns = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let seen = second_turns.clone();
    let mock = MockServer::start_with(Arc::new(move |r: &RecordedRequest| {
        if !is_worker(r) {
            if first_turn(r) {
                return OpenAiStream::new()
                    .role()
                    .tool_call(0, "call_1", "task", &spawn_args("job one"))
                    .tool_call(1, "call_2", "task", &spawn_args("job two"))
                    .finish("tool_calls")
                    .usage(30, 10, 0)
                    .done()
                    .into_reply();
            }
            return answer("noted");
        }
        let job = usize::from(prompt_of(r).contains("job two"));
        if first_turn(r) {
            return call("read_file", json!({"path": "notes.txt"}));
        }
        if seen[job].fetch_add(1, Ordering::SeqCst) == 0 {
            return answer("never said").delayed(Duration::from_secs(600));
        }
        answer(&format!("{} is done", ["job one", "job two"][job]))
    }))
    .await
    .unwrap();
    (mock, second_turns)
}

/// The `task` arguments of a background worker given `prompt`.
fn spawn_args(prompt: &str) -> String {
    json!({"subagent_type": "worker", "description": prompt, "prompt": prompt,
        "background": true})
    .to_string()
}

/// True for a request of a worker (its system prompt is the definition's body).
fn is_worker(r: &RecordedRequest) -> bool {
    messages(r)
        .first()
        .and_then(|m| m["content"].as_str())
        .is_some_and(|s| s.contains("You work."))
}

/// The first user message of a request.
fn prompt_of(r: &RecordedRequest) -> String {
    messages(r)
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string()
}

/// `cadre run` on the mock in `ws` with JSONL output, then `args`.
fn cadre_run(ws: &Path, mock: &MockServer, args: &[&str]) -> std::process::Command {
    let mut cmd = cadre(ws);
    cmd.env("OPENAI_BASE_URL", mock.openai_base_url())
        .env("OPENAI_API_KEY", "test-key")
        .args(["--model", "openai:mock-model", "run", "--approval", "auto"])
        .args(["--output", "jsonl"])
        .args(args);
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_resumed_gets_both_background_results_exactly_once() {
    let (mock, second_turns) = two_background_jobs_model().await;
    let ws = node_workspace();
    let mut first = cadre_run(ws.path(), &mock, &["start the jobs"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    until(
        "both workers in their second turn",
        Duration::from_secs(30),
        || second_turns.iter().all(|n| n.load(Ordering::SeqCst) == 1),
    )
    .await;
    first.kill().unwrap();
    let killed = first.wait_with_output().unwrap();
    let session = String::from_utf8_lossy(&killed.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["agent"] == "main")
        .and_then(|e| e["session_id"].as_str().map(str::to_string))
        .expect("the killed run's session in its events");

    let mut again = cadre_run(ws.path(), &mock, &["--resume", &session, "any news?"]);
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || again.output().unwrap()),
    )
    .await
    .expect("the resumed run ended in time")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Both workers went on from their checkpoints: neither read the notes again.
    let workers: Vec<RecordedRequest> = mock.requests().into_iter().filter(is_worker).collect();
    assert_eq!(workers.iter().filter(|r| first_turn(r)).count(), 2);
    assert!(second_turns.iter().all(|n| n.load(Ordering::SeqCst) == 2));
    // The parent's last request holds each result once, in one delivery.
    let last = mock
        .requests()
        .into_iter()
        .filter(|r| !is_worker(r))
        .last()
        .unwrap();
    let said: Vec<String> = messages(&last)
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    for result in ["job one is done", "job two is done"] {
        let n: usize = said.iter().map(|m| m.matches(result).count()).sum();
        assert_eq!(n, 1, "{result} delivered {n} times: {said:#?}");
    }
    let delivered: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "results_delivered")
        .flat_map(|e| e["task_ids"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(delivered.len(), 2, "{stdout}");
    assert_ne!(delivered[0], delivered[1]);
    // Each child's progress log starts by saying where it went on: on this node (the same
    // one: one workspace), after the killed process of it was lost.
    let starts: Vec<String> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "subagent_update" && e["update"]["kind"] == "resumed")
        .filter_map(|e| e["update"]["text"].as_str().map(str::to_string))
        .collect();
    assert_eq!(starts.len(), 2, "{stdout}");
    for s in &starts {
        let node = s
            .strip_prefix("resumed on node ")
            .and_then(|r| r.strip_suffix(" was lost"))
            .and_then(|r| r.split_once(" after node "))
            .unwrap_or_else(|| panic!("not a resume note: {s}"));
        assert_eq!(node.0, node.1, "{s}");
    }
    // `tasks show` has the owners over time.
    for id in &delivered {
        let shown = tasks_show(ws.path(), None, id.as_str().unwrap());
        assert!(shown.contains("resumed         1 time(s)"), "{shown}");
        assert!(shown.contains("\nowners:\n  epoch 0 "), "{shown}");
        assert!(shown.contains("\n  epoch 1 "), "{shown}");
    }
}

/// What node A logs when it finds, on resuming, that node B adopted its task.
const NOT_OURS: &str = "this node no longer owns the task";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_whose_task_was_adopted_runs_nothing_when_it_resumes() {
    let Some(db) = database().await else { return };
    // Each node's bash call appends its letter to `side-effects` in its workspace (where
    // the sandbox lets it write). Node A's first request is answered a second late (A is
    // paused by then) with the call that appends `A`; the adopting node B is answered at
    // once with the call that appends `B`, then with its answer.
    let (on_a, on_b) = ("echo A >> side-effects", "echo B >> side-effects");
    let first_turns = Arc::new(AtomicUsize::new(0));
    let seen = first_turns.clone();
    let mock = MockServer::start_with(Arc::new(move |r: &RecordedRequest| {
        if !first_turn(r) {
            return answer("done by B");
        }
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            return call("bash", json!({"command": on_a})).delayed(Duration::from_secs(1));
        }
        call("bash", json!({"command": on_b}))
    }))
    .await
    .unwrap();
    let (a_ws, mut a) = node(&db, &mock);
    let (b_ws, b) = node(&db, &mock);

    let id = submit(&a.url, "act once").await;
    until("node A's model call", Duration::from_secs(30), || {
        first_turns.load(Ordering::SeqCst) == 1
    })
    .await;
    // Paused mid-turn, waiting for its reply, past the orphan timeout: B adopts the task
    // and finishes it while A is stopped.
    a.signal("STOP");
    let rec = ended(&b, &id).await;
    assert_eq!(rec["status"], "success", "{rec}\n{}", b.stderr());
    assert_eq!(rec["result"], "done by B", "{rec}");
    let requests_by_b = mock.requests().len();
    assert_eq!(requests_by_b, 3, "A's first turn, then B's two");

    // A resumes: it reads the reply it was waiting for, finds the task is not its own any
    // more, and stops there.
    a.signal("CONT");
    until("node A's note", Duration::from_secs(30), || {
        a.stderr().contains(NOT_OURS)
    })
    .await;
    // A's end is not recorded: the task is B's, as B left it, on A too.
    let on_a: Value = reqwest::get(format!("{}/tasks/{id}", a.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(on_a["status"], "success", "{on_a}\n{}", a.stderr());
    assert_eq!(on_a["result"], "done by B", "{on_a}");
    // Once A has exited, nothing more can come from it: it ran no tool call and made no
    // model call after resuming.
    a.terminate(Duration::from_secs(30));
    assert!(
        !a_ws.path().join("side-effects").exists(),
        "node A ran its tool call after resuming\n{}",
        a.stderr()
    );
    assert_eq!(
        std::fs::read_to_string(b_ws.path().join("side-effects")).unwrap(),
        "B\n"
    );
    assert_eq!(
        mock.requests().len(),
        requests_by_b,
        "node A made a model call"
    );
}
