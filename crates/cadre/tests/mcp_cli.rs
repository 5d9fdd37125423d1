//! `cadre` with MCP servers configured the two ways (`.mcp.json` and `[mcp_servers.NAME]`):
//! `cadre mcp list` shows each server's source, state and tools; `cadre run` offers and calls
//! the tools; a server that never starts is a warning naming it and the run goes on; an
//! agent file's own server serves its child in `cadre run` and its task in `cadre serve`.
//! Needs `server-everything` from `.ci/run` (`target/mcp-npm`, or `$CADRE_MCP_EVERYTHING`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn everything() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = std::env::var_os("CADRE_MCP_EVERYTHING")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            root.join(
                "target/mcp-npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            )
        });
    if path.exists() {
        return Some(path);
    }
    let msg = format!(
        "server-everything missing at {} (see .ci/run)",
        path.display()
    );
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("\n!!!!!!!! SKIPPED: {msg}\n");
    None
}

fn cadre(ws: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cadre").unwrap();
    cmd.arg("--workspace").arg(ws);
    cmd.env_remove("CADRE_MODEL");
    cmd.env("XDG_CONFIG_HOME", ws.join(".no-user-config"));
    cmd
}

/// A workspace with server-everything in `.mcp.json` (its path through `${EVERYTHING_JS}`)
/// and a server that cannot start in `.cadre/config.toml`.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".mcp.json"),
        r#"{"mcpServers": {"everything": {"command": "node", "args": ["${EVERYTHING_JS}", "stdio"]}}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        "[mcp_servers.ghost]\ncommand = \"/nonexistent/cadre-ghost-server\"\nstartup_timeout_secs = 5\n",
    )
    .unwrap();
    dir
}

#[test]
fn mcp_list_shows_sources_states_and_tools() {
    let Some(index) = everything() else { return };
    let dir = workspace();
    let out = cadre(dir.path())
        .env("EVERYTHING_JS", &index)
        .args(["mcp", "list", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed server makes it exit 1: {stderr}"
    );
    assert!(
        stderr.contains("warning: MCP server ghost failed to start"),
        "{stderr}"
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    let every = rows.iter().find(|r| r["name"] == "everything").unwrap();
    assert!(
        every["source"].as_str().unwrap().ends_with(".mcp.json"),
        "{every}"
    );
    assert_eq!(every["state"], "running");
    let tools: Vec<&str> = every["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"mcp__everything__echo"), "{tools:?}");
    assert!(
        tools.contains(&"mcp__everything__read_resource"),
        "{tools:?}"
    );
    assert!(!every["prompts"].as_array().unwrap().is_empty(), "{every}");
    let ghost = rows.iter().find(|r| r["name"] == "ghost").unwrap();
    assert!(
        ghost["source"].as_str().unwrap().ends_with("config.toml"),
        "{ghost}"
    );
    assert!(
        ghost["state"]
            .as_str()
            .unwrap()
            .starts_with("failed: cannot start"),
        "{ghost}"
    );
}

#[test]
fn run_calls_an_mcp_tool_and_a_dead_server_is_only_a_warning() {
    let Some(index) = everything() else { return };
    let dir = workspace();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
[[turns]]
tool_calls = [{ name = "mcp__everything__echo", args = { message = "through cadre" } }]
[[turns]]
text = "echoed: {{tool_results}}"
"#,
    )
    .unwrap();
    let out = cadre(dir.path())
        .env("EVERYTHING_JS", &index)
        .args([
            "--model",
            &format!("scripted:{}", script.display()),
            "run",
            "echo",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("echoed: Echo: through cadre"), "{stdout}");
    assert!(
        stderr.contains("warning: MCP server ghost failed to start"),
        "{stderr}"
    );
}

#[test]
fn web_search_can_be_an_mcp_servers_tool() {
    let Some(index) = everything() else { return };
    let dir = workspace();
    // server-everything's `echo` stands in for a search tool: it takes the query as `message`.
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        "[tools.web_search]\nprovider = \"mcp:everything/echo\"\nquery_arg = \"message\"\n",
    )
    .unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
[[turns]]
tool_calls = [{ name = "web_search", args = { query = "rust mcp" } }]
[[turns]]
text = "found: {{tool_results}}"
"#,
    )
    .unwrap();
    let out = cadre(dir.path())
        .env("EVERYTHING_JS", &index)
        .args([
            "--model",
            &format!("scripted:{}", script.display()),
            "run",
            "search",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("found: Echo: rust mcp"), "{stdout}");
    assert!(!stderr.contains("[tools.web_search]"), "{stderr}");
}

#[test]
fn an_agent_files_own_server_serves_its_child_in_cadre_run() {
    let Some(index) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre/agents")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/agents/helper.md"),
        "---\nname: helper\ndescription: Echoes through its own server.\nmcpServers:\n  - mine:\n      command: node\n      args: [\"${EVERYTHING_JS}\", \"stdio\"]\n---\nYou help.\n",
    )
    .unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "helper", description = "help", prompt = "go" } }]
[[scripts.turns]]
text = "main: {{tool_results}}"
[[scripts]]
agent = "helper"
[[scripts.turns]]
tool_calls = [{ name = "mcp__mine__echo", args = { message = "through the helper" } }]
[[scripts.turns]]
text = "helper: {{tool_results}}"
"#,
    )
    .unwrap();
    let out = cadre(dir.path())
        .env("EVERYTHING_JS", &index)
        .args([
            "--model",
            &format!("scripted:{}", script.display()),
            "run",
            "delegate",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("helper: Echo: through the helper"),
        "{stdout}\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_files_own_server_serves_its_task_in_cadre_serve() {
    let Some(index) = everything() else { return };
    let ws = serve_support::workspace(&[
        (
            ".cadre/agents/helper.md",
            "---\nname: helper\ndescription: Echoes through its own server.\nmcpServers:\n  - mine:\n      command: node\n      args: [\"${EVERYTHING_JS}\", \"stdio\"]\n---\nYou help.\n",
        ),
        (
            ".cadre/config.toml",
            "[serve]\ndefault_agent = \"helper\"\nexpose = [\"helper\"]\n",
        ),
        (
            "script.toml",
            r#"
[[scripts]]
agent = "helper"
[[scripts.turns]]
tool_calls = [{ name = "mcp__mine__echo", args = { message = "through serve" } }]
[[scripts.turns]]
text = "helper: {{tool_results}}"
"#,
        ),
    ]);
    let model = format!("scripted:{}", ws.path().join("script.toml").display());
    let index = index.display().to_string();
    let srv = serve_support::Served::start(ws.path(), &model, &[("EVERYTHING_JS", &index)]);
    let c = reqwest::Client::new();
    let r = c
        .post(format!("{}/tasks", srv.url))
        .json(&serde_json::json!({"task_id": "t-1", "agent_id": "helper", "input": "go"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", srv.stderr());
    let done: serde_json::Value = c
        .get(format!("{}/tasks/t-1/wait?timeout_seconds=60", srv.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(done["status"], "success", "{done}\n{}", srv.stderr());
    assert_eq!(done["result"], "helper: Echo: through serve", "{done}");
}
