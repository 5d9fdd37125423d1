//! Compaction by hand, end to end: `cadre run --resume ID --compact-now "…"` and `/compact …`
//! in the line REPL, against a mock OpenAI server whose recorded requests show the summary
//! call (no tools, the user's instructions) and the compacted history sent after it. Both
//! run with automatic compaction off (`[compaction] enabled = false`): forcing works anyway.
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

/// A workspace whose `openai` provider is `mock`, with automatic compaction off and one
/// turn kept verbatim.
fn workspace(mock: &MockServer) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        format!(
            "[providers.openai]\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\
             [compaction]\nenabled = false\nkeep_recent_turns = 1\n",
            mock.openai_base_url()
        ),
    )
    .unwrap();
    dir
}

fn cadre(ws: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.env_remove("CADRE_MODEL")
        .env("XDG_CONFIG_HOME", ws.join("nocfg"))
        .env(KEY_VAR, "sk-test")
        .arg("--workspace")
        .arg(ws)
        .arg("--model")
        .arg(MODEL);
    cmd
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
    let ws = workspace(&mock);
    let first = run(ws.path(), &[&first_question()]);
    let stderr = text(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    let id = stderr
        .split("session: ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .to_string();
    let second = run(ws.path(), &["--resume", &id, "second question"]);
    assert!(second.status.success(), "{}", text(&second.stderr));

    // Without --resume there is nothing to compact: refused before anything is sent.
    mock.clear_requests();
    let refused = run(ws.path(), &["--compact-now", INSTRUCTIONS, "a prompt"]);
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
            "--compact-now",
            INSTRUCTIONS,
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
async fn repl_compact_with_instructions_compacts_even_with_automatic_compaction_off() {
    let mock = MockServer::start().await.unwrap();
    mock.set_responder(responder());
    let ws = workspace(&mock);
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
        stderr.contains(&format!(
            "⇣ compacted: 2 messages summarised by {MODEL}, about"
        )),
        "{stderr}"
    );
    assert!(stdout.contains("answer to third question"), "{stdout}");

    let requests = mock.requests();
    let kinds: Vec<bool> = requests.iter().map(is_summary).collect();
    assert_eq!(kinds, [false, false, true, false], "{requests:?}");
    assert_compacted_around(&requests[2], &requests[3], &first_question());
    assert_eq!(
        user_texts(&requests[3])[1..],
        ["second question", "third question"]
    );
}
