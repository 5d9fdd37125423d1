//! Claude-Code-compatible hooks end to end: where they are read from (`cadre hooks list`),
//! and what they do to a real run with the scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use std::path::Path;

fn write(ws: &Path, rel: &str, text: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// `cadre` in `ws` with a home of its own (`~/.claude/settings.json` is read from it).
fn cadre(ws: &Path) -> assert_cmd::Command {
    let mut c = cli_support::cadre(ws);
    c.env("HOME", ws.join("home"));
    c
}

#[test]
fn hooks_list_shows_every_source_event_matcher_and_command() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path();
    write(
        ws,
        "home/.claude/settings.json",
        r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}]}]}}"#,
    );
    write(
        ws,
        ".claude/settings.json",
        r#"{"permissions": {"deny": ["Read(./secrets/**)"]},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "./.claude/guard.sh", "timeout": 5}]}]}}"#,
    );
    write(ws, ".claude/settings.local.json", "{ not json");
    write(
        ws,
        ".cadre/config.toml",
        "[[hooks.PostToolUse]]\nmatcher = \"write_file|edit_file\"\n\
         [[hooks.PostToolUse.hooks]]\ntype = \"command\"\ncommand = \"cargo fmt\"\n",
    );
    let out = cadre(ws).args(["hooks", "list"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<Vec<&str>> = stdout.lines().map(|l| l.split('\t').collect()).collect();
    let home = ws.join("home/.claude/settings.json").display().to_string();
    let project = ws.join(".claude/settings.json").display().to_string();
    let toml = ws.join(".cadre/config.toml").display().to_string();
    assert_eq!(
        lines,
        vec![
            vec![home.as_str(), "SessionStart", "*", "echo hi"],
            vec![project.as_str(), "PreToolUse", "Bash", "./.claude/guard.sh"],
            vec![
                toml.as_str(),
                "PostToolUse",
                "write_file|edit_file",
                "cargo fmt"
            ],
        ],
        "{stdout}"
    );
    // The broken file is a warning naming it; the rest still loads.
    assert!(
        stderr.contains("settings.local.json: hooks not read: not valid JSON"),
        "{stderr}"
    );
    // A config.toml with hooks is still a valid configuration for everything else.
    let out = cadre(ws).args(["agents", "list"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    write(
        ws,
        ".claude/settings.local.json",
        r#"{"disableAllHooks": true}"#,
    );
    let out = cadre(ws)
        .args(["hooks", "list", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 3);
    assert_eq!(rows[1]["matcher"], "Bash");
    assert_eq!(rows[1]["timeout_secs"], 5.0);
    assert_eq!(rows[1]["disabled"], true);
}
