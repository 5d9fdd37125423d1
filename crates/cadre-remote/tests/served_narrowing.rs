//! Permissions only narrow under `cadre serve` too: a served delegator limited to
//! `[read_file]` starts `general-purpose`, which mirrors the delegator, so its `bash` call is
//! refused and writes nothing, even with every approval granted. The same delegator without
//! the allowlist shows the call would have run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_remote::{ApprovalPolicy, ServeOptions};
use cadre_subagents::{AgentDefinition, Harness, WorkspaceMode};
use common::{Node, message, rpc, serve};
use serde_json::json;

/// The delegator asks `general-purpose` to write; `general-purpose` runs bash.
const SCRIPT: &str = r#"
[[scripts]]
agent = "delegator"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "general-purpose", description = "write it", prompt = "write it" } }]
[[scripts.turns]]
text = "delegator: {{tool_results}}"

[[scripts]]
agent = "general-purpose"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { command = "echo x > widened.txt" } }]
[[scripts.turns]]
text = "general-purpose: {{tool_results}}"
"#;

/// A node serving `delegator` (allowlist `tools`, may delegate) on the scripted model.
fn node(tools: Option<&[&str]>) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let mut d = AgentDefinition::new("delegator", "Delegates the writing.");
    d.prompt = "You are delegator.".into();
    d.tools = tools.map(|t| t.iter().map(std::string::ToString::to_string).collect());
    d.can_delegate = true;
    d.workspace.mode = WorkspaceMode::Shared;
    let harness = Harness::builder()
        .model(format!("scripted:{}", script.display()))
        .workspace(dir.path())
        .without_agent_files()
        .user_agents_dir(None)
        .in_memory_sessions()
        .subagent(d)
        .build()
        .unwrap();
    Node { dir, harness }
}

/// Send one blocking message to `delegator`; the task's answer text.
async fn run(n: &Node) -> String {
    let srv = serve(
        n,
        ServeOptions {
            default_agent: Some("delegator".into()),
            approvals: Some(ApprovalPolicy::Approve),
            ..ServeOptions::default()
        },
    )
    .await;
    let (status, v) = rpc(&srv.url(), "SendMessage", json!({"message": message("go")})).await;
    assert_eq!(status, 200, "{v}");
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn general_purpose_under_a_read_only_served_delegator_cannot_run_bash() {
    // Control: a delegator with every tool passes bash on, and the call runs.
    let open = node(None);
    let answer = run(&open).await;
    assert!(
        open.dir.path().join("widened.txt").exists(),
        "the control run did not write: {answer}"
    );

    let narrow = node(Some(&["read_file"]));
    let answer = run(&narrow).await;
    assert!(
        !narrow.dir.path().join("widened.txt").exists(),
        "general-purpose ran bash under a [read_file] delegator: {answer}"
    );
    assert!(
        answer.contains("bash"),
        "the refusal names the tool: {answer}"
    );
}
