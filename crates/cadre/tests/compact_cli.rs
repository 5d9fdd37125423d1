//! Compaction by hand, end to end: `cadre run --resume ID --compact-now[="…"]` and `/compact …`
//! in the line REPL, against a mock OpenAI server whose recorded requests show the summary
//! call (no tools, the user's instructions) and the compacted history sent after it. Both
//! run with automatic compaction off (`[compaction] enabled = false`): forcing works anyway.
//! And a sub-agent under a small configured window: it inherits the policy, compacts, and
//! its progress says so.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_testkit::{MockReply, MockServer, OpenAiJson, OpenAiStream, RecordedRequest};
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

/// The key variable the workspace's provider names.
const KEY_VAR: &str = "CADRE_COMPACT_TEST_KEY";
const MODEL: &str = "openai:gpt-4o-mini";
const INSTRUCTIONS: &str = "keep the API decisions";

/// A first prompt long enough that summarising it saves tokens.
fn first_question() -> String {
    format!("first question:{}", " background detail".repeat(200))
}

fn is_summary(r: &RecordedRequest) -> bool {
    r.body.get("tools").is_none()
}

/// Summary requests get a summary naming what they were asked to keep; the others an
/// answer naming the last user message.
fn responder() -> cadre_testkit::Responder {
    Arc::new(|r: &RecordedRequest| {
        let text = if is_summary(r) {
            "SUMMARY: the user chose REST for the API.".to_string()
        } else {
            let last = user_texts(r).pop().unwrap_or_default();
            format!("answer to {last}")
        };
        MockReply::by_stream(
            OpenAiStream::new()
                .role()
                .text(&text)
                .finish("stop")
                .usage(100, 10, 0)
                .done()
                .into_reply(),
            OpenAiJson::new().text(&text).usage(100, 10, 0).into_reply(),
        )
    })
}

fn user_texts(r: &RecordedRequest) -> Vec<String> {
    r.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A workspace whose `openai` provider is `mock`, with automatic compaction off, one turn
/// kept verbatim, and `extra` in `[compaction]`.
fn workspace(mock: &MockServer, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        format!(
            "[providers.openai]\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\
             [compaction]\nenabled = false\nkeep_recent_turns = 1\n{extra}",
            mock.openai_base_url()
        ),
    )
    .unwrap();
    dir
}

fn cadre(ws: &Path) -> Command {
    cadre_with(ws, MODEL)
}

/// `cadre --workspace WS --model MODEL`, with the mock's key and no user config.
fn cadre_with(ws: &Path, model: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.env_remove("CADRE_MODEL")
        .env("XDG_CONFIG_HOME", ws.join("nocfg"))
        .env(KEY_VAR, "sk-test")
        .arg("--workspace")
        .arg(ws)
        .arg("--model")
        .arg(model);
    cmd
}

/// `cadre run --output jsonl PROMPT` on `openai:main-model`, which must succeed: its events
/// and its stdout.
fn run_main_model_jsonl(ws: &Path, prompt: &str) -> (Vec<Value>, String) {
    let out = cadre_with(ws, "openai:main-model")
        .args(["run", "--output", "jsonl", prompt])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    let events = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (events, stdout)
}

/// A 100-line `big.txt` in `ws`, for the children to read.
fn write_big_txt(ws: &Path) {
    let lines: String = (1..=100)
        .map(|i| format!("line {i:03} of big.txt here\n"))
        .collect();
    std::fs::write(ws.join("big.txt"), &lines).unwrap();
}

