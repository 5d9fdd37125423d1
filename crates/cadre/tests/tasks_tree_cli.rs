//! `cadre tasks tree`: a real run that delegates two levels deep, read back as a tree with
//! each task's turns, tokens and state, and the session's total.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const SCRIPT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "planner", description = "plan", prompt = "plan it" } }]
usage = { input_tokens = 10, output_tokens = 1 }
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "counter", description = "count", prompt = "count" } }]
usage = { input_tokens = 10, output_tokens = 1 }
[[scripts.turns]]
text = "all done"
usage = { input_tokens = 10, output_tokens = 1 }

[[scripts]]
agent = "planner"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "counter", description = "count for the plan", prompt = "count" } }]
usage = { input_tokens = 200, output_tokens = 20 }
[[scripts.turns]]
text = "planned"
usage = { input_tokens = 300, output_tokens = 30 }

[[scripts]]
agent = "counter"
[[scripts.turns]]
text = "42"
usage = { input_tokens = 1000, output_tokens = 100, cached_input_tokens = 400 }
"#;

fn cadre(ws: &Path, model: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.arg("--workspace").arg(ws).arg("--model").arg(model);
    cmd.env_remove("CADRE_MODEL").env_remove("CADRE_STORE_URL");
    cmd.env("XDG_CONFIG_HOME", ws.join("nocfg"));
    cmd
}

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_tree_nests_each_child_under_its_parent_with_its_turns_tokens_and_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    for (name, extra) in [("planner", "can_delegate: true\n"), ("counter", "")] {
        std::fs::write(
            ws.join(format!(".cadre/agents/{name}.md")),
            format!("---\nname: {name}\ndescription: Works.\n{extra}workspace: {{mode: shared}}\n---\nYou work.\n"),
        )
        .unwrap();
    }
    let script = ws.join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let model = format!("scripted:{}", script.display());
    stdout(cadre(ws, &model).args(["run", "go"]));

    let list: Vec<Value> =
        serde_json::from_str(&stdout(cadre(ws, &model).args(["tasks", "list", "--json"]))).unwrap();
    assert_eq!(list.len(), 3, "{list:?}");
    let session = list.iter().find(|t| t["agent_id"] == "planner").unwrap()["parent_session_id"]
        .as_str()
        .unwrap()
        .to_string();

    // Without a session: the newest top-level session, this one.
    let tree: Value =
        serde_json::from_str(&stdout(cadre(ws, &model).args(["tasks", "tree", "--json"]))).unwrap();
    assert_eq!(tree["session"], session.as_str());
    assert_eq!(tree["tasks"], 3);
    let top = tree["children"].as_array().unwrap();
    let agents: Vec<&str> = top
        .iter()
        .map(|t| t["agent_id"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["planner", "counter"], "{tree:#}");
    let planner = &top[0];
    assert_eq!(planner["turns"], 2);
    assert_eq!(planner["status"], "completed");
    assert_eq!(planner["complete"], true);
    let under = planner["children"].as_array().unwrap();
    assert_eq!(under.len(), 1, "{tree:#}");
    assert_eq!(under[0]["agent_id"], "counter");
    assert_eq!(under[0]["turns"], 1);
    assert_eq!(under[0]["usage"]["input_tokens"], 1000);
    assert_eq!(under[0]["usage"]["cached_input_tokens"], 400);
    assert!(under[0]["children"].as_array().unwrap().is_empty());
    // A task's usage is its subtree's: the planner's two turns and its counter's.
    assert_eq!(planner["usage"]["input_tokens"], 1500);
    assert_eq!(planner["usage"]["output_tokens"], 150);
    assert_eq!(top[1]["usage"]["input_tokens"], 1000);
    // The session's total counts each task once: 1500 + 1000 in, 150 + 100 out.
    assert_eq!(tree["usage"]["input_tokens"], 2500);
    assert_eq!(tree["usage"]["output_tokens"], 250);
    assert_eq!(tree["usage"]["cached_input_tokens"], 800);

    let text = stdout(cadre(ws, &model).args(["tasks", "tree", &session]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(&format!(
            "session {session} · 3 tasks · tokens 2750 (in 2500, cached 800, out 250)"
        )),
        "{text}"
    );
    assert!(lines[1].starts_with("├─ planner  "), "{text}");
    assert!(
        lines[1].contains("  completed ✓  2 turns  tokens 1650 "),
        "{text}"
    );
    assert!(lines[2].starts_with("│  └─ counter  "), "{text}");
    assert!(
        lines[2].contains("  completed ✓  1 turn  tokens 1100 "),
        "{text}"
    );
    assert!(lines[3].starts_with("└─ counter  "), "{text}");
    assert_eq!(lines.len(), 4, "{text}");
}

#[test]
fn an_empty_store_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = cadre(dir.path(), "scripted:none")
        .args(["tasks", "tree"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no tasks in the store"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
