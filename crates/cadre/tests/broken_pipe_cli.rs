//! Commands whose reader closes stdout early (`cadre tasks list | head`, `cadre run … | head -1`)
//! end quietly with success, not with a panic on the broken pipe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

mod cli_support;

/// `cadre --workspace WS --model MODEL` with the environment every CLI test clears (a
/// `std` command, whose stdout can be any pipe).
fn cadre(ws: &Path, model: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.arg("--workspace").arg(ws).arg("--model").arg(model);
    for var in cli_support::SETUP_VARS {
        cmd.env_remove(var);
    }
    cmd.env("XDG_CONFIG_HOME", ws.join(".no-user-config"));
    cmd
}

/// Runs `cmd` with stdout on a pipe whose reading end is already closed, so its first write
/// fails with EPIPE whatever the timing.
fn with_closed_stdout(cmd: &mut Command) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    cmd.stdout(writer).output().unwrap()
}

#[test]
fn tasks_list_and_show_into_a_closed_pipe_end_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(
        ws.join(".cadre/agents/counter.md"),
        "---\nname: counter\ndescription: Counts.\nworkspace: {mode: shared}\n---\nYou count.\n",
    )
    .unwrap();
    let script = ws.join("script.toml");
    std::fs::write(
        &script,
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "counter", description = "count", prompt = "count" } }]
[[scripts.turns]]
text = "done"

[[scripts]]
agent = "counter"
[[scripts.turns]]
text = "42"
"#,
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    let run = cadre(ws, &model).args(["run", "go"]).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let listed = cadre(ws, &model)
        .args(["tasks", "list", "--json"])
        .output()
        .unwrap();
    let tasks: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let id = tasks[0]["task_id"].as_str().unwrap().to_string();

    for args in [
        vec!["tasks", "list"],
        vec!["tasks", "list", "--json"],
        vec!["tasks", "show", id.as_str()],
        vec!["mcp", "list"],
    ] {
        let out = with_closed_stdout(cadre(ws, &model).args(&args));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
    }
}

/// Asserts that `cadre ARGS` (stdin `input`) into a closed stdout ends with success and no
/// panic message.
fn ends_quietly(ws: &Path, model: &str, args: &[&str], input: &[u8]) {
    use std::io::Write as _;
    let mut cmd = cadre(ws, model);
    cmd.args(args)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = cmd.stdout(writer).spawn().unwrap();
    // The REPL may end before reading all of it: a failed write here is that.
    let _ = child.stdin.take().unwrap().write_all(input);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
}

#[test]
fn runs_answers_and_the_repl_into_a_closed_pipe_end_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(
        ws.join(".cadre/agents/counter.md"),
        "---\nname: counter\ndescription: Counts.\nworkspace: {mode: shared}\n---\nYou count.\n",
    )
    .unwrap();
    let script = ws.join("script.toml");
    let turns = "[[scripts.turns]]\ntext = \"one\\ntwo\\nthree\"\n".repeat(8);
    std::fs::write(
        &script,
        format!(
            "[[scripts]]\nagent = \"main\"\n{turns}\n[[scripts]]\nagent = \"counter\"\n{turns}"
        ),
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    for args in [
        &["run", "go"][..],
        &["run", "--output", "jsonl", "go"],
        &["run", "--agent", "counter", "go"],
        &["run", "--agent", "counter", "--output", "jsonl", "go"],
        &["--version"],
    ] {
        ends_quietly(ws, &model, args, b"");
    }
    ends_quietly(
        ws,
        &model,
        &["--no-tui"],
        b"/agents\n/model\n/tasks\n/cost\n/resume\n@counter go\nhello\n",
    );
}
