//! Ctrl-C cancels a run cleanly: the shell's process group is killed, the session is saved,
//! the exit code says cancelled.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_testkit::{wait_for, wait_until};
use std::process::{Command, Stdio};
use std::time::Duration;

const SCRIPT: &str = r#"
[[turns]]
text = "starting a long command"
tool_calls = [{ name = "bash", args = { command = "sleep 100 & echo $! > bg.pid; wait", timeout_ms = 600000 } }]
[[turns]]
text = "never"
"#;

fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[test]
fn ctrl_c_kills_the_tool_process_group_and_saves_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_cadre"))
        .arg("--workspace")
        .arg(dir.path())
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .args(["run", "--approval", "auto", "--output", "jsonl", "go"])
        .env_remove("CADRE_MODEL")
        .env("XDG_CONFIG_HOME", dir.path().join("nocfg"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid_file = dir.path().join("bg.pid");
    // The shell writes the pid with a newline once it is whole.
    let bg: i32 = wait_for("the command to start", Duration::from_secs(20), || {
        let text = std::fs::read_to_string(&pid_file).ok()?;
        text.ends_with('\n').then(|| text.trim().parse().unwrap())
    });
    assert!(alive(bg));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until(
        "the background sleep to die with Ctrl-C",
        Duration::from_secs(5),
        || !alive(bg),
    );
    // The session was saved: the transcript holds the prompt, the reply and the cancelled call.
    let stdout = String::from_utf8(out.stdout).unwrap();
    let first: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    let id = first["session_id"].as_str().unwrap();
    let transcript =
        std::fs::read_to_string(dir.path().join(format!(".cadre/sessions/{id}.jsonl"))).unwrap();
    assert!(
        transcript.contains("starting a long command"),
        "{transcript}"
    );
    assert!(transcript.contains("\"role\":\"tool\""), "{transcript}");
    let done = stdout.lines().last().unwrap();
    assert!(done.contains("\"state\":\"cancelled\""), "{done}");
}
