//! Claude Code's `.claude/settings.json` permission rules, end to end through `cadre run`
//! with the scripted model: a `Read` deny rule holds for every spelling of the path, a
//! `Bash(prefix:*)` allow rule allows only that command at a word boundary and never a line
//! with another command in it, `ask` rules ask whatever the mode, and what cannot be mapped
//! is a warning naming the file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use assert_cmd::Command;
use cli_support::{HomeCase as Env, write};
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(120);

fn env() -> Env {
    let e = Env::new();
    let ws = &e.ws;
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    e
}

fn cadre(e: &Env, script: &str) -> Command {
    e.scripted(script, DEADLINE)
}

/// A scripted turn calling `tool` once per argument object, then a turn echoing the results.
fn calls(tool: &str, args: &[String]) -> String {
    let calls: Vec<String> = args
        .iter()
        .map(|a| format!("  {{ name = \"{tool}\", args = {a} }},"))
        .collect();
    format!(
        "[[turns]]\ntool_calls = [\n{}\n]\n[[turns]]\ntext = \"results: {{{{tool_results}}}}\"\n",
        calls.join("\n")
    )
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[test]
fn a_read_deny_rule_holds_for_every_spelling_of_the_path() {
    let e = env();
    write(
        &e.ws.join(".claude/settings.json"),
        r#"{"permissions": {"deny": ["Read(./secrets/**)"], "allow": ["NotebookEdit"]}}"#,
    );
    write(&e.ws.join("secrets/k"), "TOPSECRET-VALUE");
    write(&e.ws.join("src/ok.txt"), "PLAIN-VALUE");
    std::os::unix::fs::symlink("secrets", e.ws.join("pub")).unwrap();
    std::os::unix::fs::symlink("secrets/k", e.ws.join("link-to-k")).unwrap();
    let abs = e.ws.join("secrets/k").display().to_string();
    let spellings = [
        "secrets/k",
        "./secrets/k",
        "secrets//k",
        "src/../secrets/k",
        abs.as_str(),
        "pub/k",
        "link-to-k",
    ];
    let mut args: Vec<String> = spellings
        .iter()
        .map(|p| format!("{{ path = {} }}", toml_str(p)))
        .collect();
    args.push("{ path = \"src/ok.txt\" }".into());
    let out = cadre(&e, &calls("read_file", &args))
        .args(["run", "read them"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains("TOPSECRET"), "{stdout}");
    assert!(stdout.contains("PLAIN-VALUE"), "{stdout}");
    let denials = stdout
        .matches("read_file is denied by the permission rule")
        .count();
    assert_eq!(denials, spellings.len(), "{stdout}");
    // A rule cadre cannot map is a warning naming the file and the rule.
    let settings = e.ws.join(".claude/settings.json").display().to_string();
    assert!(
        stderr.contains(&settings) && stderr.contains("`NotebookEdit`"),
        "{stderr}"
    );
}

/// A fake `npm` first on `PATH`, so allowed commands run quickly and visibly.
fn with_fake_npm(e: &Env, cmd: &mut Command) {
    let bin = e.ws.join("bin");
    write(&bin.join("npm"), "#!/bin/sh\necho \"fake-npm $*\"\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("npm"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("{}:{path}", bin.display()));
}

fn bash_args(commands: &[&str]) -> Vec<String> {
    commands
        .iter()
        .map(|c| format!("{{ command = {} }}", toml_str(c)))
        .collect()
}

#[test]
fn a_bash_prefix_allow_rule_allows_only_that_command_in_ask_mode() {
    let e = env();
    write(
        &e.ws.join(".claude/settings.json"),
        r#"{"permissions": {"allow": ["Bash(npm run test:*)"], "defaultMode": "default"}}"#,
    );
    write(&e.ws.join("x"), "keep");
    let allowed = ["npm run test", "npm  run test --watch"];
    let refused = [
        "npm run test; rm x",
        "npm run test && curl x",
        "npm run testify",
        // Claude Code: `test:*` is `test *`, a word boundary at a space.
        "npm run test:unit",
        "npm run test $(rm x)",
    ];
    let all: Vec<&str> = allowed.iter().chain(&refused).copied().collect();
    let mut cmd = cadre(&e, &calls("bash", &bash_args(&all)));
    with_fake_npm(&e, &mut cmd);
    let out = cmd.args(["run", "run them"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("fake-npm run test\n"), "{stdout}");
    assert!(stdout.contains("fake-npm run test --watch"), "{stdout}");
    for c in refused {
        assert!(
            stderr.contains(&format!("bash ({c}) needs approval and was refused")),
            "{c}: {stderr}"
        );
    }
    for c in allowed {
        assert!(!stderr.contains(&format!("bash ({c})")), "{c}: {stderr}");
    }
    assert!(e.ws.join("x").exists());
}

#[test]
fn ask_rules_ask_and_deny_rules_hold_under_bypass_permissions() {
    let e = env();
    // The user's file, the project's and the local one all add rules.
    write(
        &e.home.join(".claude/settings.json"),
        r#"{"permissions": {"deny": ["Bash(rm:*)"]}}"#,
    );
    write(
        &e.ws.join(".claude/settings.json"),
        r#"{"permissions": {"ask": ["Bash(git push:*)"]}}"#,
    );
    write(
        &e.ws.join(".claude/settings.local.json"),
        r#"{"permissions": {"defaultMode": "bypassPermissions", "allow": ["Bash(rm x)"]}}"#,
    );
    write(&e.ws.join("x"), "keep");
    let script = calls(
        "bash",
        &bash_args(&["echo ran-freely", "git push origin main", "rm x"]),
    );
    let out = cadre(&e, &script).args(["run", "go"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // bypassPermissions: what no rule decides runs without asking.
    assert!(stdout.contains("ran-freely"), "{stdout}");
    assert!(
        stderr.contains("bash (git push origin main) needs approval and was refused"),
        "{stderr}"
    );
    // The user's deny beats the local allow.
    assert!(
        stdout.contains("bash is denied by the permission rule `bash(rm)`")
            || stdout.contains("bash is denied by the permission rule `bash(rm *)`"),
        "{stdout}"
    );
    assert!(e.ws.join("x").exists());
}

#[test]
fn plan_mode_is_read_only_and_a_broken_settings_file_is_an_error_naming_it() {
    let e = env();
    write(
        &e.ws.join(".claude/settings.json"),
        r#"{"permissions": {"defaultMode": "plan"}}"#,
    );
    let script = calls(
        "write_file",
        &["{ path = \"new.txt\", content = \"x\" }".into()],
    );
    let out = cadre(&e, &script).args(["run", "go"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("read-only"), "{stdout}");
    assert!(!e.ws.join("new.txt").exists());

    write(&e.ws.join(".claude/settings.local.json"), "{ not json");
    let out = cadre(&e, &script).args(["run", "go"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("settings.local.json"), "{stderr}");
    assert!(!e.ws.join("new.txt").exists());
}
