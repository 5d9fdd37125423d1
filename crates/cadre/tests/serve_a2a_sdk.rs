//! `cadre serve` with the official A2A Python SDK (`a2a-sdk`) as the client: the SDK reads
//! the card, authenticates with the bearer scheme it declares, and gets answers over
//! streaming and blocking sends, in v1.0 and v0.3, continues a conversation and cancels a
//! long task; the SDK of the v0.3 line reads the old card shape and gets answers too. Needs
//! the venvs of `.ci/run`; without them the tests say SKIPPED (and fail in CI).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use serve_support::*;
use std::time::Duration;

const TOKEN: &str = "sdk-interop-7d41c2";

const SCRIPT: &str = r#"
[[scripts]]
agent = "echo"
[[scripts.turns]]
text = "echo: {{user}}"
[[scripts.turns]]
text = "again: {{user}}"

[[scripts]]
agent = "slow"
[[scripts.turns]]
delay_ms = 30000
text = "too late"

[[scripts]]
agent = "builder"
[[scripts.turns]]
text = "Building."
tool_calls = [{ name = "bash", args = { command = "echo built | tee built.txt" } }]
[[scripts.turns]]
text = "builder: {{tool_results}}"
"#;

fn node() -> tempfile::TempDir {
    workspace(&[
        ("script.toml", SCRIPT),
        (
            ".cadre/agents/echo.md",
            "---\nname: echo\ndescription: Echoes the message.\n---\nYou echo.\n",
        ),
        (
            ".cadre/agents/slow.md",
            "---\nname: slow\ndescription: Takes its time.\n---\nYou are slow.\n",
        ),
        (
            ".cadre/agents/builder.md",
            "---\nname: builder\ndescription: Builds.\nworkspace: {mode: shared}\n---\nYou build.\n",
        ),
        (".cadre/config.toml", "[serve]\ndefault_agent = \"echo\"\n"),
    ])
}

fn start(ws: &tempfile::TempDir) -> Served {
    let model = format!("scripted:{}", ws.path().join("script.toml").display());
    Served::start(ws.path(), &model, &[("CADRE_SERVE_TOKEN", TOKEN)])
}

#[test]
fn the_sdk_client_gets_answers_in_both_versions_and_continues_a_context() {
    let Some(py) = venv_python() else { return };
    let ws = node();
    let mut srv = start(&ws);
    let url = srv.url.clone();
    for extra in [
        &[][..],
        &["--no-stream"][..],
        &["--v03"][..],
        &["--v03", "--no-stream"][..],
    ] {
        let mut args = vec![
            url.as_str(),
            "--token",
            TOKEN,
            "--text",
            "hello from the sdk",
        ];
        args.extend_from_slice(extra);
        let (ok, out, log) = python(&py, "a2a_client.py", &args);
        assert!(ok, "{extra:?}: {log}\nserver: {}", srv.stderr());
        assert_eq!(out["state"], "TASK_STATE_COMPLETED", "{extra:?}: {out}");
        assert_eq!(out["answer"], "echo: hello from the sdk", "{extra:?}");
        let kinds = out["kinds"].as_array().unwrap();
        if extra.contains(&"--no-stream") {
            assert_eq!(kinds.len(), 1, "{out}");
        } else {
            assert_eq!(kinds[0], "task", "{out}");
            assert!(kinds.iter().any(|k| k == "artifact_update"), "{out}");
            assert_eq!(kinds.last().unwrap(), "status_update", "{out}");
            assert_eq!(out["streamed"], "echo: hello from the sdk");
        }
    }
    // The same context continues the same child: its second scripted turn answers.
    let (_, first, _) = python(
        &py,
        "a2a_client.py",
        &[&url, "--token", TOKEN, "--agent", "echo", "--text", "one"],
    );
    let ctx = first["context_id"].as_str().unwrap().to_string();
    let (ok, second, log) = python(
        &py,
        "a2a_client.py",
        &[
            &url,
            "--token",
            TOKEN,
            "--text",
            "two",
            "--context-id",
            &ctx,
        ],
    );
    assert!(ok, "{log}");
    assert_eq!(second["answer"], "again: two", "{second}");
    assert_eq!(second["context_id"], ctx.as_str());
    // Without the token the SDK is refused.
    let (ok, out, _) = python(&py, "a2a_client.py", &[&url, "--text", "x"]);
    assert!(!ok);
    assert!(out["error"].as_str().unwrap().contains("401"), "{out}");
    assert!(srv.terminate(Duration::from_secs(20)));
}

