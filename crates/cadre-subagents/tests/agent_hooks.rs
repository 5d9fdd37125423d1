//! An agent file's `hooks:` front matter: its handlers run only for its children's events,
//! `hooks: {}` turns the inherited hooks off for them, a definition from a directory the
//! model can write gets neither, and a broken value is a warning, not a broken file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod defs_support;

use cadre_subagents::WRITABLE_NOTE;
use common::*;
use std::sync::Arc;

/// The main agent calls `bash`, then asks `AGENT` to, which calls `bash` once.
const SCRIPT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { text = "main" } }]
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "AGENT", prompt = "run bash" } }]
[[scripts.turns]]
text = "done"
[[scripts]]
agent = "AGENT"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { text = "child" } }]
[[scripts.turns]]
text = "child done"
"#;

/// The project's `PreToolUse` hook on Bash: appends each event's JSON to `hook.log`.
const PROJECT_LOG_HOOK: &str = r#"{"hooks": {"PreToolUse": [{"matcher": "Bash",
    "hooks": [{"type": "command", "command": "cat >> hook.log; echo >> hook.log"}]}]}}"#;

fn agent_file(name: &str, extra: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: The {name} agent.\nworkspace: shared\n{extra}---\nYou are {name}.\n"
    )
}

fn options(files: Vec<(&'static str, String)>) -> Options {
    Options {
        files,
        claude_hooks: true,
        tweak: Box::new(|c| c.base_tools = base_tools().with(Arc::new(TestTool("bash")))),
        ..Default::default()
    }
}

/// The results of `bash` as the model of `agent` last read them.
fn bash_results(f: &Fixture, agent: &str) -> Vec<(String, bool)> {
    let requests = f.rec.of(agent);
    let last = requests.last().expect("the agent made model calls");
    tool_results(&last.messages)
}

/// The events `hook.log` holds, as (agent_type, tool input text) of each.
fn logged(f: &Fixture) -> Vec<(Option<String>, String)> {
    let text = std::fs::read_to_string(f.ws.join("hook.log")).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let agent = v["agent_type"].as_str().map(str::to_string);
            (
                agent,
                v["tool_input"]["text"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_definitions_pre_tool_use_hook_blocks_its_child_but_not_the_main_agent() {
    let hooks = "hooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n        - type: command\n          command: \"echo 'guarded may not run bash' >&2; exit 2\"\n";
    let f = fixture(
        &SCRIPT.replace("AGENT", "guarded"),
        options(vec![(
            ".claude/agents/guarded.md",
            agent_file("guarded", hooks),
        )]),
    );
    let (out, _s) = f.run("go").await;
    assert!(out.state.is_complete(), "{:?}", out.state);
    let main = bash_results(&f, "main");
    assert_eq!(main[0], ("bash:main".to_string(), false), "{main:?}");
    let child = bash_results(&f, "guarded");
    assert_eq!(child.len(), 1, "{child:?}");
    assert!(child[0].1, "the child's call is refused: {child:?}");
    assert!(
        child[0].0.contains("guarded may not run bash"),
        "the child's model reads the hook's stderr: {child:?}"
    );
}

#[tokio::test]
async fn a_child_whose_definition_says_empty_hooks_runs_none_of_the_projects() {
    let f = fixture(
        &SCRIPT.replace("AGENT", "quiet"),
        options(vec![
            (".claude/settings.json", PROJECT_LOG_HOOK.to_string()),
            (
                ".claude/agents/quiet.md",
                agent_file("quiet", "hooks: {}\n"),
            ),
        ]),
    );
    let (out, _s) = f.run("go").await;
    assert!(out.state.is_complete(), "{:?}", out.state);
    assert_eq!(
        logged(&f),
        vec![(None, "main".to_string())],
        "only the main agent's call fires the project's hook"
    );
    let child = bash_results(&f, "quiet");
    assert_eq!(child, vec![("bash:child".to_string(), false)]);
}

#[tokio::test]
async fn a_model_writable_definition_gets_no_hooks_and_cannot_turn_them_off() {
    let canary = "hooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n        - command: touch canary\n";
    let script = format!(
        "{}{}",
        SCRIPT.replace("AGENT", "planted"),
        SCRIPT
            .replace("AGENT", "muted")
            .split("[[scripts]]\nagent = \"muted\"")
            .nth(1)
            .map(|rest| format!("[[scripts]]\nagent = \"muted\"{rest}"))
            .unwrap()
    );
    // The main agent asks `planted`, then `muted`.
    let script = script.replacen(
        "[[scripts.turns]]\ntext = \"done\"",
        "[[scripts.turns]]\ntool_calls = [{ name = \"task\", args = { subagent_type = \"muted\", prompt = \"run bash\" } }]\n[[scripts.turns]]\ntext = \"done\"",
        1,
    );
    let f = fixture(
        &script,
        options(vec![
            (".claude/settings.json", PROJECT_LOG_HOOK.to_string()),
            ("subagents/planted.md", agent_file("planted", canary)),
            ("subagents/muted.md", agent_file("muted", "hooks: {}\n")),
        ]),
    );
    let (out, _s) = f.run("go").await;
    assert!(out.state.is_complete(), "{:?}", out.state);
    assert!(
        !f.ws.join("canary").exists(),
        "a writable definition's hook ran"
    );
    assert_eq!(
        bash_results(&f, "planted"),
        vec![("bash:child".to_string(), false)]
    );
    let agents: Vec<Option<String>> = logged(&f).into_iter().map(|(a, _)| a).collect();
    assert_eq!(
        agents,
        vec![None, Some("planted".into()), Some("muted".into())],
        "the project's hook still runs in both children"
    );
    let registry = f.runtime.registry();
    for (name, what) in [
        ("planted", "`hooks` (1 handlers)"),
        ("muted", "`hooks: {}`"),
    ] {
        let warned = &registry.get(name).unwrap().warnings;
        assert!(
            warned
                .iter()
                .any(|w| w.contains(what) && w.contains(WRITABLE_NOTE)),
            "{name}: {warned:?}"
        );
    }
}

#[test]
fn a_malformed_hooks_value_is_a_warning_naming_the_file_and_the_agent_loads() {
    let ws = defs_support::Ws::new();
    let list = ws.write(
        ".claude/agents/listy.md",
        &agent_file("listy", "hooks: [1, 2]\n"),
    );
    let bad = ws.write(
        ".claude/agents/badgroup.md",
        &agent_file(
            "badgroup",
            "hooks:\n  PreToolUse: not-a-list\n  NoSuchEvent: []\n",
        ),
    );
    let reg = ws.registry();
    assert!(reg.errors().is_empty(), "{:?}", reg.errors());
    for (name, path, want) in [
        ("listy", &list, "not a table of events"),
        ("badgroup", &bad, "hooks.PreToolUse is not a list"),
        ("badgroup", &bad, "unknown hook event `NoSuchEvent`"),
    ] {
        let def = reg.get(name).unwrap();
        assert!(def.hooks.own().is_none_or(|s| s.entries().is_empty()));
        let source = format!("agent:{name} ({})", path.display());
        assert!(
            def.warnings
                .iter()
                .any(|w| w.starts_with(&source) && w.contains(want)),
            "{name}: {:?}",
            def.warnings
        );
    }
}

#[test]
fn an_agents_stop_hooks_are_its_subagent_stop_hooks() {
    let ws = defs_support::Ws::new();
    ws.write(
        ".claude/agents/stopper.md",
        &agent_file(
            "stopper",
            "hooks:\n  Stop:\n    - hooks:\n        - command: echo stop\n  SubagentStop:\n    - hooks:\n        - command: echo substop\n",
        ),
    );
    let reg = ws.registry();
    let set = reg.get("stopper").unwrap().hooks.own().cloned().unwrap();
    let events: Vec<&str> = set.entries().iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events, vec!["SubagentStop", "SubagentStop"]);
}
