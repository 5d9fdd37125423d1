//! `cadre` end to end: the real binary with the scripted model on a temp workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use std::path::Path;

fn cadre(ws: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cadre").unwrap();
    cmd.arg("--workspace").arg(ws);
    cmd.env_remove("CADRE_MODEL");
    cmd.env("XDG_CONFIG_HOME", ws.join(".no-user-config"));
    cmd
}

fn workspace_with_script(script: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    let path = dir.path().join("script.toml");
    std::fs::write(&path, script).unwrap();
    let model = format!("scripted:{}", path.display());
    (dir, model)
}

const READ_THEN_ANSWER: &str = r#"
[[turns]]
text = "Reading."
tool_calls = [{ name = "read_file", args = { path = "notes.txt" } }]
[[turns]]
text = "The file has three words: {{tool_results}}"
"#;

#[test]
fn version_prints_the_version() {
    let out = Command::cargo_bin("cadre")
        .unwrap()
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("cadre {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn text_run_prints_the_answer_and_progress() {
    let (dir, model) = workspace_with_script(READ_THEN_ANSWER);
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "what is in notes.txt?"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "stderr: {stderr}");
    assert!(stdout.contains("The file has three words:"), "{stdout}");
    assert!(stdout.contains("beta"), "{stdout}");
    assert!(stderr.contains("▸ read_file(notes.txt)"), "{stderr}");
    assert!(stderr.contains("— completed · 2 turns"), "{stderr}");
    assert!(stderr.contains("session: s-"), "{stderr}");
}

#[test]
fn jsonl_output_is_one_parseable_event_per_line() {
    let (dir, model) = workspace_with_script(READ_THEN_ANSWER);
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    for t in [
        "run_started",
        "turn_started",
        "text_delta",
        "tool_start",
        "tool_result",
        "usage",
        "done",
    ] {
        assert!(types.contains(&t), "missing {t} in {types:?}");
    }
    assert!(
        events
            .iter()
            .all(|e| e["agent"] == "main" && e["session_id"].as_str().unwrap().starts_with("s-"))
    );
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["state"], "completed");
    assert_eq!(done["turns"], 2);
}

#[test]
fn failures_and_limits_exit_non_zero_with_a_reason() {
    let (dir, model) = workspace_with_script("[[turns]]\nerror = \"model fell over\"\n");
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("cadre: run failed: scripted model: model fell over"),
        "{stderr}"
    );

    let (dir, model) = workspace_with_script(READ_THEN_ANSWER);
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--max-turns", "1", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("max turns reached"), "{stderr}");
    assert!(
        String::from_utf8(out.stdout).unwrap().contains("Reading."),
        "partial output shown"
    );
}

#[test]
fn mutating_tools_are_denied_headless_unless_approved() {
    let script = r#"
[[turns]]
tool_calls = [{ name = "write_file", args = { path = "out.txt", content = "hello" } }]
[[turns]]
text = "result: {{tool_results}}"
"#;
    let (dir, model) = workspace_with_script(script);
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "write it"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    // Nobody was asked: the model is told which policy refused, not that a person did.
    assert!(
        stdout.contains("result: refused by policy (headless run without --approval auto):"),
        "{stdout}"
    );
    assert!(!stdout.contains("denied by the user"), "{stdout}");
    assert!(
        stderr.contains("--approval auto"),
        "hint on stderr: {stderr}"
    );
    assert!(!dir.path().join("out.txt").exists());

    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--approval", "auto", "write it"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "hello"
    );
}

#[test]
fn a_session_resumes_with_its_history() {
    let script = r#"
[[turns]]
text = "first: {{user}}"
[[turns]]
text = "second: {{user}}"
"#;
    let (dir, model) = workspace_with_script(script);
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--output", "jsonl", "one"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let first: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    let id = first["session_id"].as_str().unwrap().to_string();
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--resume", &id, "two"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    // The scripted model picked turn 2 because the history holds the first exchange.
    assert!(stdout.contains("second: two"), "{stdout}");
    let transcript =
        std::fs::read_to_string(dir.path().join(format!(".cadre/sessions/{id}.jsonl"))).unwrap();
    assert_eq!(
        transcript.lines().count(),
        5,
        "meta + 4 messages:\n{transcript}"
    );
}

#[test]
fn bad_configuration_is_a_clear_error() {
    let (dir, model) = workspace_with_script(READ_THEN_ANSWER);
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        "[permissions]\nmode = \"sometimes\"\n",
    )
    .unwrap();
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("config.toml"), "{stderr}");
}

#[test]
fn config_file_sets_the_model_and_limits() {
    let (dir, model) = workspace_with_script(READ_THEN_ANSWER);
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        format!("model = {model:?}\n[limits]\nmax_turns = 1\n"),
    )
    .unwrap();
    let out = cadre(dir.path()).args(["run", "go"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn zero_limits_are_configuration_errors_naming_the_key() {
    for (table, key) in [
        (
            "[subagents]\nmax_concurrent = 0\n",
            "[subagents] max_concurrent",
        ),
        ("[tools]\nmax_parallel = 0\n", "[tools] max_parallel"),
        (
            "[limits]\nmax_reply_bytes = 0\n",
            "[limits] max_reply_bytes",
        ),
        ("[limits]\nmax_turns = 0\n", "[limits] max_turns"),
        (
            "[providers.local]\nbase_url = \"http://127.0.0.1:9/v1\"\nmax_attempts = 0\n",
            "[providers.local] max_attempts",
        ),
    ] {
        let (dir, model) = workspace_with_script(READ_THEN_ANSWER);
        std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
        std::fs::write(dir.path().join(".cadre/config.toml"), table).unwrap();
        let out = cadre(dir.path())
            .args(["--model", &model, "run", "go"])
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{table}: {stderr}");
        assert!(
            stderr.contains(&format!("{key} must be at least 1, not 0")),
            "{stderr}"
        );
        assert!(stderr.contains("config.toml"), "{stderr}");
    }
    // A negative value is refused by its type, naming the key too.
    let (dir, model) = workspace_with_script(READ_THEN_ANSWER);
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        "[subagents]\nmax_concurrent = -1\n",
    )
    .unwrap();
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "go"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("max_concurrent"), "{stderr}");
    std::fs::remove_file(dir.path().join(".cadre/config.toml")).unwrap();
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--max-turns", "0", "go"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--max-turns"), "{stderr}");
}