#[test]
fn the_sdk_client_cancels_a_long_task() {
    let Some(py) = venv_python() else { return };
    let ws = node();
    let mut srv = start(&ws);
    let (ok, out, log) = python(
        &py,
        "a2a_cancel.py",
        &[&srv.url, "--token", TOKEN, "--agent", "slow"],
    );
    assert!(ok, "{log}\nserver: {}", srv.stderr());
    assert_eq!(out["started"], "TASK_STATE_WORKING", "{out}");
    assert_eq!(out["after_cancel"], "TASK_STATE_CANCELED", "{out}");
    assert_eq!(out["final"], "TASK_STATE_CANCELED", "{out}");
    assert!(out["task_id"].as_str().unwrap().starts_with("task_"));
    assert!(srv.terminate(Duration::from_secs(20)));
}

#[test]
fn the_v03_sdk_reads_the_old_card_and_gets_answers() {
    let Some(py) = venv03_python() else { return };
    let ws = node();
    let mut srv = start(&ws);
    for extra in [&[][..], &["--no-stream"][..]] {
        let mut args = vec![srv.url.as_str(), "--token", TOKEN, "--text", "from 0.3"];
        args.extend_from_slice(extra);
        let (ok, out, log) = python(&py, "a2a03_client.py", &args);
        assert!(ok, "{extra:?}: {log}\nserver: {}", srv.stderr());
        assert_eq!(out["state"], "completed", "{extra:?}: {out}");
        assert_eq!(out["answer"], "echo: from 0.3", "{extra:?}: {out}");
        assert!(out["task_id"].as_str().unwrap().starts_with("task_"));
        let kinds = out["kinds"].as_array().unwrap();
        if extra.is_empty() {
            assert!(kinds.iter().any(|k| k == "artifact-update"), "{out}");
        }
    }
    // Without the token the SDK is refused.
    let (ok, out, _) = python(&py, "a2a03_client.py", &[&srv.url, "--text", "x"]);
    assert!(!ok, "{out}");
    assert!(srv.terminate(Duration::from_secs(20)));
}

#[test]
fn the_sdk_client_answers_an_approval_by_hand() {
    let Some(py) = venv_python() else { return };
    let ws = node();
    let mut srv = start(&ws);
    let built = ws.path().join("built.txt");
    // A data part refuses it, with a reason the agent sees.
    let (ok, out, log) = python(
        &py,
        "a2a_approve.py",
        &[
            &srv.url,
            "--token",
            TOKEN,
            "--agent",
            "builder",
            "--data",
            r#"{"approve": false, "feedback": "not now"}"#,
        ],
    );
    assert!(ok, "{log}\nserver: {}", srv.stderr());
    assert_eq!(out["asked_state"], "TASK_STATE_INPUT_REQUIRED", "{out}");
    let q = out["question"].as_str().unwrap();
    assert!(q.contains("`builder`") && q.contains("echo built"), "{q}");
    assert_eq!(out["question_data"]["approval"]["tool"], "bash", "{out}");
    assert_eq!(out["same_task"], true);
    assert_eq!(out["state"], "TASK_STATE_COMPLETED", "{out}");
    assert!(
        out["answer"]
            .as_str()
            .unwrap()
            .contains("denied by the user: not now"),
        "{out}"
    );
    assert!(!built.exists());
    // A text yes lets it run.
    let (ok, out, log) = python(
        &py,
        "a2a_approve.py",
        &[
            &srv.url, "--token", TOKEN, "--agent", "builder", "--answer", "yes",
        ],
    );
    assert!(ok, "{log}");
    assert_eq!(out["state"], "TASK_STATE_COMPLETED", "{out}");
    assert!(out["answer"].as_str().unwrap().contains("built"), "{out}");
    assert!(built.exists(), "approved, the command ran");
    assert_eq!(
        out["roles"],
        serde_json::json!(["ROLE_USER", "ROLE_AGENT", "ROLE_USER", "ROLE_AGENT"]),
        "input, question, answer, result: {out}"
    );
    assert!(srv.terminate(Duration::from_secs(20)));
}