/// Run the first question, then a second turn resumed in the same session; its id.
fn two_turn_session(ws: &Path) -> String {
    let first = run(ws, &[&first_question()]);
    let stderr = text(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    let id = stderr
        .split("session: ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .to_string();
    let second = run(ws, &["--resume", &id, "second question"]);
    assert!(second.status.success(), "{}", text(&second.stderr));
    id
}

fn run(ws: &Path, args: &[&str]) -> Output {
    cadre(ws)
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The summary request asks for the instructions and sees the old turn; the request after
/// it starts with the summary and no longer carries the old turn.
fn assert_compacted_around(summary: &RecordedRequest, next: &RecordedRequest, old: &str) {
    assert!(is_summary(summary), "{}", summary.body);
    let system = summary.body["messages"][0]["content"].as_str().unwrap();
    assert!(system.ends_with(INSTRUCTIONS), "{system}");
    assert!(user_texts(summary)[0].contains(old), "{}", summary.body);
    assert!(!is_summary(next));
    let sent = user_texts(next);
    assert!(
        sent[0].starts_with("<conversation-summary>") && sent[0].contains("chose REST"),
        "{sent:?}"
    );
    assert!(!sent.iter().any(|t| t == old), "{sent:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn run_compact_now_compacts_the_resumed_session_before_the_new_prompt() {
    let mock = MockServer::start().await.unwrap();
    mock.set_responder(responder());
    let ws = workspace(&mock, "");
    let id = two_turn_session(ws.path());

    // Without --resume there is nothing to compact: refused before anything is sent.
    mock.clear_requests();
    let with_instructions = format!("--compact-now={INSTRUCTIONS}");
    let refused = run(ws.path(), &[&with_instructions, "a prompt"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    assert!(text(&refused.stderr).contains("--resume"));
    assert!(mock.requests().is_empty());

    let third = run(
        ws.path(),
        &[
            "--resume",
            &id,
            "--output",
            "jsonl",
            &with_instructions,
            "third question",
        ],
    );
    let stdout = text(&third.stdout);
    assert!(third.status.success(), "{}", text(&third.stderr));
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let compaction = events
        .iter()
        .find(|e| e["type"] == "compaction")
        .unwrap_or_else(|| panic!("no compaction event: {stdout}"));
    assert_eq!(compaction["model"], MODEL);
    assert_eq!(compaction["replaced_messages"], 2);
    let (before, after) = (
        compaction["tokens_before"].as_u64().unwrap(),
        compaction["tokens_after"].as_u64().unwrap(),
    );
    assert!(after < before, "{compaction}");
    // The compaction comes before the new prompt's first turn.
    let at = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    assert!(at(&|e| e["type"] == "compaction") < at(&|e| e["type"] == "turn_started"));

    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "summary, then the prompt's one call");
    assert_compacted_around(&requests[0], &requests[1], &first_question());
    assert_eq!(
        user_texts(&requests[1])[1..],
        ["second question", "third question"]
    );

    // The compacted state is what a later resume sends; the original stays on file.
    mock.clear_requests();
    let fourth = run(ws.path(), &["--resume", &id, "fourth question"]);
    assert!(fourth.status.success(), "{}", text(&fourth.stderr));
    let sent = user_texts(&mock.requests()[0]);
    assert!(sent[0].starts_with("<conversation-summary>"), "{sent:?}");
    assert!(!sent.iter().any(|t| t.starts_with("first question")));
    let transcript =
        std::fs::read_to_string(ws.path().join(format!(".cadre/sessions/{id}.jsonl"))).unwrap();
    assert!(transcript.contains("first question"));
}

#[tokio::test(flavor = "multi_thread")]
async fn run_compact_now_followed_by_a_word_takes_it_as_the_prompt() {
    let mock = MockServer::start().await.unwrap();
    mock.set_responder(responder());
    let ws = workspace(&mock, "");
    let id = two_turn_session(ws.path());
    mock.clear_requests();
    // As `/compact` alone: compact without instructions, then run the prompt.
    let third = run(
        ws.path(),
        &["--resume", &id, "--compact-now", "third question"],
    );
    assert!(third.status.success(), "{}", text(&third.stderr));
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "summary, then the prompt's one call");
    assert!(is_summary(&requests[0]), "{}", requests[0].body);
    let system = requests[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(!system.contains("third question"), "{system}");
    assert!(
        user_texts(&requests[1])
            .last()
            .is_some_and(|t| t == "third question"),
        "{}",
        requests[1].body
    );
    assert!(text(&third.stdout).contains("answer to third question"));
    // Two words after it: instructions need `=`, so the second is one prompt too many.
    mock.clear_requests();
    let two = run(
        ws.path(),
        &[
            "--resume",
            &id,
            "--compact-now",
            INSTRUCTIONS,
            "fourth question",
        ],
    );
    assert_eq!(two.status.code(), Some(2), "{}", text(&two.stderr));
    assert!(mock.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn repl_compact_with_instructions_compacts_even_with_automatic_compaction_off() {
    let mock = MockServer::start().await.unwrap();
    mock.set_responder(responder());
    // The summary is written by `[compaction] model`, not the session's model.
    let ws = workspace(&mock, "model = \"openai:summariser\"\n");
    let mut child = cadre(ws.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first /compact has nothing older than the kept turn: it says so, sends nothing.
    let input = format!(
        "/compact\n{}\nsecond question\n/compact {INSTRUCTIONS}\nthird question\n/exit\n",
        first_question()
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("cadre: /compact: nothing to compact"),
        "{stderr}"
    );
    assert!(
        stderr.contains("⇣ compacted: 2 messages summarised by openai:summariser, about"),
        "{stderr}"
    );
    assert!(stdout.contains("answer to third question"), "{stdout}");

    let requests = mock.requests();
    let kinds: Vec<bool> = requests.iter().map(is_summary).collect();
    assert_eq!(kinds, [false, false, true, false], "{requests:?}");
    assert_compacted_around(&requests[2], &requests[3], &first_question());
    assert_eq!(requests[2].body["model"], "summariser");
    assert_eq!(requests[3].body["model"], "gpt-4o-mini");
    assert_eq!(
        user_texts(&requests[3])[1..],
        ["second question", "third question"]
    );
}

/// Every tool message of a recorded request answers a call before it, and every call is
/// answered.
fn assert_pairs_intact(r: &RecordedRequest) {
    let mut open: Vec<String> = Vec::new();
    for m in r.body["messages"].as_array().unwrap() {
        match m["role"].as_str().unwrap() {
            "assistant" => {
                assert!(open.is_empty(), "calls without results before {m}");
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    open.push(c["id"].as_str().unwrap().to_string());
                }
            }
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap();
                assert!(
                    open.contains(&id.to_string()),
                    "a result without its call: {id}"
                );
                open.retain(|o| o != id);
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "calls without results: {open:?}");
}

/// The worker's window: small enough that four reads of `big.txt` overflow it.
const CHILD_WINDOW: u64 = 4_000;
/// Reads of `big.txt` the worker makes before it answers.
const CHILD_READS: usize = 4;

#[tokio::test(flavor = "multi_thread")]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
async fn a_child_under_a_small_window_compacts_and_its_progress_says_so() {
    let mock = MockServer::start().await.unwrap();
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    mock.set_responder(Arc::new(move |r: &RecordedRequest| {
        // Usage as a provider counts it (about four bytes a token), so the meter is real.
        let prompt = (r.raw.len() / 4) as u64;
        let reply = if is_summary(r) {
            OpenAiJson::new().text("SUMMARY: the worker read big.txt, which lists lines.")
        } else if r.body["model"] == "small-model" {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            if n <= CHILD_READS {
                OpenAiJson::new().tool_call(
                    &format!("call_w{n}"),
                    "read_file",
                    r#"{"path":"big.txt"}"#,
                )
            } else {
                OpenAiJson::new().text("worker finished: big.txt lists its lines")
            }
        } else if r.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool")
        {
            OpenAiJson::new().text("main done")
        } else {
            OpenAiJson::new().tool_call(
                "call_m1",
                "task",
                r#"{"subagent_type":"worker","description":"read","prompt":"Read big.txt four times."}"#,
            )
        };
        let reply = reply.usage(prompt, 20, 0);
        let text = reply.to_json();
        // Streaming requests get the same reply as one SSE chunk stream.
        let choice = &text["choices"][0];
        let mut s = OpenAiStream::new().role();
        if let Some(t) = choice["message"]["content"].as_str() {
            s = s.text(t);
        }
        for (i, c) in choice["message"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            s = s.tool_call(
                i,
                c["id"].as_str().unwrap(),
                c["function"]["name"].as_str().unwrap(),
                c["function"]["arguments"].as_str().unwrap(),
            );
        }
        let finish = choice["finish_reason"].as_str().unwrap();
        MockReply::by_stream(
            s.finish(finish).usage(prompt, 20, 0).done().into_reply(),
            reply.into_reply(),
        )
    }));
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(
        ws.join(".cadre/config.toml"),
        format!(
            "[providers.openai]\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\
             [compaction]\nkeep_recent_turns = 1\n\
             [models.context_windows]\n\"openai:small-model\" = {CHILD_WINDOW}\n",
            mock.openai_base_url()
        ),
    )
    .unwrap();
    std::fs::write(
        ws.join(".cadre/agents/worker.md"),
        "---\nname: worker\ndescription: Reads files.\ntools: [read_file]\n\
         model: openai:small-model\nmax_turns: 10\n---\nYou are the worker.\n",
    )
    .unwrap();
    write_big_txt(ws);

    let (events, stdout) = run_main_model_jsonl(ws, "delegate the reading");
    // The child's compaction is a progress update of its task.
    let progress: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "subagent_update" && e["update"]["kind"] == "compaction")
        .collect();
    assert!(!progress.is_empty(), "no compaction progress: {stdout}");
    for p in &progress {
        assert_eq!(p["update"]["agent"], "worker", "{p}");
        let line = p["update"]["text"].as_str().unwrap();
        assert!(
            line.contains("messages summarised by openai:small-model"),
            "{line}"
        );
    }
    // The main model's window is unknown: said once, at the start; the child's is known.
    let unknown: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["type"] == "notice"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("context window of"))
        })
        .collect();
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert!(
        unknown[0]["message"]
            .as_str()
            .unwrap()
            .contains("openai:main-model")
    );

    let requests = mock.requests();
    let summaries: Vec<&RecordedRequest> = requests.iter().filter(|r| is_summary(r)).collect();
    assert_eq!(summaries.len(), progress.len());
    assert!(summaries.iter().all(|r| r.body["model"] == "small-model"));
    let worker: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| !is_summary(r) && r.body["model"] == "small-model")
        .collect();
    assert_eq!(worker.len(), CHILD_READS + 1);
    for r in &worker {
        assert!(
            (r.raw.len() as u64) / 4 <= CHILD_WINDOW,
            "a worker request of {} bytes",
            r.raw.len()
        );
        assert_pairs_intact(r);
    }
    // After the summary the worker's request opens with it and no longer carries its first read.
    let first = requests.iter().position(is_summary).unwrap();
    let after = &requests[first + 1];
    assert_eq!(after.body["model"], "small-model");
    let sent = user_texts(after);
    assert!(sent[0].starts_with("<conversation-summary>"), "{sent:?}");
    assert!(!after.raw.windows(7).any(|w| w == b"call_w1"));
    // The child's answer reached the main agent.
    let last = requests.last().unwrap();
    assert_eq!(last.body["model"], "main-model");
    assert!(
        String::from_utf8_lossy(&last.raw).contains("worker finished"),
        "{}",
        last.body
    );
}

/// The main model's window in the long session: its fixed part (system prompt and the
/// built-in tools) is about 3 600 tokens, so a few reads overflow it.
const MAIN_WINDOW: u64 = 8_000;
/// Main-agent turns that read a file before the final answer.
const MAIN_STEPS: usize = 12;
/// Background workers the main agent starts at its first turn.
const WORKERS: usize = 3;

/// The `RESULT-n` tokens of a text, in order of first appearance.
fn results_in(text: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for part in text.split("RESULT-").skip(1) {
        let n: String = part.chars().take_while(char::is_ascii_digit).collect();
        let token = format!("RESULT-{n}");
        if !n.is_empty() && !seen.contains(&token) {
            seen.push(token);
        }
    }
    seen.sort();
    seen
}

/// `reply` as the request asked for it (streamed or not), with usage as a provider counts it.
fn as_reply(r: &RecordedRequest, reply: OpenAiJson) -> MockReply {
    let prompt = (r.raw.len() / 4) as u64;
    let json = reply.usage(prompt, 20, 0).to_json();
    let choice = &json["choices"][0];
    let mut s = OpenAiStream::new().role();
    if let Some(t) = choice["message"]["content"].as_str() {
        s = s.text(t);
    }
    for (i, c) in choice["message"]["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        s = s.tool_call(
            i,
            c["id"].as_str().unwrap(),
            c["function"]["name"].as_str().unwrap(),
            c["function"]["arguments"].as_str().unwrap(),
        );
    }
    let finish = choice["finish_reason"].as_str().unwrap();
    MockReply::by_stream(
        s.finish(finish).usage(prompt, 20, 0).done().into_reply(),
        MockReply::json(&json),
    )
}

#[tokio::test(flavor = "multi_thread")]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
async fn a_long_session_with_background_results_is_compacted_and_keeps_them() {
    let mock = MockServer::start().await.unwrap();
    let turn = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    mock.set_responder(Arc::new(move |r: &RecordedRequest| {
        let body = String::from_utf8_lossy(&r.raw).to_string();
        if is_summary(r) {
            // The summary keeps the sub-agent results it sees.
            let text = format!("Goal: the steps. Sub-agent tasks: {}.", results_in(&body).join(", "));
            return as_reply(r, OpenAiJson::new().text(&text));
        }
        if r.body["model"] == "worker-model" {
            let prompt = user_texts(r).pop().unwrap_or_default();
            let k: String = prompt.chars().filter(char::is_ascii_digit).collect();
            return as_reply(r, OpenAiJson::new().text(&format!("RESULT-{k}")));
        }
        let n = turn.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let reply = if n == 1 {
            (1..=WORKERS).fold(OpenAiJson::new(), |j, k| {
                let args = format!(
                    r#"{{"subagent_type":"worker","description":"job {k}","prompt":"job {k}","background":true}}"#
                );
                j.tool_call(&format!("call_t{k}"), "task", &args)
            })
        } else if n <= MAIN_STEPS {
            OpenAiJson::new()
                .text(&format!("step {n}"))
                .tool_call(&format!("call_r{n}"), "read_file", r#"{"path":"big.txt"}"#)
        } else {
            OpenAiJson::new().text(&format!("final: {}", results_in(&body).join(" ")))
        };
        as_reply(r, reply)
    }));
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(
        ws.join(".cadre/config.toml"),
        format!(
            "[providers.openai]\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\
             [compaction]\nkeep_recent_turns = 2\n\
             [models.context_windows]\n\"openai:main-model\" = {MAIN_WINDOW}\n",
            mock.openai_base_url()
        ),
    )
    .unwrap();
    std::fs::write(
        ws.join(".cadre/agents/worker.md"),
        "---\nname: worker\ndescription: Does a job.\ntools: [read_file]\n\
         model: openai:worker-model\n---\nYou are the worker.\n",
    )
    .unwrap();
    write_big_txt(ws);

    let (events, stdout) = run_main_model_jsonl(ws, "run the steps");
    let compactions: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "compaction" && e["agent"] == "main")
        .collect();
    assert!(!compactions.is_empty(), "no compaction: {stdout}");
    for c in &compactions {
        assert_eq!(c["model"], "openai:main-model");
        assert!(
            c["tokens_after"].as_u64() < c["tokens_before"].as_u64(),
            "{c}"
        );
    }
    // Every worker's result reaches the final answer, those summarised away included.
    let all: Vec<String> = (1..=WORKERS).map(|k| format!("RESULT-{k}")).collect();
    let done = events
        .iter()
        .rfind(|e| e["type"] == "done" && e["agent"] == "main")
        .unwrap();
    assert_eq!(
        done["output"],
        format!("final: {}", all.join(" ")),
        "{done}"
    );

    let requests = mock.requests();
    let main: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| !is_summary(r) && r.body["model"] == "main-model")
        .collect();
    assert!(main.len() > MAIN_STEPS, "{}", main.len());
    for r in &main {
        assert!(
            (r.raw.len() as u64) / 4 <= MAIN_WINDOW,
            "a main request of {} bytes",
            r.raw.len()
        );
        assert_pairs_intact(r);
    }
    // Around the first compaction: the request before carries the first read and the
    // background results; the summary request has no tools; the one after opens with the
    // summary (which names the results), no longer carries the first read, and has the
    // current background-task status again.
    let first = requests.iter().position(is_summary).unwrap();
    let before = requests[..first]
        .iter()
        .rfind(|r| r.body["model"] == "main-model")
        .unwrap();
    let after = requests[first + 1..]
        .iter()
        .find(|r| r.body["model"] == "main-model")
        .unwrap();
    let raw = |r: &RecordedRequest| String::from_utf8_lossy(&r.raw).to_string();
    assert!(raw(before).contains("call_r2"), "the first read was sent");
    // The workers answer at once; the first compaction comes turns later.
    let seen_before = results_in(&raw(before));
    assert!(
        !seen_before.is_empty(),
        "results arrived before the compaction"
    );
    assert_eq!(before.body["messages"][0], after.body["messages"][0]);
    assert_eq!(before.body["tools"], after.body["tools"]);
    let sent = user_texts(after);
    assert!(sent[0].starts_with("<conversation-summary>"), "{sent:?}");
    let seen_after = results_in(&raw(after));
    assert!(
        seen_before.iter().all(|r| seen_after.contains(r)),
        "{seen_before:?} kept in {sent:?}"
    );
    assert!(!raw(after).contains("call_r2"));
    assert!(
        sent.iter().any(|t| t.starts_with("<background-tasks>")),
        "the task status is appended again: {sent:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compacted_session_is_listed_by_its_first_prompt_not_the_summary() {
    let mock = MockServer::start().await.unwrap();
    mock.set_responder(responder());
    let ws = workspace(&mock, "");
    let id = two_turn_session(ws.path());
    let third = run(
        ws.path(),
        &["--resume", &id, "--compact-now", "third question"],
    );
    assert!(third.status.success(), "{}", text(&third.stderr));

    // The line REPL's /resume lists each saved session with its title.
    let mut repl = cadre(ws.path())
        .arg("--no-tui")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    repl.stdin
        .take()
        .unwrap()
        .write_all(b"/resume\n/exit\n")
        .unwrap();
    let out = repl.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} not listed: {stdout}"));
    assert!(line.contains("first question:"), "{line}");
    assert!(!line.contains("conversation-summary"), "{line}");
}
