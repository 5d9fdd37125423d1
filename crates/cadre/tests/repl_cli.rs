//! The line REPL: prompts to the main agent in one session, `@agent` direct runs, approval
//! questions answered on stdin.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;

const SCRIPT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
text = "main says {{user}}"
[[scripts.turns]]
text = "main again: {{user}}"

[[scripts]]
agent = "helper"
[[scripts.turns]]
tool_calls = [{ name = "write_file", args = { path = "out.txt", content = "from helper" } }]
[[scripts.turns]]
text = "helper wrote: {{tool_results}}"
"#;

const HELPER: &str = "---\nname: helper\ndescription: Writes files.\nworkspace: {mode: shared}\n---\nYou write files.\n";

#[test]
fn repl_runs_the_main_agent_and_direct_sub_agents_with_stdin_approvals() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre/agents")).unwrap();
    std::fs::write(dir.path().join(".cadre/agents/helper.md"), HELPER).unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = Command::cargo_bin("cadre")
        .unwrap()
        .env_remove("CADRE_MODEL")
        .env("XDG_CONFIG_HOME", dir.path().join("nocfg"))
        .arg("--workspace")
        .arg(dir.path())
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .write_stdin("hello\n@helper write the file\ny\nagain\n/tasks\n/exit\n")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("main says hello"), "{stdout}");
    assert!(
        stdout.contains("main again: again"),
        "the session continued: {stdout}"
    );
    assert!(
        stderr.contains("[helper] wants to run write_file(out.txt)"),
        "{stderr}"
    );
    assert!(stdout.contains("helper wrote: wrote 11 bytes"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "from helper"
    );
    assert!(
        stdout.contains("[completed] helper: write the file"),
        "{stdout}"
    );
}
