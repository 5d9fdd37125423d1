//! Write-ahead of the parent's turns, end to end: `cadre run` SIGKILLed while a foreground
//! child works, then `--resume`, takes that child's end as its `task` call's result and never
//! delegates the job again; a final reply given while the run waits for a background child
//! is in the session when the run is killed during the wait.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The parent delegates one job in the foreground and then says what it got; the child
/// appends one line to `side.txt` (the side effect that must happen once), then thinks for a
/// while (the window in which the parent is killed).
const DELEGATE: &str = r#"
[[scripts]]
agent = "main"
prompt_contains = "delegate"
[[scripts.turns]]
tool_calls = [{ id = "call_writer", name = "task", args = { subagent_type = "writer", description = "write once", prompt = "append the line" } }]
[[scripts.turns]]
text = "parent saw: {{tool_results}}"

[[scripts]]
agent = "main"
prompt_contains = "final"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "sleeper", description = "sleepy job", prompt = "sleep", background = true } }]
[[scripts.turns]]
text = "the final answer, given while waiting"
[[scripts.turns]]
text = "the third turn"

[[scripts]]
agent = "main"
prompt_contains = "spend"
[[scripts.turns]]
tool_calls = [{ id = "call_spender", name = "task", args = { subagent_type = "spender", description = "spend", prompt = "spend tokens" } }]
[[scripts.turns]]
text = "parent saw: {{tool_results}}"

[[scripts]]
agent = "spender"
[[scripts.turns]]
usage = { input_tokens = 3000, output_tokens = 300 }
tool_calls = [{ name = "bash", args = { command = "echo spent >> side.txt" } }]
[[scripts.turns]]
delay_ms = 1500
text = "child spent"

[[scripts]]
agent = "writer"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { command = "echo once >> side.txt" } }]
[[scripts.turns]]
delay_ms = 1500
text = "child wrote the line"

[[scripts]]
agent = "sleeper"
[[scripts.turns]]
delay_ms = 60000
text = "woke up"
"#;

const WRITER: &str =
    "---\nname: writer\ndescription: Writes.\nworkspace: {mode: shared}\n---\nYou write.\n";
const SPENDER: &str =
    "---\nname: spender\ndescription: Spends.\nworkspace: {mode: shared}\n---\nYou spend.\n";
const SLEEPER: &str =
    "---\nname: sleeper\ndescription: Sleeps.\nworkspace: {mode: shared}\n---\nYou sleep.\n";

/// How long any awaited condition may take.
const DEADLINE: Duration = Duration::from_secs(30);

fn workspace(on_orphan: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join(".cadre/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("writer.md"), WRITER).unwrap();
    std::fs::write(agents.join("sleeper.md"), SLEEPER).unwrap();
    std::fs::write(agents.join("spender.md"), SPENDER).unwrap();
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        format!(
            "[permissions]\nmode = \"auto-approve\"\n\n[subagents]\non_orphan = \"{on_orphan}\"\n"
        ),
    )
    .unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, DELEGATE).unwrap();
    (dir, format!("scripted:{}", script.display()))
}

fn cadre(ws: &Path, model: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.arg("--workspace").arg(ws).arg("--model").arg(model);
    cmd.env_remove("CADRE_MODEL").env_remove("CADRE_STORE_URL");
    cmd.env("XDG_CONFIG_HOME", ws.join("nocfg"));
    cmd
}

/// A `cadre run --output jsonl` in the background, its events read as they come.
struct Running {
    child: Child,
    events: mpsc::Receiver<Value>,
}

impl Running {
    fn start(ws: &Path, model: &str, prompt: &str) -> Self {
        Self::spawn(cadre(ws, model).args(["run", "--output", "jsonl", prompt]))
    }

    fn spawn(cmd: &mut Command) -> Self {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        Self { child, events }
    }

    /// The session id, from the first event.
    fn session_id(&self) -> String {
        let event = self.events.recv_timeout(DEADLINE).unwrap();
        event["session_id"].as_str().unwrap().to_string()
    }

    /// SIGKILL, after checking the run had not ended by itself.
    fn kill(mut self) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the run ended before it was killed"
        );
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// Wait until `cond` holds, at most [`DEADLINE`].
fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    cadre_testkit::wait_until(what, DEADLINE, cond);
}

