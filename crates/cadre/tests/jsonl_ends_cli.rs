//! `cadre run` end to end on how ends are reported: every sub-agent end in the JSONL stream
//! carries its state, completeness, reason and usage as fields, and `cadre run --agent`
//! ends with a `done` event (JSONL) or a summary line (text) naming the state its exit code
//! reports; and a call a policy refuses announces no approval request.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use cli_support::cadre;

/// A workspace with agent files (each with the extra frontmatter `front`), a
/// `.cadre/config.toml` and a script; returns the `--model` value.
fn workspace_with(
    agents: &[&str],
    front: &str,
    config: &str,
    script: &str,
) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let agents_dir = dir.path().join(".cadre/agents");
    std::fs::create_dir_all(&agents_dir).unwrap();
    for name in agents {
        std::fs::write(
            agents_dir.join(format!("{name}.md")),
            format!(
                "---\nname: {name}\ndescription: The {name} agent.\nworkspace: {{mode: shared}}\n{front}---\nYou are {name}.\n"
            ),
        )
        .unwrap();
    }
    std::fs::write(dir.path().join(".cadre/config.toml"), config).unwrap();
    let path = dir.path().join("script.toml");
    std::fs::write(&path, script).unwrap();
    (dir, format!("scripted:{}", path.display()))
}

fn workspace(agents: &[&str], config: &str, script: &str) -> (tempfile::TempDir, String) {
    workspace_with(agents, "", config, script)
}

fn jsonl(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn total(v: &serde_json::Value) -> u64 {
    v["input_tokens"].as_u64().unwrap() + v["output_tokens"].as_u64().unwrap()
}

const TWO_CHILDREN: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
usage = { input_tokens = 10, output_tokens = 0 }
tool_calls = [{ name = "task", args = { subagent_type = "c1", prompt = "first" } }]
[[scripts.turns]]
usage = { input_tokens = 10, output_tokens = 0 }
tool_calls = [{ name = "task", args = { subagent_type = "c2", prompt = "second" } }]
[[scripts.turns]]
text = "main done"

[[scripts]]
agent = "c1"
[[scripts.turns]]
usage = { input_tokens = 2200, output_tokens = 0 }
text = "c1 partial"
tool_calls = [{ name = "list_dir", args = { path = "." } }]
[[scripts.turns]]
usage = { input_tokens = 0, output_tokens = 0 }
text = "c1 done"

[[scripts]]
agent = "c2"
[[scripts.turns]]
usage = { input_tokens = 2200, output_tokens = 0 }
text = "c2 partial"
tool_calls = [{ name = "list_dir", args = { path = "." } }]
[[scripts.turns]]
usage = { input_tokens = 0, output_tokens = 0 }
text = "c2 done"
"#;

#[test]
fn every_subagent_end_in_jsonl_carries_state_complete_reason_and_usage() {
    let (dir, model) = workspace(&["c1", "c2"], "[limits]\nmax_tokens = 3000\n", TWO_CHILDREN);
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let events = jsonl(&out.stdout);
    let end = |agent: &str| {
        let ends: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| {
                e["type"] == "subagent_update"
                    && e["update"]["agent"] == agent
                    && ["done", "error", "cancelled"]
                        .contains(&e["update"]["kind"].as_str().unwrap())
            })
            .map(|e| &e["update"])
            .collect();
        assert_eq!(ends.len(), 1, "{agent}: one end: {ends:?}");
        ends[0].clone()
    };
    let c1 = end("c1");
    assert_eq!(c1["kind"], "done", "{c1}");
    assert_eq!(c1["state"], "completed", "{c1}");
    assert_eq!(c1["complete"], true, "{c1}");
    assert!(c1.get("reason").is_none(), "{c1}");
    assert_eq!(total(&c1["usage"]), 2200, "{c1}");
    let c2 = end("c2");
    assert_eq!(c2["kind"], "error", "{c2}");
    assert_eq!(c2["state"], "limit_reached", "{c2}");
    assert_eq!(c2["limit"], "tokens", "{c2}");
    assert_eq!(c2["complete"], false, "{c2}");
    assert_eq!(c2["reason"], "budget", "{c2}");
    assert_eq!(total(&c2["usage"]), 2200, "{c2}");
    // Progress updates are not ends: they carry no state.
    let progress = events
        .iter()
        .filter(|e| e["type"] == "subagent_update" && e["update"]["kind"] == "tool_start")
        .collect::<Vec<_>>();
    assert!(!progress.is_empty());
    for p in progress {
        assert!(p["update"].get("state").is_none(), "{p}");
    }
}

