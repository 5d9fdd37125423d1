//! `cadre run` end to end on what delegation may not do: widen a parent's tools at any depth,
//! spend beyond the run's budgets, or go past the depth cap without saying so.
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

/// A workspace with agent files, an optional `.cadre/config.toml` and a script; returns the
/// `--model` value.
fn workspace(agents: &[(&str, &str)], config: &str, script: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let agents_dir = dir.path().join(".cadre/agents");
    std::fs::create_dir_all(&agents_dir).unwrap();
    for (name, text) in agents {
        std::fs::write(agents_dir.join(format!("{name}.md")), text).unwrap();
    }
    std::fs::write(dir.path().join(".cadre/config.toml"), config).unwrap();
    let path = dir.path().join("script.toml");
    std::fs::write(&path, script).unwrap();
    (dir, format!("scripted:{}", path.display()))
}

const READER: &str = "---\nname: reader\ndescription: Reads files.\ntools: [read_file]\ncan_delegate: true\nworkspace: {mode: shared}\n---\nYou read files.\n";

fn widening_script(surface: &str) -> String {
    let (main_call, reader_call) = if surface == "lifecycle" {
        (
            r#"{ name = "agent_spawn", args = { agent_id = "reader", task = "read", timeout_seconds = 60 } }"#,
            r#"{ name = "agent_spawn", args = { agent_id = "general-purpose", task = "write", timeout_seconds = 60 } }"#,
        )
    } else {
        (
            r#"{ name = "task", args = { subagent_type = "reader", prompt = "read" } }"#,
            r#"{ name = "task", args = { subagent_type = "general-purpose", prompt = "write" } }"#,
        )
    };
    format!(
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{main_call}]
[[scripts.turns]]
text = "main: {{{{tool_results}}}}"
[[scripts]]
agent = "reader"
[[scripts.turns]]
tool_calls = [{reader_call}]
[[scripts.turns]]
text = "reader: {{{{tool_results}}}}"
[[scripts]]
agent = "general-purpose"
[[scripts.turns]]
tool_calls = [{{ name = "bash", args = {{ command = "echo x > widened.txt" }} }}]
[[scripts.turns]]
text = "gp: {{{{tool_results}}}}"
"#
    )
}

#[test]
fn general_purpose_under_a_read_only_delegator_cannot_run_bash_on_either_surface() {
    for surface in ["task", "lifecycle"] {
        let (dir, model) = workspace(
            &[("reader", READER)],
            &format!("[subagents]\ntools = \"{surface}\"\n"),
            &widening_script(surface),
        );
        let out = cadre(dir.path())
            .args([
                "--model",
                &model,
                "run",
                "--permission-mode",
                "bypass",
                "go",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{surface}: {stderr}");
        assert!(
            stdout.contains("gp: "),
            "{surface}: general-purpose ran: {stdout}"
        );
        assert!(
            stdout.contains("unknown tool `bash`"),
            "{surface}: {stdout}"
        );
        assert!(
            !dir.path().join("widened.txt").exists(),
            "{surface}: the delegator's general-purpose ran bash: {stdout}"
        );
    }
}
