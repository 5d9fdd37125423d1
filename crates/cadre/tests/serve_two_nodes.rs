//! Two cadre nodes. Node B is `cadre serve` with its model on a mock OpenAI server. Node A
//! delegates to agents declared with B's url: first the `cadre` binary, whose scripted parent
//! calls `task` on an A2A agent and a task-protocol agent declared in files (the token comes
//! from `${B_TOKEN}`); then a library harness whose parent starts a background task on B and
//! cancels it with `task_cancel` — B's task ends cancelled and B's model hears nothing more.
//! Last, B's agent asks for approval: the question reaches the person at node A's REPL,
//! naming B's agent, and their answer decides whether B's tool runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use cadre_remote::RemoteClient;
use cadre_subagents::{
    AgentDefinition, Harness, RemoteProtocol, RemoteSpec, RunOptions, TaskStatus,
};
use cadre_testkit::{MockServer, OpenAiStream, eventually};
use cadre_tools::{RunContext, ToolContext, Workspace};
use serde_json::{Value, json};
use serve_support::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "node-b-token-31c9e6f0";

fn node_b(mock: &MockServer) -> (tempfile::TempDir, Served) {
    let ws = workspace(&[
        (
            ".cadre/agents/worker.md",
            "---\nname: worker\ndescription: Does the work on node B.\n---\nYou work.\n",
        ),
        (
            ".cadre/config.toml",
            "[serve]\ndefault_agent = \"worker\"\n",
        ),
    ]);
    let base = mock.openai_base_url();
    let srv = Served::start(
        ws.path(),
        "openai:mock-model",
        &[
            ("OPENAI_BASE_URL", base.as_str()),
            ("OPENAI_API_KEY", "test-key"),
            ("CADRE_SERVE_TOKEN", TOKEN),
            ("RUST_LOG", "debug"),
        ],
    );
    (ws, srv)
}

fn answer(text: &str) -> cadre_testkit::MockReply {
    OpenAiStream::new()
        .role()
        .text(text)
        .finish("stop")
        .usage(20, 5, 0)
        .done()
        .into_reply()
}

const SCRIPT_A: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
text = "Asking node B twice."
tool_calls = [
  { name = "task", args = { subagent_type = "far", description = "over a2a", prompt = "compute it" } },
  { name = "task", args = { subagent_type = "far-tasks", description = "over tasks", prompt = "compute it again" } },
]
[[scripts.turns]]
text = "Node B said:\n{{tool_results}}"
"#;

fn remote_file(name: &str, url: &str, protocol: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: Runs on node B.\nurl: {url}\nprotocol: {protocol}\nheaders:\n  Authorization: \"Bearer ${{B_TOKEN}}\"\n---\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_on_node_a_delegates_to_node_b_over_both_protocols() {
    let mock = MockServer::start().await.unwrap();
    mock.set_default_reply(answer("B computed 42"));
    let (_b_ws, mut b) = node_b(&mock);
    let far = remote_file("far", &b.url, "a2a");
    let far_tasks = remote_file("far-tasks", &b.url, "tasks");
    let a = workspace(&[
        ("script.toml", SCRIPT_A),
        (".cadre/agents/far.md", &far),
        (".cadre/agents/far-tasks.md", &far_tasks),
    ]);
    let model = format!("scripted:{}", a.path().join("script.toml").display());
    let mut cmd = tokio::process::Command::from(cadre(a.path()));
    cmd.args(["--model", &model, "run", "delegate"])
        .env("B_TOKEN", TOKEN)
        .env("RUST_LOG", "debug")
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {stderr}\nB: {}",
        b.stderr()
    );
    assert_eq!(stdout.matches("B computed 42").count(), 2, "{stdout}");
    assert_eq!(
        mock.request_count(),
        2,
        "one model call on B per delegation"
    );
    assert!(
        !stderr.contains(TOKEN),
        "the token leaked into node A's log"
    );
    for f in files_under(&a.path().join(".cadre")) {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).to_string();
        assert!(
            !text.contains(TOKEN),
            "the token leaked into {}",
            f.display()
        );
    }
    assert!(b.terminate(Duration::from_secs(20)));
    assert!(
        !b.stderr().contains(TOKEN),
        "the token leaked into node B's log"
    );
}

const SCRIPT_A2: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [
  { name = "task", args = { subagent_type = "far", description = "long job", prompt = "take your time", background = true } },
]
[[scripts.turns]]
text = "Started it."
[[scripts.turns]]
text = "It ended: {{user}}"
"#;