const ONE_AGENT_OVER_BUDGET: &str = r#"
[[scripts]]
agent = "c1"
[[scripts.turns]]
usage = { input_tokens = 2200, output_tokens = 0 }
text = "c1 partial"
tool_calls = [{ name = "list_dir", args = { path = "." } }]
[[scripts.turns]]
usage = { input_tokens = 0, output_tokens = 0 }
text = "c1 done"
"#;

const ONE_AGENT_DONE: &str = r#"
[[scripts]]
agent = "c1"
[[scripts.turns]]
usage = { input_tokens = 30, output_tokens = 4 }
text = "c1 answered"
"#;

#[test]
fn run_agent_in_jsonl_ends_with_a_done_event_like_any_run() {
    for (script, code, state) in [
        (ONE_AGENT_DONE, 0, "completed"),
        (ONE_AGENT_OVER_BUDGET, 3, "limit_reached"),
    ] {
        let (dir, model) = workspace_with(&["c1"], "max_tokens: 1000\n", "", script);
        let out = cadre(dir.path())
            .args([
                "--model", &model, "run", "--agent", "c1", "--output", "jsonl", "go",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{state}: {stderr}");
        let events = jsonl(&out.stdout);
        let done = events.last().unwrap();
        assert_eq!(done["type"], "done", "{state}: {done}");
        assert_eq!(done["state"], state, "{done}");
        assert_eq!(done["complete"], code == 0, "{done}");
        assert_eq!(done["turns"], 1, "{done}");
        let tokens = if code == 0 { 34 } else { 2200 };
        assert_eq!(total(&done["usage"]), tokens, "{done}");
        if code == 0 {
            assert_eq!(done["output"], "c1 answered", "{done}");
        } else {
            assert_eq!(done["reason"], "budget", "{done}");
        }
        assert_eq!(
            events.iter().filter(|e| e["type"] == "done").count(),
            1,
            "{state}: one done"
        );
    }
}

#[test]
fn run_agent_summary_names_the_end_state_its_exit_code_reports() {
    for (script, code, word) in [
        (ONE_AGENT_DONE, 0, "completed"),
        (ONE_AGENT_OVER_BUDGET, 3, "limit reached (token budget)"),
    ] {
        let (dir, model) = workspace_with(&["c1"], "max_tokens: 1000\n", "", script);
        let out = cadre(dir.path())
            .args(["--model", &model, "run", "--agent", "c1", "go"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{word}: {stderr}");
        let summary = stderr
            .lines()
            .find(|l| l.starts_with("— [c1] "))
            .unwrap_or_else(|| panic!("a summary line: {stderr}"));
        assert!(
            summary.starts_with(&format!("— [c1] {word} · ")),
            "exit {code}: {summary}"
        );
    }
}

const BACKGROUND_BASH: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "bg", description = "bg job", prompt = "write", background = true } }]
[[scripts.turns]]
text = "waiting"
[[scripts.turns]]
text = "main got: {{user}}"

[[scripts]]
agent = "bg"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { command = "echo x > touched.txt" } }]
[[scripts.turns]]
text = "bg: {{tool_results}}"
"#;

#[test]
fn a_background_call_the_policy_refuses_announces_no_approval_request() {
    let (dir, model) = workspace(&["bg"], "", BACKGROUND_BASH);
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let events = jsonl(&out.stdout);
    let asked: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "approval_required")
        .collect();
    assert!(asked.is_empty(), "nobody is asked: {asked:?}");
    // The refusal went straight back to the child as the call's result.
    let refused = events
        .iter()
        .find(|e| {
            e["type"] == "subagent_update"
                && e["update"]["agent"] == "bg"
                && e["update"]["kind"] == "tool_result"
        })
        .expect("the child's bash result");
    let text = refused["update"]["text"].as_str().unwrap();
    assert!(
        text.contains("subagents.background_approvals = \"deny\""),
        "{refused}"
    );
    assert!(!dir.path().join("touched.txt").exists());
}
