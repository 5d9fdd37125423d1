//! What definition files ask for holds at run time: `Bash(git *)` keeps bash but only for
//! git commands, `permissionMode` narrows the parent's approval mode and never widens it,
//! and OpenCode's `permission:` denies what it denies. The children run real tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::ApprovalMode;
use cadre_subagents::{AgentDefinition, DirKind, ParseContext, parse_definition};
use common::{Options, fixture};
use std::collections::HashMap;
use std::path::Path;

/// A definition parsed from `text` as a file of a `kind` directory.
fn from_file(kind: DirKind, file: &str, text: &str) -> AgentDefinition {
    let aliases = HashMap::new();
    let cx = ParseContext {
        kind,
        workspace: None,
        aliases: &aliases,
        extra_tools: &[],
        providers: None,
    };
    parse_definition(Path::new(file), text, &cx).unwrap()
}

/// main → task(AGENT), whose script makes `calls` (bash commands or file writes) and then
/// reports its tool results.
fn script(agent: &str, calls: &str) -> String {
    format!(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{{ name = "task", args = {{ subagent_type = "{agent}", prompt = "go" }} }}]
        [[scripts.turns]]
        text = "{{{{tool_results}}}}"
        [[scripts]]
        agent = "{agent}"
        [[scripts.turns]]
        tool_calls = [{calls}]
        [[scripts.turns]]
        text = "results: {{{{tool_results}}}}"
        "#
    )
}

fn builtin(c: &mut cadre_subagents::RuntimeConfig) {
    c.base_tools = cadre_tools::builtin::builtin_tools();
}

#[tokio::test]
async fn bash_git_star_runs_git_and_refuses_everything_else() {
    let def = from_file(
        DirKind::Claude,
        "gitter.md",
        "---\nname: gitter\ndescription: Git helper.\ntools: Read, Bash(git *)\n---\nUse git.\n",
    );
    assert_eq!(
        def.tools.as_deref(),
        Some(&["read_file".to_string(), "bash".into()][..])
    );
    assert_eq!(def.permissions.only, ["bash(git *)"]);
    let calls = r#"{ name = "bash", args = { command = "git --version" } }, { name = "bash", args = { command = "echo widened > widened.txt" } }"#;
    let f = fixture(
        &script("gitter", calls),
        Options {
            defs: vec![def],
            mode: ApprovalMode::AutoApprove,
            tweak: Box::new(builtin),
            ..Default::default()
        },
    );
    let (out, _s) = f.run("delegate").await;
    assert!(out.output.contains("git version"), "{}", out.output);
    assert!(
        out.output
            .contains("bash is limited for this agent to `bash(git *)`"),
        "{}",
        out.output
    );
    assert!(!f.ws.join("widened.txt").exists());
}

#[tokio::test]
async fn permission_mode_plan_makes_a_child_read_only_and_bypass_never_widens() {
    let plan = from_file(
        DirKind::Claude,
        "planner.md",
        "---\nname: planner\ndescription: Plans.\npermissionMode: plan\n---\nPlan.\n",
    );
    let writes = r#"{ name = "write_file", args = { path = "plan.txt", content = "x" } }"#;
    let f = fixture(
        &script("planner", writes),
        Options {
            defs: vec![plan],
            mode: ApprovalMode::AutoApprove,
            tweak: Box::new(builtin),
            ..Default::default()
        },
    );
    let (out, _s) = f.run("delegate").await;
    assert!(out.output.contains("read-only"), "{}", out.output);
    assert!(!f.ws.join("plan.txt").exists());

    // Under a read-only parent, `bypassPermissions` is still read-only.
    let bypass = from_file(
        DirKind::Claude,
        "yolo.md",
        "---\nname: yolo\ndescription: Anything.\npermissionMode: bypassPermissions\n---\nGo.\n",
    );
    let f = fixture(
        &script("yolo", writes),
        Options {
            defs: vec![bypass],
            mode: ApprovalMode::ReadOnly,
            tweak: Box::new(builtin),
            ..Default::default()
        },
    );
    let (out, _s) = f.run("delegate").await;
    assert!(out.output.contains("read-only"), "{}", out.output);
    assert!(!f.ws.join("plan.txt").exists());
}

#[tokio::test]
async fn opencode_permissions_deny_edits_and_unlisted_commands() {
    let def = from_file(
        DirKind::OpenCode,
        "reviewer.md",
        "---\ndescription: Reviews.\nmode: subagent\npermission:\n  edit: deny\n  bash:\n    \"*\": deny\n    \"git status\": allow\n---\nReview.\n",
    );
    assert_eq!(def.name, "reviewer");
    let calls = r#"{ name = "write_file", args = { path = "w.txt", content = "x" } }, { name = "bash", args = { command = "touch t.txt" } }, { name = "bash", args = { command = "git status" } }"#;
    let f = fixture(
        &script("reviewer", calls),
        Options {
            defs: vec![def],
            mode: ApprovalMode::Bypass,
            tweak: Box::new(builtin),
            ..Default::default()
        },
    );
    let (out, _s) = f.run("delegate").await;
    assert!(!f.ws.join("w.txt").exists(), "{}", out.output);
    assert!(!f.ws.join("t.txt").exists(), "{}", out.output);
    assert!(
        out.output
            .contains("write_file is denied by the permission rule `write_file`"),
        "{}",
        out.output
    );
    assert!(
        out.output.contains("limited for this agent"),
        "{}",
        out.output
    );
}
