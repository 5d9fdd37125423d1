//! `todo_write` end to end: the plan reaches `--output jsonl` as `todo` events, a sub-agent
//! whose Claude Code file asks for `TodoWrite` keeps a plan of its own, and `--resume`
//! restates the plan before the model is asked again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use cli_support::cadre;
use serde_json::{Value, json};

const SCRIPT: &str = r#"
[[scripts]]
agent = "main"

[[scripts.turns]]
text = "Planning."
tool_calls = [
  { name = "todo_write", args = { todos = [
    { content = "read the code", status = "in_progress" },
    { content = "fix the bug", status = "pending" },
  ] } },
  { name = "task", args = { subagent_type = "planner", description = "plan", prompt = "plan it" } },
]

[[scripts.turns]]
text = "first run done"

[[scripts.turns]]
text = "resumed"

[[scripts]]
agent = "planner"

[[scripts.turns]]
tool_calls = [
  { name = "todo_write", args = { todos = [{ content = "child step", status = "completed" }] } },
]

[[scripts.turns]]
text = "child done"
"#;

const PLANNER: &str =
    "---\nname: planner\ndescription: Plans.\ntools: TodoWrite, Read\n---\nYou plan.\n";

fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8(stdout.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn todos(events: &[Value]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter(|e| e["type"] == "todo")
        .map(|e| (e["agent"].as_str().unwrap().to_string(), e["todos"].clone()))
        .collect()
}

#[test]
fn plans_show_up_as_jsonl_todo_events_per_agent_and_survive_resume() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(ws.join(".cadre/agents/planner.md"), PLANNER).unwrap();
    std::fs::write(ws.join("s.toml"), SCRIPT).unwrap();
    let model = format!("scripted:{}", ws.join("s.toml").display());

    let out = cadre(ws)
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("TodoWrite"), "no warning: {stderr}");
    let plan = json!([
        {"content": "read the code", "status": "in_progress"},
        {"content": "fix the bug", "status": "pending"}
    ]);
    let child_plan = json!([{"content": "child step", "status": "completed"}]);
    let first = events(&out.stdout);
    assert_eq!(
        todos(&first),
        [
            ("main".to_string(), plan.clone()),
            ("planner".to_string(), child_plan)
        ],
        "{first:?}"
    );
    // The child's plan carries the child's session, not the parent's.
    let main_session = first[0]["session_id"].as_str().unwrap();
    let child = first
        .iter()
        .find(|e| e["type"] == "todo" && e["agent"] == "planner")
        .unwrap();
    assert_ne!(child["session_id"], main_session);

    // Resuming restates the main agent's plan, before the next model reply.
    let out = cadre(ws)
        .args(["run", "--output", "jsonl", "--resume", main_session, "more"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = events(&out.stdout);
    assert_eq!(todos(&second), [("main".to_string(), plan)], "{second:?}");
    let restated = second.iter().position(|e| e["type"] == "todo").unwrap();
    let answered = second
        .iter()
        .position(|e| e["type"] == "text_delta")
        .unwrap();
    assert!(restated < answered, "{second:?}");

    // Text output shows the plan on stderr.
    let out = cadre(ws)
        .args(["--model", &model, "run", "go again"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("plan (0/2 done)"), "{stderr}");
    assert!(stderr.contains("▸ read the code"), "{stderr}");
    assert!(stderr.contains("[planner] plan (1/1 done)"), "{stderr}");
}
