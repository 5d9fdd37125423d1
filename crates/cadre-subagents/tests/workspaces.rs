//! A child's real file tools and `bash` work in its runtime root and cannot leave it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_subagents::WorkspaceMode;
use cadre_types::EndState;
use common::*;

#[tokio::test]
async fn an_isolated_child_is_confined_to_its_own_directory() {
    let mut def = worker("iso");
    def.workspace.mode = WorkspaceMode::Isolated;
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "iso", prompt = "poke around" } }]
        [[scripts.turns]]
        text = "{{tool_results}}"
        [[scripts]]
        agent = "iso"
        [[scripts.turns]]
        tool_calls = [
          { name = "read_file", args = { path = "../../../../secret.txt" } },
          { name = "read_file", args = { path = "SECRET_ABS" } },
          { name = "write_file", args = { path = "note.txt", content = "mine" } },
          { name = "bash", args = { command = "pwd" } },
        ]
        [[scripts.turns]]
        text = "{{tool_results}}"
        "#
        .replace("SECRET_ABS", "/etc/passwd")
        .as_str(),
        Options {
            defs: vec![def],
            tweak: Box::new(|c| c.base_tools = cadre_tools::builtin::builtin_tools()),
            ..Default::default()
        },
    );
    std::fs::write(f.ws.join("secret.txt"), "TOP SECRET").unwrap();
    let (out, _s) = f.run("go").await;
    assert_eq!(out.state, EndState::Completed);
    let root = f.ws.join(".cadre/agents/iso/workspace");
    assert!(!out.output.contains("TOP SECRET"), "{}", out.output);
    assert!(
        out.output.contains("escapes the workspace"),
        "{}",
        out.output
    );
    assert_eq!(
        std::fs::read_to_string(root.join("note.txt")).unwrap(),
        "mine"
    );
    assert!(!f.ws.join("note.txt").exists());
    assert!(
        out.output.contains(&root.display().to_string()),
        "bash ran in the child's root: {}",
        out.output
    );
}

#[tokio::test]
async fn children_of_one_definition_share_its_build_and_a_deleted_workspace_comes_back() {
    let mut def = worker("iso");
    def.workspace.mode = WorkspaceMode::Isolated;
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "iso", prompt = "first" } }]
        [[scripts.turns]]
        text = "{{tool_results}}"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "iso", prompt = "second" } }]
        [[scripts.turns]]
        text = "{{tool_results}}"
        [[scripts]]
        agent = "iso"
        [[scripts.turns]]
        tool_calls = [{ name = "bash", args = { command = "pwd" } }]
        [[scripts.turns]]
        text = "{{tool_results}}"
        "#,
        Options {
            defs: vec![def],
            tweak: Box::new(|c| c.base_tools = cadre_tools::builtin::builtin_tools()),
            ..Default::default()
        },
    );
    let root = f.ws.join(".cadre/agents/iso/workspace");
    let mut s = f.session();
    let out = f.run_in(&mut s, "one").await;
    assert_eq!(out.state, EndState::Completed);
    assert!(root.is_dir());
    std::fs::remove_dir_all(&root).unwrap();
    let out = f.run_in(&mut s, "two").await;
    assert_eq!(out.state, EndState::Completed, "{}", out.output);
    assert!(
        out.output.contains(&root.display().to_string()),
        "bash ran in the re-created root: {}",
        out.output
    );
    // Both children got the same system prompt from the shared build.
    let reqs = f.rec.of("iso");
    assert_eq!(reqs.len(), 4);
    assert_eq!(reqs[0].system, reqs[2].system);
}
