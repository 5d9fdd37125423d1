//! The first-run check: when the model's provider expects a key and has none, `cadre run`
//! and the line REPL say which variable to set and send nothing (the mock server that the
//! provider points at sees no request); with the key set, the same setup does call it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use cadre_testkit::{MockServer, OpenAiStream};
use cli_support::{cadre_async, text};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

/// The key variable the test's provider names; never set outside the test.
const KEY_VAR: &str = "CADRE_FIRST_RUN_TEST_KEY";

/// A workspace whose `openai` provider points at `mock` and takes its key from [`KEY_VAR`].
fn workspace(mock: &MockServer) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        format!(
            "[providers.openai]\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n",
            mock.openai_base_url()
        ),
    )
    .unwrap();
    dir
}

/// `cadre --workspace WS ARGS...` with no user configuration, nothing of the provider setup
/// from the environment, `vars` set and `stdin` as input.
async fn cadre(ws: &Path, args: &[&str], vars: &[(&str, &str)], stdin: &str) -> Output {
    let mut cmd = cadre_async(ws);
    cmd.args(args)
        .env_remove(KEY_VAR)
        .envs(vars.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("cadre started");
    let mut input = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut input, stdin.as_bytes())
        .await
        .unwrap();
    drop(input);
    tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("cadre finished within a minute")
        .expect("cadre ran")
}

#[tokio::test(flavor = "multi_thread")]
async fn run_without_a_key_exits_2_with_one_line_and_sends_nothing() {
    let mock = MockServer::start().await.unwrap();
    mock.set_default_reply(
        OpenAiStream::new()
            .role()
            .text("hello back")
            .finish("stop")
            .done()
            .into_reply(),
    );
    let ws = workspace(&mock);
    let args = ["run", "--model", "openai:gpt-4o-mini", "hello"];

    let out = cadre(ws.path(), &args, &[], "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains(KEY_VAR), "names the variable: {stderr}");
    assert!(stderr.contains("--model"), "{stderr}");
    assert!(stderr.contains("scripted:"), "the offline demo: {stderr}");
    assert_eq!(mock.request_count(), 0, "no request without a key");
    // Refused before it starts: nothing is written in the workspace (no store, no session).
    assert_eq!(
        entries(&ws.path().join(".cadre")),
        ["config.toml"],
        "{stderr}"
    );

    // The same setup with the key does call the server: the check is what held it back.
    let out = cadre(ws.path(), &args, &[(KEY_VAR, "sk-test")], "").await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("hello back"));
    assert_eq!(mock.request_count(), 1);
    let req = &mock.requests()[0];
    assert_eq!(req.header("authorization"), Some("Bearer sk-test"));
}

#[tokio::test(flavor = "multi_thread")]
async fn run_on_the_default_openai_host_without_a_key_names_openai_api_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = cadre(
        dir.path(),
        &["run", "--model", "openai:gpt-4o-mini", "hello"],
        &[],
        "",
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("set OPENAI_API_KEY"), "{stderr}");
    assert!(!stderr.contains("WARN"), "no retries: {stderr}");
    assert!(entries(dir.path()).is_empty(), "{stderr}");
}

/// The names in `dir`, sorted (none when it does not exist).
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_or_server_refused_for_its_model_writes_nothing_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["run", "--model", "no-such-provider:x", "hello"][..],
        &[
            "run",
            "--model",
            "openai:gpt-4o-mini",
            "--resume",
            "../s-x",
            "hello",
        ][..],
        &[
            "serve",
            "--model",
            "openai:gpt-4o-mini",
            "--addr",
            "127.0.0.1:0",
        ][..],
    ] {
        let out = cadre(dir.path(), args, &[], "").await;
        let stderr = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(entries(dir.path()).is_empty(), "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_line_repl_says_which_key_is_missing_and_sends_no_prompt() {
    let mock = MockServer::start().await.unwrap();
    let ws = workspace(&mock);
    let out = cadre(
        ws.path(),
        &["--model", "openai:gpt-4o-mini"],
        &[],
        "hello\n/exit\n",
    )
    .await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("Set {KEY_VAR}")),
        "the message names the variable: {stderr}"
    );
    assert!(stderr.contains("so nothing was sent"), "{stderr}");
    assert_eq!(mock.request_count(), 0, "the prompt was not sent");
}