async fn b_tasks(url: &str) -> Vec<Value> {
    let v: Value = reqwest::Client::new()
        .post(format!("{url}/"))
        .bearer_auth(TOKEN)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["result"]["tasks"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
async fn task_cancel_on_node_a_stops_the_task_on_node_b() {
    let mock = MockServer::start().await.unwrap();
    // B's child gets a tool call after 3 s: if it were not stopped, it would ask again.
    mock.push_openai(
        OpenAiStream::new()
            .role()
            .tool_call(0, "call_1", "list_dir", "{\"path\":\".\"}")
            .finish("tool_calls")
            .done()
            .into_reply()
            .delayed(Duration::from_secs(3)),
    );
    mock.set_default_reply(answer("should never be asked"));
    let (_b_ws, mut b) = node_b(&mock);

    let a = workspace(&[("script.toml", SCRIPT_A2)]);
    let mut far = AgentDefinition::new("far", "Runs on node B.");
    let mut headers = BTreeMap::new();
    headers.insert("Authorization".to_string(), format!("Bearer {TOKEN}"));
    far.remote = Some(RemoteSpec {
        url: b.url.clone(),
        headers,
        protocol: RemoteProtocol::A2a,
    });
    let client = Arc::new(RemoteClient::new().unwrap());
    let harness = Arc::new(
        Harness::builder()
            .model(format!(
                "scripted:{}",
                a.path().join("script.toml").display()
            ))
            .workspace(a.path())
            .without_agent_files()
            .user_agents_dir(None)
            .subagent(far)
            .runtime_config(move |rc| rc.remote = Some(client))
            .build()
            .unwrap(),
    );
    let session = harness.new_session().unwrap();
    let sid = session.id().to_string();
    let run = tokio::spawn({
        let h = harness.clone();
        async move {
            let mut s = session;
            h.run_in(&mut s, "start the long job", RunOptions::default())
                .await
        }
    });
    let t0 = Instant::now();
    eventually(
        "B's child to call its model",
        Duration::from_secs(20),
        || async { mock.request_count() >= 1 },
    )
    .await;
    let rt = harness.runtime().clone();
    let task = rt
        .tasks_of(&sid)
        .await
        .into_iter()
        .find(|t| t.agent_id == "far")
        .unwrap();
    assert_eq!(task.status, TaskStatus::Running);

    // The parent's task_cancel tool, as the model would call it.
    let tools = rt.delegation_tools();
    let cancel_tool = tools.get("task_cancel").unwrap();
    let ctx = ToolContext {
        hidden: Default::default(),
        call_id: "call_cancel".into(),
        tools: Arc::new(rt.top_level_tools()),
        workspace: Arc::new(Workspace::new(a.path()).unwrap()),
        cancel: CancellationToken::new(),
        run: Arc::new(RunContext {
            session_id: sid.clone(),
            agent: "main".into(),
            model: "scripted".into(),
            task_id: None,
            user_id: None,
            parent_session_id: None,
            depth: 0,
            tool_grant: cadre_tools::ToolGrant::unrestricted(),
            budget: cadre_tools::Budget::unlimited(),
            trace_id: "t".into(),
            events: Arc::new(cadre_types::NullSink),
            approvals: Arc::new(cadre_engine::NonInteractiveApprovals::new(false)),
        }),
    };
    let out = cancel_tool
        .call(json!({"task_id": task.id}), &ctx)
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.content);

    let outcome = tokio::time::timeout(Duration::from_secs(15), run)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        outcome.state,
        cadre_types::EndState::Completed,
        "{outcome:?}"
    );
    assert_eq!(
        rt.task_record(&task.id).await.unwrap().status,
        TaskStatus::Cancelled
    );

    eventually(
        "B's task to end cancelled",
        Duration::from_secs(5),
        || async {
            let tasks = b_tasks(&b.url).await;
            assert_eq!(tasks.len(), 1, "{tasks:?}");
            tasks[0]["status"]["state"] == "TASK_STATE_CANCELED"
        },
    )
    .await;
    // A call that must not happen has no event to wait on: wait out the mock's 3 s reply
    // delay (the moment B's child would have asked again), and 1 s more for that request to
    // arrive.
    tokio::time::sleep(
        Duration::from_secs(3).saturating_sub(t0.elapsed()) + Duration::from_secs(1),
    )
    .await;
    assert_eq!(
        mock.request_count(),
        1,
        "B's cancelled child asked its model again"
    );
    assert!(b.terminate(Duration::from_secs(20)));
}

const SCRIPT_B_ASKS: &str = r#"
[[scripts]]
agent = "worker"
[[scripts.turns]]
text = "I will run it."
tool_calls = [{ name = "bash", args = { command = "echo from-b | tee b.txt" } }]
[[scripts.turns]]
text = "B says: {{tool_results}}"
"#;

