//! Servers of sub-agents' definitions (`mcpServers`): one declared in an agent file is
//! started for that agent's child, offered to it only (the parent never sees its tools), and
//! stopped when the child ends (its process is gone); one named from the configuration is
//! the session's own connection, offered to the child; a file the file tools can write may
//! not use `mcpServers` (the model could have written the command, or widened the child).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_mcp::{AgentServerPool, McpServers};
use cadre_subagents::{AgentServers, Harness};
use cadre_tools::ToolRegistry;
use cadre_types::EndState;
use common::*;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const DELEGATE: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "helper", description = "help", prompt = "go" } }]
[[scripts.turns]]
text = "main done: {{tool_results}}"

[[scripts]]
agent = "helper"
[[scripts.turns]]
tool_calls = [{ name = "SERVER_TOOL", args = { message = "from the helper" } }]
[[scripts.turns]]
text = "helper saw: {{tool_results}}"
"#;

/// A harness in `ws` whose main agent has the built-in tools only, with `pool` serving
/// definitions' servers; the agent files come from `ws`.
fn harness(ws: &Path, model: Arc<Recording>, pool: AgentServerPool) -> Harness {
    let pool: Arc<dyn AgentServers> = Arc::new(pool);
    let tools: ToolRegistry = cadre_tools::builtin::builtin_tools();
    Harness::builder()
        .workspace(ws)
        .provider_instance("rec", model)
        .model("rec:test")
        .tools(tools)
        .permissions(cadre_engine::PermissionPolicy {
            mode: cadre_engine::ApprovalMode::Bypass,
            ..Default::default()
        })
        .user_agents_dir(None)
        .in_memory_sessions()
        .runtime_config(move |rc| rc.agent_servers = Some(pool))
        .build()
        .unwrap()
}

/// An agent file at `ws/rel` for agent `helper`, declaring `mcp_servers` (YAML).
fn agent_file(ws: &Path, rel: &str, mcp_servers: &str) {
    let path = ws.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!(
            "---\nname: helper\ndescription: Helps with its own server.\nmcpServers:\n{mcp_servers}\n---\nYou help.\n"
        ),
    )
    .unwrap();
}

/// `server-everything` over stdio as an inline server `mine`, through `sh`, which writes
/// its process id to `pid_file` and then becomes the server (`exec` keeps the id).
fn inline_everything(index: &Path, pid_file: &Path) -> String {
    let script = format!(
        "echo $$ > '{}'; exec node '{}' stdio",
        pid_file.display(),
        index.display()
    );
    format!(
        "  - mine:\n      command: sh\n      args: [\"-c\", {}]\n",
        serde_json::to_string(&script).unwrap()
    )
}

/// True while process `pid` exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Wait (up to 30 s) until process `pid` is gone.
async fn wait_gone(pid: i32) {
    let what = format!("process {pid} to be gone");
    cadre_testkit::eventually(
        &what,
        Duration::from_secs(30),
        || async move { !alive(pid) },
    )
    .await;
}

fn offered(model: &Recording, agent: &str) -> Vec<String> {
    model.of(agent)[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

#[tokio::test]
async fn a_server_declared_in_an_agent_file_serves_its_child_only_and_stops_when_it_ends() {
    let Some(index) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let pid_file = ws.join("server.pid");
    agent_file(
        ws,
        ".cadre/agents/helper.md",
        &inline_everything(&index, &pid_file),
    );
    let model = Recording::new(&DELEGATE.replace("SERVER_TOOL", "mcp__mine__echo"));
    let pool = AgentServerPool::new(McpServers::default(), ws, Default::default(), None);
    let h = harness(ws, model.clone(), pool);
    let out = h.run("delegate").await.unwrap();
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert!(out.output.contains("from the helper"), "{}", out.output);

    let child = offered(&model, "helper");
    assert!(child.iter().any(|n| n == "mcp__mine__echo"), "{child:?}");
    let parent = offered(&model, "main");
    assert!(
        !parent.iter().any(|n| n.starts_with("mcp__mine")),
        "the parent is not offered the child's server: {parent:?}"
    );
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_gone(pid).await;
}

#[tokio::test]
async fn a_configured_server_named_by_a_definition_is_the_sessions_connection() {
    let Some(index) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    agent_file(ws, ".cadre/agents/helper.md", "  - everything");
    let configured = McpServers::from_entries([everything_stdio(&index)], ws, &Default::default());
    let model = Recording::new(&DELEGATE.replace("SERVER_TOOL", "mcp__everything__echo"));
    let pool = AgentServerPool::new(configured.clone(), ws, Default::default(), None);
    let h = harness(ws, model.clone(), pool);
    let out = h.run("delegate").await.unwrap();
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert!(out.output.contains("from the helper"), "{}", out.output);
    let child = offered(&model, "helper");
    assert!(
        child.iter().any(|n| n == "mcp__everything__echo"),
        "{child:?}"
    );
    let parent = offered(&model, "main");
    assert!(
        !parent.iter().any(|n| n.starts_with("mcp__everything")),
        "{parent:?}"
    );
    // The child used the configured server's one connection, which the session keeps.
    let server = configured.get("everything").unwrap();
    assert!(
        server.pid().await.is_some(),
        "still running for the session"
    );
    configured.stop_all().await;
}

#[tokio::test]
async fn a_file_the_file_tools_can_write_cannot_name_a_configured_server() {
    let Some(index) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    // Naming a configured server would give the child tools its parent may not have.
    agent_file(ws, ".gemini/agents/helper.md", "  - everything");
    let configured = McpServers::from_entries([everything_stdio(&index)], ws, &Default::default());
    let model = Recording::new(&DELEGATE.replace("SERVER_TOOL", "mcp__everything__echo"));
    let pool = AgentServerPool::new(configured.clone(), ws, Default::default(), None);
    let h = harness(ws, model.clone(), pool);
    let out = h.run("delegate").await.unwrap();
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    let child = offered(&model, "helper");
    assert!(
        !child.iter().any(|n| n.starts_with("mcp__everything")),
        "{child:?}"
    );
    assert_eq!(configured.get("everything").unwrap().pid().await, None);
}

#[tokio::test]
async fn a_file_the_file_tools_can_write_cannot_declare_a_server() {
    let Some(index) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let pid_file = ws.join("server.pid");
    // `.gemini/agents/` is treated as written by the model: its `mcpServers` is dropped.
    agent_file(
        ws,
        ".gemini/agents/helper.md",
        &inline_everything(&index, &pid_file),
    );
    let model = Recording::new(&DELEGATE.replace("SERVER_TOOL", "mcp__mine__echo"));
    let pool = AgentServerPool::new(McpServers::default(), ws, Default::default(), None);
    let h = harness(ws, model.clone(), pool);
    let events = Arc::new(Collect::default());
    let mut session = h.new_session().unwrap();
    let out = h
        .run_in(
            &mut session,
            "delegate",
            cadre_subagents::RunOptions {
                events: events.clone(),
                approvals: Arc::new(AllowAll),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    let child = offered(&model, "helper");
    assert!(
        !child.iter().any(|n| n.starts_with("mcp__mine")),
        "{child:?}"
    );
    assert!(!pid_file.exists(), "the declared command never ran");
    // Dropped when the file loads, so `cadre agents list` and `cadre run` say so.
    let warned = h.runtime().registry().warnings().iter().any(|w| {
        w.agent == "helper"
            && w.message.contains("`mcpServers`")
            && w.message.contains(cadre_subagents::WRITABLE_NOTE)
    });
    assert!(warned, "{:?}", h.runtime().registry().warnings());
    drop(events);
}
