//! `cadre tasks team`: a real run whose main agent spawns two members into a team; the
//! planner fills the board and writes to the coder and the lead, the coder (sent its next
//! task) claims an item and finishes it, and claims the other; the team is then read back from the store, as JSON and as text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use serde_json::Value;
use std::path::Path;

const SCRIPT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "agent_spawn", args = { agent_id = "coder", label = "coder", team = "t", task = "wait", timeout_seconds = 30 } }]
[[scripts.turns]]
tool_calls = [{ name = "agent_spawn", args = { agent_id = "planner", label = "planner", team = "t", task = "plan", timeout_seconds = 30 } }]
[[scripts.turns]]
tool_calls = [{ name = "agent_send", args = { label = "coder", message = "code", timeout_seconds = 30 } }]
[[scripts.turns]]
text = "the team is done"

[[scripts]]
agent = "planner"
[[scripts.turns]]
tool_calls = [{ name = "board_add", args = { title = "parse the config" } }]
[[scripts.turns]]
tool_calls = [{ name = "board_add", args = { title = "write docs" } }]
[[scripts.turns]]
tool_calls = [{ name = "team_send", args = { to = "coder", message = "take item 1" } }]
[[scripts.turns]]
tool_calls = [{ name = "team_send", args = { to = "lead", message = "planned" } }]
[[scripts.turns]]
text = "planned"

[[scripts]]
agent = "coder"
[[scripts.turns]]
text = "ready"
[[scripts.turns]]
tool_calls = [{ name = "board_claim", args = { id = 1 } }]
[[scripts.turns]]
tool_calls = [{ name = "board_done", args = { id = 1, result = "parsed" } }]
[[scripts.turns]]
tool_calls = [{ name = "board_claim", args = { id = 2 } }]
[[scripts.turns]]
text = "coded"
"#;

/// `cadre --model MODEL` in `ws` (the shared test environment).
fn cadre(ws: &Path, model: &str) -> assert_cmd::Command {
    let mut cmd = cli_support::cadre(ws);
    cmd.arg("--model").arg(model);
    cmd
}

fn run(cmd: &mut assert_cmd::Command) -> (bool, String, String) {
    let out = cmd.output().unwrap();
    let text = cli_support::text;
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_team_is_read_back_with_its_members_board_and_messages() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    for name in ["planner", "coder"] {
        std::fs::write(
            ws.join(format!(".cadre/agents/{name}.md")),
            format!("---\nname: {name}\ndescription: Works.\nworkspace: {{mode: shared}}\n---\nYou work.\n"),
        )
        .unwrap();
    }
    let script = ws.join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let model = format!("scripted:{}", script.display());
    let (ok, _, stderr) = run(cadre(ws, &model).args(["run", "go"]));
    assert!(ok, "{stderr}");
    let session = stderr
        .lines()
        .find_map(|l| l.strip_prefix("session: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session line in {stderr}"))
        .to_string();

    let (ok, out, err) = run(cadre(ws, &model).args(["tasks", "team", &session, "t", "--json"]));
    assert!(ok, "{err}");
    let team: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(team["team"], "t");
    assert_eq!(team["lead"], "main", "{team:#}");
    let members = team["members"].as_array().unwrap();
    let labels: Vec<&str> = members
        .iter()
        .map(|m| m["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["coder", "planner"], "{team:#}");
    let coder = &members[0];
    assert_eq!(coder["agent"], "coder");
    // A live member (agent_spawn) is between tasks: active, with no task of its own.
    assert_eq!(coder["active"], true, "{team:#}");
    assert_eq!(coder["claimed"], serde_json::json!([2]), "{team:#}");
    let board = team["board"].as_array().unwrap();
    assert_eq!(board.len(), 2, "{team:#}");
    assert_eq!(board[0]["status"], "done");
    assert_eq!(board[0]["claimed_by"], "coder");
    assert_eq!(board[0]["result"], "parsed");
    assert_eq!(board[1]["status"], "claimed");
    let said: Vec<(String, String, String)> = team["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap().to_string();
            (s("from"), s("to"), s("body"))
        })
        .collect();
    for want in [
        ("planner", "coder", "take item 1"),
        ("planner", "lead", "planned"),
    ] {
        assert!(
            said.iter()
                .any(|(f, t, b)| (f.as_str(), t.as_str(), b.as_str()) == want),
            "{want:?} in {said:?}"
        );
    }

    let (ok, text, err) = run(cadre(ws, &model).args(["tasks", "team", &session, "t"]));
    assert!(ok, "{err}");
    assert!(
        text.starts_with(&format!(
            "team t of session {session} · lead main · 2 members"
        )),
        "{text}"
    );
    assert!(
        text.contains("#1 [done] parse the config — coder: parsed"),
        "{text}"
    );
    assert!(text.contains("holds #2"), "{text}");
    assert!(text.contains("planner -> coder: take item 1"), "{text}");

    let (ok, _, err) = run(cadre(ws, &model).args(["tasks", "team", &session, "nope"]));
    assert!(!ok);
    assert!(err.contains("no team \"nope\""), "{err}");
}