/// `cadre run --resume ID PROMPT --output jsonl`: its `done` event.
fn resume(ws: &Path, model: &str, id: &str, prompt: &str) -> Value {
    let out = cadre(ws, model)
        .args(["run", "--output", "jsonl", "--resume", id, prompt])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|e| e["type"] == "done" && e["agent"] == "main")
        .unwrap_or_else(|| panic!("no done event: {stdout}"))
}

fn tasks(ws: &Path, model: &str) -> Vec<Value> {
    let out = cadre(ws, model)
        .args(["tasks", "list", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The messages of session `id`'s transcript, as recorded (compactions aside).
fn transcript_messages(ws: &Path, id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(ws.join(format!(".cadre/sessions/{id}.jsonl"))).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "message")
        .map(|r| r["message"].clone())
        .collect()
}

/// Kill the parent while its foreground child (of policy `on_orphan`) runs, after the
/// child's side effect; resume; the resumed run's `done` and the session id.
fn kill_mid_child_then_resume(ws: &Path, model: &str) -> (Value, String) {
    let run = Running::start(ws, model, "delegate the job");
    let id = run.session_id();
    let side = ws.join("side.txt");
    wait_until("the child's side effect", || {
        std::fs::read_to_string(&side).is_ok_and(|s| s == "once\n")
    });
    run.kill();
    (resume(ws, model, &id, "carry on"), id)
}

/// The one task of the run, and the transcript's results of the `task` call.
fn one_task_and_its_results(ws: &Path, model: &str, id: &str) -> (Value, Vec<String>) {
    let all = tasks(ws, model);
    assert_eq!(all.len(), 1, "one child for the one call: {all:?}");
    let task = all[0].clone();
    assert_eq!(task["parent_call_id"], "call_writer", "{task}");
    let results: Vec<String> = transcript_messages(ws, id)
        .iter()
        .filter(|m| m["role"] == "tool" && m["tool_call_id"] == "call_writer")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    (task, results)
}

#[test]
fn a_parent_killed_during_a_resumable_foreground_child_takes_its_end_on_resume() {
    let (dir, model) = workspace("resume");
    let ws = dir.path();
    let (done, id) = kill_mid_child_then_resume(ws, &model);
    assert_eq!(
        std::fs::read_to_string(ws.join("side.txt")).unwrap(),
        "once\n",
        "the side effect ran once"
    );
    // The parent's next request held the child's end as the `task` call's result.
    let output = done["output"].as_str().unwrap();
    assert!(
        output.starts_with("parent saw: <task state=\"completed\"")
            && output.contains("child wrote the line"),
        "{done}"
    );
    assert_eq!(done["state"], "completed", "{done}");
    let (task, results) = one_task_and_its_results(ws, &model, &id);
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["resumes"], 1, "adopted once: {task}");
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].contains("child wrote the line"), "{results:?}");
}

#[test]
fn a_parent_killed_during_a_failing_foreground_child_reads_the_failure_once() {
    let (dir, model) = workspace("fail");
    let ws = dir.path();
    let (done, id) = kill_mid_child_then_resume(ws, &model);
    assert_eq!(
        std::fs::read_to_string(ws.join("side.txt")).unwrap(),
        "once\n"
    );
    let output = done["output"].as_str().unwrap();
    assert!(
        output.starts_with("parent saw: <task state=\"failed\"")
            && output.contains("executor died"),
        "{done}"
    );
    let (task, results) = one_task_and_its_results(ws, &model, &id);
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(results.len(), 1, "{results:?}");
    // Read once: as the call's result, and in no other message the model was given (its
    // own reply quotes it).
    let mentions = transcript_messages(ws, &id)
        .iter()
        .filter(|m| m["role"] != "assistant" && m.to_string().contains("executor died"))
        .count();
    assert_eq!(mentions, 1);
}