const SCRIPT_A_DELEGATES: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "far", description = "on B", prompt = "run it on B" } }]
[[scripts.turns]]
text = "A got: {{tool_results}}"
"#;

/// Node B asks its caller (a token is set, so `approvals` defaults to `ask`); node A's REPL
/// delegates to B's agent and answers the question on its stdin with `answer`. Returns A's
/// stdout and stderr and whether B's tool ran.
fn delegate_and_answer(answer: &str) -> (String, String, bool) {
    delegate_from_a(&[], Some(format!("delegate\n{answer}\n/exit\n").as_str()))
}

/// The same with node A's parent a headless `cadre run` (`args` after `run`), which answers
/// B's question by its `--approval` setting.
fn delegate_from_run(args: &[&str]) -> (String, String, bool) {
    let mut run = vec!["run"];
    run.extend_from_slice(args);
    run.push("delegate");
    delegate_from_a(&run, None)
}

/// Node A (`cadre ARGS`, fed `stdin`) delegates to node B's agent, which asks to run bash.
fn delegate_from_a(args: &[&str], stdin: Option<&str>) -> (String, String, bool) {
    let b_ws = workspace(&[
        ("script.toml", SCRIPT_B_ASKS),
        (
            ".cadre/agents/worker.md",
            "---\nname: worker\ndescription: Works on node B.\nworkspace: {mode: shared}\n---\nYou work.\n",
        ),
        (
            ".cadre/config.toml",
            "[serve]\ndefault_agent = \"worker\"\n",
        ),
    ]);
    let model = format!("scripted:{}", b_ws.path().join("script.toml").display());
    let mut b = Served::start(b_ws.path(), &model, &[("CADRE_SERVE_TOKEN", TOKEN)]);
    assert!(
        b.stderr().contains("approvals: ask the A2A caller"),
        "{}",
        b.stderr()
    );
    let far = remote_file("far", &b.url, "a2a");
    let a = workspace(&[
        ("script.toml", SCRIPT_A_DELEGATES),
        (".cadre/agents/far.md", &far),
    ]);
    let model = format!("scripted:{}", a.path().join("script.toml").display());
    let mut cmd = cadre(a.path());
    cmd.args(["--model", &model])
        .args(args)
        .env("B_TOKEN", TOKEN)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {stderr}\nB: {}",
        b.stderr()
    );
    let ran = b_ws.path().join("b.txt").exists();
    assert!(b.terminate(Duration::from_secs(20)));
    (stdout, stderr, ran)
}

#[test]
fn node_b_asks_node_a_and_an_approval_lets_its_tool_run() {
    let (stdout, stderr, ran) = delegate_and_answer("y");
    assert!(
        stderr.contains("[worker on http://127.0.0.1:")
            && stderr.contains("(via far)] wants to run bash(echo from-b | tee b.txt)"),
        "A's person sees which remote agent asks: {stderr}"
    );
    assert!(ran, "approved on A, the tool ran on B");
    assert!(stdout.contains("B says: from-b"), "{stdout}");
}

#[test]
fn node_b_asks_node_a_and_a_refusal_reaches_b_with_its_reason() {
    let (stdout, stderr, ran) = delegate_and_answer("not on my build box");
    assert!(stderr.contains("(via far)] wants to run bash"), "{stderr}");
    assert!(!ran, "refused on A, nothing ran on B");
    assert!(
        stdout.contains("denied by the user: not on my build box"),
        "B's agent got the reason: {stdout}"
    );
}

#[test]
fn a_headless_run_on_node_a_approves_node_b_s_request_with_approval_auto() {
    let (stdout, stderr, ran) = delegate_from_run(&["--approval", "auto"]);
    assert!(ran, "approved on A, the tool ran on B: {stderr}");
    assert!(stdout.contains("B says: from-b"), "{stdout}\n{stderr}");
}

#[test]
fn a_headless_run_on_node_a_refuses_node_b_s_request_naming_b_s_agent() {
    let (stdout, stderr, ran) = delegate_from_run(&[]);
    assert!(
        stderr.contains("[worker on http://127.0.0.1:")
            && stderr.contains(
                "(via far)] bash (echo from-b | tee b.txt) needs approval and was refused"
            ),
        "A's stderr names B's agent: {stderr}"
    );
    assert!(!ran, "refused on A, nothing ran on B");
    assert!(
        stdout.contains("headless run without --approval auto"),
        "B's agent got the reason: {stdout}"
    );
}
