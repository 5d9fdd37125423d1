//! Files a cloned repository may plant for cadre to trip over: a FIFO or a link to
//! `/dev/zero` as `.cadre/config.toml`, a FIFO the model asks `read_file` to read. Each is
//! refused at once and the process exits (no read blocks it, no thread keeps it alive).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use std::path::Path;
use std::time::Duration;

/// Longer than any of these runs takes; a hang fails the test instead of blocking it.
const DEADLINE: Duration = Duration::from_secs(60);

fn cadre(ws: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cadre").unwrap();
    cmd.arg("--workspace").arg(ws);
    cmd.env_remove("CADRE_MODEL");
    cmd.env("XDG_CONFIG_HOME", ws.join(".no-user-config"));
    cmd.timeout(DEADLINE);
    cmd
}

fn scripted(ws: &Path, script: &str) -> String {
    let path = ws.join("script.toml");
    std::fs::write(&path, script).unwrap();
    format!("scripted:{}", path.display())
}

fn assert_config_refused(ws: &Path, kind: &str) {
    let model = scripted(ws, "[[turns]]\ntext = \"never\"\n");
    let out = cadre(ws)
        .args(["--model", &model, "run", "hi"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("config.toml is not a regular file") && stderr.contains(kind),
        "{stderr}"
    );
}

#[test]
fn a_fifo_config_toml_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".cadre")).unwrap();
    let fifo = dir.path().join(".cadre/config.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    assert_config_refused(dir.path(), "FIFO");
}

#[test]
fn a_config_toml_linked_to_dev_zero_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".cadre")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join(".cadre/config.toml")).unwrap();
    assert_config_refused(dir.path(), "device");
}

#[test]
fn read_file_on_a_fifo_is_refused_and_the_run_exits_after_completing() {
    let dir = tempfile::tempdir().unwrap();
    nix::unistd::mkfifo(&dir.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
    let model = scripted(
        dir.path(),
        r#"
[[turns]]
tool_calls = [
  { name = "read_file", args = { path = "pipe" } },
  { name = "read_file", args = { path = "zero" } },
]
[[turns]]
text = "results: {{tool_results}}"
"#,
    );
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "read them"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("— completed"), "{stderr}");
    assert!(
        stdout.contains("pipe is a FIFO, not a regular file"),
        "{stdout}"
    );
    assert!(
        stdout.contains("to /dev/zero, outside the workspace"),
        "{stdout}"
    );
}
