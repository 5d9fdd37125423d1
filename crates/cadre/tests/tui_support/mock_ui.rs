//! The UI against a mock OpenAI server: a workspace whose provider points at the mock, cadre
//! started on it in tmux, and what the recorded requests held.

use super::Tmux;
use cadre_testkit::MockServer;
use serde_json::Value;
use std::path::Path;

/// The key variable the workspace's provider names; set only where a test says so.
pub const KEY_VAR: &str = "CADRE_TUI_TEST_KEY";

/// A workspace whose `openai` provider points at `mock` and takes its key from [`KEY_VAR`].
pub fn workspace(mock: &MockServer) -> tempfile::TempDir {
    workspace_with(mock, "")
}

/// [`workspace`] with `extra` appended to its configuration.
pub fn workspace_with(mock: &MockServer, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        format!(
            "[providers.openai]\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n{extra}",
            mock.openai_base_url()
        ),
    )
    .unwrap();
    dir
}

/// cadre on `ws` with `openai:gpt-4o-mini`, no user configuration, and `key` (if any) in
/// [`KEY_VAR`].
pub fn start_ui(name: &str, ws: &Path, key: Option<&str>) -> Tmux {
    let mut env = vec![
        ("XDG_CONFIG_HOME", ws.join("nocfg").display().to_string()),
        ("CADRE_MODEL", String::new()),
    ];
    if let Some(k) = key {
        env.push((KEY_VAR, k.to_string()));
    }
    let ws_arg = ws.display().to_string();
    Tmux::start(
        name,
        &env,
        &["--workspace", &ws_arg, "--model", "openai:gpt-4o-mini"],
    )
}

/// Leave with Ctrl+C twice; the exit status.
pub fn quit(tmux: &Tmux) -> i32 {
    tmux.keys(&["C-c"]);
    tmux.wait_for("Ctrl+C again within 2 s exits");
    tmux.keys(&["C-c"]);
    tmux.exit_code()
}

/// The texts of the user messages of a recorded Chat Completions request.
pub fn user_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}
