#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::rules::{PathBase, map_rule};
use super::*;

fn base() -> PathBase<'static> {
    PathBase {
        workspace: Path::new("/w/proj"),
        home: Some(Path::new("/home/me")),
    }
}

fn map(rule: &str) -> Vec<String> {
    map_rule(rule, &base()).unwrap_or_else(|e| panic!("{rule}: {e}"))
}

#[test]
fn bash_rules_follow_claude_codes_prefix_and_trailing_wildcard_forms() {
    assert_eq!(
        map("Bash(npm run test:*)"),
        ["bash(npm run test)", "bash(npm run test *)"]
    );
    assert_eq!(
        map("Bash(git diff *)"),
        ["bash(git diff)", "bash(git diff *)"]
    );
    assert_eq!(map("Bash(git * main)"), ["bash(git * main)"]);
    assert_eq!(map("Bash(npm run build)"), ["bash(npm run build)"]);
    // Only `*` is a wildcard in Claude Code's rules.
    assert_eq!(map("Bash(echo [a]?)"), [r"bash(echo \[a\]\?)"]);
    for bare in ["Bash", "Bash()", "Bash(*)", "bash"] {
        assert_eq!(map(bare), ["bash"], "{bare}");
    }
}

#[test]
fn read_covers_every_reading_tool_and_edit_every_writing_tool() {
    assert_eq!(
        map("Read(./secrets/**)"),
        [
            "read_file(secrets/**)",
            "grep(secrets/**)",
            "glob(secrets/**)",
            "list_dir(secrets/**)"
        ]
    );
    assert_eq!(
        map("Edit(src/**)"),
        ["write_file(src/**)", "edit_file(src/**)"]
    );
    assert_eq!(
        map("Write(/docs)"),
        ["write_file(docs)", "write_file(docs/**)"]
    );
    assert_eq!(map("MultiEdit"), ["edit_file"]);
    assert_eq!(map("Read"), ["read_file", "grep", "glob", "list_dir"]);
}

#[test]
fn path_spellings_are_made_workspace_relative() {
    let read = |rule: &str| -> Vec<String> {
        map(rule)
            .into_iter()
            .filter_map(|r| {
                r.strip_prefix("read_file(")?
                    .strip_suffix(')')
                    .map(String::from)
            })
            .collect()
    };
    assert_eq!(read("Read(//w/proj/secrets/**)"), ["secrets/**"]);
    assert_eq!(read("Read(//w/proj/./a/../secrets/**)"), ["secrets/**"]);
    assert_eq!(read("Read(/secrets/k)"), ["secrets/k", "secrets/k/**"]);
    assert_eq!(
        read("Read(secrets/)"),
        ["secrets", "secrets/**", "**/secrets", "**/secrets/**"]
    );
    // No slash: any depth, as in gitignore.
    assert_eq!(
        read("Read(*.env)"),
        ["*.env", "*.env/**", "**/*.env", "**/*.env/**"]
    );
    assert_eq!(read("Read(./.env)"), [".env", ".env/**"]);
    assert_eq!(read("Read(//w/proj)"), ["**"]);
}

#[test]
fn paths_outside_the_project_and_unknown_forms_are_refused_with_a_reason() {
    for (rule, why) in [
        ("Read(//etc/passwd)", "outside the workspace"),
        ("Read(~/.ssh/**)", "outside the workspace"),
        ("Read(../other/x)", "leaves the project"),
        ("Read(//w/projector/x)", "outside the workspace"),
        ("NotebookEdit", "not a tool cadre has"),
        ("Foo(bar)", "not a tool cadre has"),
        ("Bash(ls", "missing closing parenthesis"),
        ("WebFetch(https://x.com)", "domain:"),
        ("WebFetch(domain:*.example.com)", "not a plain host"),
        ("mcp__github__x(y)", "no argument"),
        ("mcp__", "not an MCP tool name"),
        ("TodoWrite(x)", "cannot restrict"),
    ] {
        let err = map_rule(rule, &base()).expect_err(rule);
        assert!(err.contains(why), "{rule}: {err}");
    }
}

#[test]
fn web_fetch_domains_and_mcp_names_map() {
    assert_eq!(
        map("WebFetch(domain:Example.COM)"),
        [
            "web_fetch(http://example.com/*)",
            "web_fetch(https://example.com/*)"
        ]
    );
    assert_eq!(map("WebFetch"), ["web_fetch"]);
    assert_eq!(map("mcp__github__*"), ["mcp__github__*"]);
    assert_eq!(
        map("mcp__github__create_issue"),
        ["mcp__github__create_issue"]
    );
    assert_eq!(map("mcp__github"), ["mcp__github"]);
    assert_eq!(map("Task"), ["task"]);
}

#[test]
fn a_settings_file_maps_its_lists_and_warns_for_what_it_cannot() {
    let mut p = ClaudePermissions::default();
    let v: Value = serde_json::json!({
        "hooks": {"PreToolUse": []},
        "permissions": {
            "allow": ["Bash(npm run test:*)", "NotebookEdit", 7],
            "deny": ["Read(./secrets/**)"],
            "ask": ["Bash(git push:*)"],
            "defaultMode": "plan",
            "additionalDirectories": ["../x"]
        }
    });
    p.add_file(Path::new("/w/proj/.claude/settings.json"), &v, &base());
    assert_eq!(p.allow, ["bash(npm run test)", "bash(npm run test *)"]);
    assert_eq!(p.deny.len(), 4);
    assert_eq!(p.ask, ["bash(git push)", "bash(git push *)"]);
    assert_eq!(p.mode, Some(ClaudeMode::Mode(ApprovalMode::ReadOnly)));
    let w = p.warnings.join("\n");
    assert_eq!(p.warnings.len(), 3, "{w}");
    for needle in [
        "`NotebookEdit`",
        "7 is not a string",
        "additionalDirectories",
    ] {
        assert!(
            w.contains(needle) && w.contains("/w/proj/.claude/settings.json"),
            "{w}"
        );
    }
}

#[test]
fn modes_map_and_cadres_own_mode_wins() {
    let mode_of = |m: &str| {
        let mut p = ClaudePermissions::default();
        p.set_mode("f", &Value::from(m));
        let mut cfg = PermissionsConfig::default();
        p.apply_to(&mut cfg);
        (cfg.mode, cfg.allow, p.warnings)
    };
    assert_eq!(mode_of("default").0, Some(ApprovalMode::Ask));
    assert_eq!(mode_of("plan").0, Some(ApprovalMode::ReadOnly));
    assert_eq!(
        mode_of("bypassPermissions").0,
        Some(ApprovalMode::AutoApprove)
    );
    let (mode, allow, _) = mode_of("acceptEdits");
    assert_eq!(mode, Some(ApprovalMode::Ask));
    assert_eq!(allow, ["write_file", "edit_file"]);
    let (mode, _, warnings) = mode_of("dontAsk");
    assert_eq!(mode, None);
    assert!(warnings[0].contains("dontAsk"), "{warnings:?}");

    let mut p = ClaudePermissions::default();
    p.set_mode("f", &Value::from("bypassPermissions"));
    let mut cfg = PermissionsConfig {
        mode: Some(ApprovalMode::ReadOnly),
        ..Default::default()
    };
    p.apply_to(&mut cfg);
    assert_eq!(cfg.mode, Some(ApprovalMode::ReadOnly));
}