#[test]
fn a_final_reply_given_while_waiting_for_a_background_child_survives_a_kill() {
    let (dir, model) = workspace("fail");
    let ws = dir.path();
    let run = Running::start(ws, &model, "the final job");
    let id = run.session_id();
    let final_reply = "the final answer, given while waiting";
    wait_until("the final reply in the session file", || {
        let path = ws.join(format!(".cadre/sessions/{id}.jsonl"));
        std::fs::read_to_string(path).is_ok_and(|t| t.contains(final_reply))
    });
    // The run is waiting for its background child when it is killed.
    assert!(
        tasks(ws, &model).iter().any(|t| t["status"] == "running"),
        "the background child runs"
    );
    run.kill();
    let done = resume(ws, &model, &id, "again");
    // The resumed conversation holds both replies: the script plays its third turn.
    assert_eq!(done["output"], "the third turn", "{done}");
    let replies: Vec<Value> = transcript_messages(ws, &id)
        .into_iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert!(
        replies
            .iter()
            .any(|m| m["content"].as_str() == Some(final_reply)),
        "{replies:?}"
    );
}

#[test]
fn an_adopted_childs_usage_counts_in_the_resumed_runs_totals_and_budget() {
    let (dir, model) = workspace("resume");
    let ws = dir.path();
    let run = Running::start(ws, &model, "spend it");
    let id = run.session_id();
    wait_until("the child's side effect", || {
        std::fs::read_to_string(ws.join("side.txt")).is_ok_and(|s| s == "spent\n")
    });
    run.kill();
    // The resumed run may spend 1500 tokens; the child it adopts has spent 3300.
    let config = ws.join(".cadre/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[limits]\nmax_tokens = 1500\n");
    std::fs::write(&config, text).unwrap();
    let out = cadre(ws, &model)
        .args(["run", "--output", "jsonl", "--resume", &id, "carry on"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    let done = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|e| e["type"] == "done" && e["agent"] == "main")
        .unwrap_or_else(|| panic!("no done event: {stdout}"));
    assert_eq!(done["state"], "limit_reached", "{done}");
    let tokens =
        |u: &Value| u["input_tokens"].as_u64().unwrap() + u["output_tokens"].as_u64().unwrap();
    assert!(tokens(&done["usage"]) >= 3300, "{done}");
    // The child's side effect was not repeated.
    assert_eq!(
        std::fs::read_to_string(ws.join("side.txt")).unwrap(),
        "spent\n"
    );
}

/// The spans of an `--trace-file`, as (name, trace id, parent span id) in hex.
fn trace_spans(file: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        for rs in v["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for span in ss["spans"].as_array().into_iter().flatten() {
                    let field = |k: &str| span[k].as_str().unwrap_or_default().to_string();
                    out.push((field("name"), field("traceId"), field("parentSpanId")));
                }
            }
        }
    }
    out
}

#[test]
fn a_child_adopted_on_resume_continues_the_trace_it_was_started_in() {
    let (dir, model) = workspace("resume");
    let ws = dir.path();
    // The first run's trace is the caller's, so it is known without its spans (a killed
    // process exports none of those still open).
    let first_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let run = Running::spawn(
        cadre(ws, &model)
            .args(["run", "--output", "jsonl", "--trace-file"])
            .arg(ws.join("first.jsonl"))
            .arg("delegate the job")
            .env(
                "TRACEPARENT",
                format!("00-{first_trace}-00f067aa0ba902b7-01"),
            ),
    );
    let id = run.session_id();
    wait_until("the child's side effect", || {
        std::fs::read_to_string(ws.join("side.txt")).is_ok_and(|s| s == "once\n")
    });
    run.kill();
    let second = ws.join("second.jsonl");
    let out = cadre(ws, &model)
        .args(["run", "--resume", &id, "--trace-file"])
        .arg(&second)
        .arg("carry on")
        .env_remove("TRACEPARENT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = trace_spans(&second);
    let main = spans.iter().find(|s| s.0 == "invoke_agent main").unwrap();
    assert_ne!(main.1, first_trace, "the resumed run is a trace of its own");
    let writer = spans
        .iter()
        .find(|s| s.0 == "invoke_agent writer")
        .unwrap_or_else(|| panic!("no adopted child span: {spans:?}"));
    assert_eq!(
        writer.1, first_trace,
        "the adopted child stays in its trace: {spans:?}"
    );
    // Under the span it was started under (the first run's `task` call), not a new root.
    assert!(
        !writer.2.is_empty() && writer.2 != "00f067aa0ba902b7",
        "{writer:?}"
    );
    // Its own calls are in that trace too.
    assert!(
        spans
            .iter()
            .filter(|s| s.1 == first_trace)
            .any(|s| s.0.starts_with("chat ")),
        "{spans:?}"
    );
}
