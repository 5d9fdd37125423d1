//! Claude-Code-compatible hooks end to end: where they are read from (`cadre hooks list`),
//! and what they do to a real run with the scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use std::path::Path;

fn write(ws: &Path, rel: &str, text: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// `cadre` in `ws` with a home of its own (`~/.claude/settings.json` is read from it).
fn cadre(ws: &Path) -> assert_cmd::Command {
    let mut c = cli_support::cadre(ws);
    c.env("HOME", ws.join("home"));
    c
}

#[test]
fn hooks_list_shows_every_source_event_matcher_and_command() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path();
    write(
        ws,
        "home/.claude/settings.json",
        r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}]}]}}"#,
    );
    write(
        ws,
        ".claude/settings.json",
        r#"{"permissions": {"deny": ["Read(./secrets/**)"]},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "./.claude/guard.sh", "timeout": 5}]}]}}"#,
    );
    write(ws, ".claude/settings.local.json", "{ not json");
    write(
        ws,
        ".cadre/config.toml",
        "[[hooks.PostToolUse]]\nmatcher = \"write_file|edit_file\"\n\
         [[hooks.PostToolUse.hooks]]\ntype = \"command\"\ncommand = \"cargo fmt\"\n",
    );
    let out = cadre(ws).args(["hooks", "list"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<Vec<&str>> = stdout.lines().map(|l| l.split('\t').collect()).collect();
    let home = ws.join("home/.claude/settings.json").display().to_string();
    let project = ws.join(".claude/settings.json").display().to_string();
    let toml = ws.join(".cadre/config.toml").display().to_string();
    assert_eq!(
        lines,
        vec![
            vec![home.as_str(), "SessionStart", "*", "echo hi"],
            vec![project.as_str(), "PreToolUse", "Bash", "./.claude/guard.sh"],
            vec![
                toml.as_str(),
                "PostToolUse",
                "write_file|edit_file",
                "cargo fmt"
            ],
        ],
        "{stdout}"
    );
    // The broken file is a warning naming it; the rest still loads.
    assert!(
        stderr.contains("settings.local.json: hooks not read: not valid JSON"),
        "{stderr}"
    );
    // A config.toml with hooks is still a valid configuration for everything else.
    let out = cadre(ws).args(["agents", "list"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    write(
        ws,
        ".claude/settings.local.json",
        r#"{"disableAllHooks": true}"#,
    );
    let out = cadre(ws)
        .args(["hooks", "list", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 3);
    assert_eq!(rows[1]["matcher"], "Bash");
    assert_eq!(rows[1]["timeout_secs"], 5.0);
    assert_eq!(rows[1]["disabled"], true);
}

#[test]
fn hooks_list_shows_agent_files_handlers_with_their_agent_and_file() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().canonicalize().unwrap();
    let ws = ws.as_path();
    write(
        ws,
        ".claude/agents/guarded.md",
        "---\nname: guarded\ndescription: Guarded.\nhooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n        - command: ./guard.sh\n---\nbody\n",
    );
    write(
        ws,
        ".claude/agents/quiet.md",
        "---\nname: quiet\ndescription: Quiet.\nhooks: {}\n---\nbody\n",
    );
    // The model can write `subagents/`: its hooks are dropped, so not listed.
    write(
        ws,
        "subagents/planted.md",
        "---\nname: planted\ndescription: Planted.\nhooks:\n  PreToolUse:\n    - hooks:\n        - command: ./evil.sh\n---\nbody\n",
    );
    let out = cadre(ws).args(["hooks", "list"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = ws.join(".claude/agents/guarded.md").display().to_string();
    let source = format!("agent:guarded ({file})");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        vec![
            format!("{source}\tPreToolUse\tBash\t./guard.sh").as_str(),
            "agent:quiet: `hooks: {}`: its children run none of the hooks above",
        ],
        "{stdout}"
    );
}

/// A `--output jsonl` run's events.
fn events(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The final output of a jsonl run.
fn final_output(events: &[serde_json::Value]) -> String {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "done")
        .and_then(|e| e["output"].as_str())
        .unwrap_or_default()
        .to_string()
}

const GUARD: &str = r#"input=$(cat)
case "$input" in
  *'"command":"rm '*) echo "hook says: no rm in $CLAUDE_PROJECT_DIR" >&2; exit 2 ;;
esac
exit 0
"#;

const BLOCK_SCRIPT: &str = r#"
[[scripts]]
agent = "main"

[[scripts.turns]]
tool_calls = [
  { name = "bash", id = "call-rm", args = { command = "rm -f victim.txt" } },
  { name = "bash", id = "call-echo", args = { command = "echo hi" } },
]

[[scripts.turns]]
text = "saw: {{tool_results}}"
"#;

#[test]
fn pre_tool_use_blocks_rm_post_tool_use_gets_the_json_and_prompt_context_is_appended() {
    let d = tempfile::tempdir().unwrap();
    let ws = &d.path().canonicalize().unwrap();
    write(ws, ".claude/guard.sh", GUARD);
    write(ws, "victim.txt", "keep me");
    write(
        ws,
        ".claude/settings.json",
        r#"{"hooks": {
          "PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "sh \"$CLAUDE_PROJECT_DIR/.claude/guard.sh\""}]}],
          "PostToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "cat >> \"$CADRE_WORKSPACE/post.jsonl\"; echo >> \"$CADRE_WORKSPACE/post.jsonl\""}]}],
          "UserPromptSubmit": [{"hooks": [{"type": "command",
            "command": "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"UserPromptSubmit\", \"additionalContext\": \"CTX-FROM-HOOK\"}}'"}]}]
        }}"#,
    );
    write(ws, "s.toml", BLOCK_SCRIPT);
    let model = format!("scripted:{}", ws.join("s.toml").display());
    let out = cadre(ws)
        .args(["--model", &model, "run", "--permission-mode", "bypass"])
        .args(["--output", "jsonl", "the prompt"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let ev = events(&out.stdout);
    // The call was blocked and the model read the hook's stderr.
    assert!(ws.join("victim.txt").exists(), "rm was blocked");
    let said = final_output(&ev);
    assert!(
        said.contains(&format!("hook says: no rm in {}", ws.display())),
        "{said}"
    );
    // PostToolUse ran for the call that ran, with Claude Code's fields.
    let post = std::fs::read_to_string(ws.join("post.jsonl")).unwrap();
    let lines: Vec<&str> = post.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{post}");
    let j: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    let session = ev[0]["session_id"].as_str().unwrap();
    let obj = j.as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "cadre_tool_name",
            "cwd",
            "hook_event_name",
            "permission_mode",
            "session_id",
            "tool_input",
            "tool_name",
            "tool_response",
            "tool_use_id",
            "transcript_path"
        ]
    );
    assert_eq!(j["session_id"], session);
    let transcript = ws.join(format!(".cadre/sessions/{session}.jsonl"));
    assert_eq!(j["transcript_path"], transcript.display().to_string());
    assert!(transcript.exists());
    assert_eq!(j["cwd"], ws.display().to_string());
    assert_eq!(j["permission_mode"], "bypassPermissions");
    assert_eq!(j["hook_event_name"], "PostToolUse");
    assert_eq!(j["tool_name"], "Bash");
    assert_eq!(j["cadre_tool_name"], "bash");
    assert_eq!(j["tool_input"], serde_json::json!({"command": "echo hi"}));
    assert_eq!(j["tool_use_id"], "call-echo");
    assert!(j["tool_response"].as_str().unwrap().contains("hi"), "{j}");
    // The prompt's context follows the prompt, which is unchanged.
    let text = std::fs::read_to_string(&transcript).unwrap();
    let at_prompt = text.find("\"the prompt\"").expect("the prompt verbatim");
    let at_ctx = text
        .find("\"CTX-FROM-HOOK\"")
        .expect("the context verbatim");
    assert!(at_prompt < at_ctx, "{text}");
}

#[test]
fn broken_hooks_are_warnings_and_the_run_goes_on() {
    let d = tempfile::tempdir().unwrap();
    let ws = &d.path().canonicalize().unwrap();
    write(
        ws,
        ".claude/settings.json",
        r#"{"hooks": {"PreToolUse": [{"hooks": [
            {"type": "command", "command": "sleep 30", "timeout": 1},
            {"type": "command", "command": "printf '{\"a\": \"'; head -c 1048576 /dev/zero | tr '\\0' x"},
            {"type": "command", "command": "echo boom >&2; exit 1"},
            {"type": "command", "command": "echo '{\"hookSpecificOutput\": {'"}
        ]}]}}"#,
    );
    write(
        ws,
        "s.toml",
        "[[scripts]]\n[[scripts.turns]]\ntool_calls = [{ name = \"write_file\", args = { path = \"out.txt\", content = \"made\" } }]\n\
         [[scripts.turns]]\ntext = \"done\"\n",
    );
    let model = format!("scripted:{}", ws.join("s.toml").display());
    let started = std::time::Instant::now();
    let out = cadre(ws)
        .args([
            "--model",
            &model,
            "run",
            "--permission-mode",
            "bypass",
            "go",
        ])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "made");
    assert!(stderr.contains("hook `sleep 30` timed out"), "{stderr}");
    assert!(stderr.contains("exited with 1: boom"), "{stderr}");
    assert_eq!(
        stderr.matches("printed malformed JSON").count(),
        2,
        "{stderr}"
    );
    assert!(
        stderr.len() < 20_000,
        "the megabyte is not echoed: {}",
        stderr.len()
    );
}

#[test]
fn a_hook_allow_skips_the_ask_but_not_a_deny_rule_and_stop_can_ask_for_more() {
    let d = tempfile::tempdir().unwrap();
    let ws = &d.path().canonicalize().unwrap();
    write(
        ws,
        ".claude/settings.json",
        r#"{"hooks": {
          "PreToolUse": [{"matcher": "Write", "hooks": [{"type": "command",
            "command": "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"allow\"}}'"}]}],
          "Stop": [{"hooks": [{"type": "command",
            "command": "grep -q '\"stop_hook_active\":true' && exit 0; echo '{\"decision\": \"block\", \"reason\": \"now write the summary\"}'"}]}]
        }}"#,
    );
    write(
        ws,
        ".cadre/config.toml",
        "[permissions]\ndeny = [\"write_file(locked/**)\"]\n",
    );
    write(
        ws,
        "s.toml",
        r#"
[[scripts]]
[[scripts.turns]]
tool_calls = [
  { name = "write_file", args = { path = "free.txt", content = "ok" } },
  { name = "write_file", args = { path = "locked/x.txt", content = "no" } },
  { name = "write_file", args = { path = ".claude/settings.json", content = "{}" } },
]
[[scripts.turns]]
text = "first answer"
[[scripts.turns]]
text = "told: {{user}}"
"#,
    );
    let model = format!("scripted:{}", ws.join("s.toml").display());
    // The default mode asks for writes, and `cadre run` answers a question with deny.
    let out = cadre(ws)
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(std::fs::read_to_string(ws.join("free.txt")).unwrap(), "ok");
    assert!(!ws.join("locked/x.txt").exists(), "the deny rule holds");
    let settings = std::fs::read_to_string(ws.join(".claude/settings.json")).unwrap();
    assert!(
        settings.contains("PreToolUse"),
        "a protected path stays protected"
    );
    let ev = events(&out.stdout);
    assert!(
        !ev.iter().any(|e| e["type"] == "approval_required"),
        "nothing was asked"
    );
    // The Stop hook gave the model one more turn, then let it stop.
    assert_eq!(final_output(&ev), "told: now write the summary");
}

#[test]
fn a_prompt_blocked_by_user_prompt_submit_is_not_sent() {
    let d = tempfile::tempdir().unwrap();
    let ws = &d.path().canonicalize().unwrap();
    write(
        ws,
        ".claude/settings.json",
        r#"{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command",
            "command": "grep -q password && { echo 'no secrets in prompts' >&2; exit 2; }; exit 0"}]}]}}"#,
    );
    write(
        ws,
        "s.toml",
        "[[scripts]]\n[[scripts.turns]]\ntext = \"answered\"\n",
    );
    let model = format!("scripted:{}", ws.join("s.toml").display());
    let out = cadre(ws)
        .args(["--model", &model, "run", "my password is hunter2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(stderr.contains("no secrets in prompts"), "{stderr}");
    assert!(!stdout.contains("answered"), "{stdout}");
    let out = cadre(ws)
        .args(["--model", &model, "run", "hello"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("answered"));
}

const BACKGROUND_CHILD: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [
  { name = "task", args = { subagent_type = "bg", description = "bg job", prompt = "look", background = true } },
  { name = "task", args = { subagent_type = "bg", description = "fg job", prompt = "look" } },
]
[[scripts.turns]]
text = "waiting"
[[scripts.turns]]
text = "main got: {{user}}"

[[scripts]]
agent = "bg"
[[scripts.turns]]
tool_calls = [{ name = "list_dir", args = { path = "." } }]
[[scripts.turns]]
text = "bg saw: {{user}}"
"#;

#[test]
fn subagent_start_and_stop_fire_once_per_background_and_foreground_child_whose_tool_events_name_it()
{
    let d = tempfile::tempdir().unwrap();
    let ws = &d.path().canonicalize().unwrap();
    write(
        ws,
        ".cadre/agents/bg.md",
        "---\nname: bg\ndescription: Works in the background.\ntools: list_dir\n---\nYou work.\n",
    );
    let log = |file: &str| {
        format!(
            "{{\"type\": \"command\", \"command\": \"cat > \\\"$CADRE_WORKSPACE/{file}-$$.json\\\"\"}}"
        )
    };
    write(
        ws,
        ".claude/settings.json",
        &format!(
            r#"{{"hooks": {{
              "SubagentStart": [{{"matcher": "bg", "hooks": [{start},
                 {{"type": "command", "command": "echo START-CONTEXT"}}]}},
                 {{"matcher": "other", "hooks": [{never}]}}],
              "SubagentStop": [{{"hooks": [{stop}]}}],
              "PreToolUse": [{{"matcher": "LS", "hooks": [{pre}]}}]
            }}}}"#,
            start = log("start"),
            never = log("never"),
            stop = log("stop"),
            pre = log("pre"),
        ),
    );
    write(ws, "s.toml", BACKGROUND_CHILD);
    let model = format!("scripted:{}", ws.join("s.toml").display());
    let out = cadre(ws)
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // One file per hook run (children run at once: their hooks too).
    let read = |prefix: &str| -> Vec<serde_json::Value> {
        std::fs::read_dir(ws)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with(&format!("{prefix}-")) && name.ends_with(".json")
            })
            .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
            .collect()
    };
    let (start, stop, pre) = (read("start"), read("stop"), read("pre"));
    // One background and one foreground child: one start and one stop each.
    assert_eq!(start.len(), 2, "{start:?}");
    assert_eq!(stop.len(), 2, "{stop:?}");
    assert!(read("never").is_empty());
    let mut started: Vec<&str> = start
        .iter()
        .map(|j| j["agent_id"].as_str().unwrap())
        .collect();
    let mut stopped: Vec<&str> = stop
        .iter()
        .map(|j| j["agent_id"].as_str().unwrap())
        .collect();
    started.sort_unstable();
    stopped.sort_unstable();
    assert_eq!(started, stopped);
    assert_ne!(started[0], started[1]);
    for j in start.iter().chain(&stop) {
        assert_eq!(j["agent_type"], "bg");
    }
    assert!(
        start
            .iter()
            .all(|j| j["hook_event_name"] == "SubagentStart")
    );
    for j in &stop {
        assert_eq!(j["hook_event_name"], "SubagentStop");
        assert_eq!(j["complete"], true);
        assert_eq!(j["state"], "completed");
        // The child's prompt got the start hook's context, after the prompt.
        assert_eq!(j["last_assistant_message"], "bg saw: look\n\nSTART-CONTEXT");
    }
    // Inside the children, tool events carry the child's task and definition.
    assert_eq!(pre.len(), 2, "{pre:?}");
    let mut pre_ids: Vec<&str> = pre
        .iter()
        .map(|j| j["agent_id"].as_str().unwrap())
        .collect();
    pre_ids.sort_unstable();
    assert_eq!(pre_ids, started);
    for j in &pre {
        assert_eq!(j["agent_type"], "bg");
        assert_eq!(j["tool_name"], "LS");
        assert_eq!(j["cadre_tool_name"], "list_dir");
    }
}

#[test]
fn an_agent_files_own_hooks_run_in_its_child_without_any_configured_hooks() {
    let d = tempfile::tempdir().unwrap();
    let ws = &d.path().canonicalize().unwrap();
    // No settings file and no `[hooks]`: only the agent file has hooks.
    write(
        ws,
        ".cadre/agents/checker.md",
        "---\nname: checker\ndescription: Checks.\ntools: list_dir\nhooks:\n  PreToolUse:\n    - matcher: LS\n      hooks:\n        - command: cat >> \"$CADRE_WORKSPACE/pre.log\"; echo >> \"$CADRE_WORKSPACE/pre.log\"\n  Stop:\n    - hooks:\n        - command: touch \"$CADRE_WORKSPACE/stop-canary\"\n---\nYou check.\n",
    );
    write(
        ws,
        "s.toml",
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "list_dir", args = { path = "." } }]
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "checker", description = "check", prompt = "look" } }]
[[scripts.turns]]
text = "main done"

[[scripts]]
agent = "checker"
[[scripts.turns]]
tool_calls = [{ name = "list_dir", args = { path = "." } }]
[[scripts.turns]]
text = "checked"
"#,
    );
    let model = format!("scripted:{}", ws.join("s.toml").display());
    let out = cadre(ws)
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The main agent's list_dir does not fire it; the child's does.
    let pre = std::fs::read_to_string(ws.join("pre.log")).unwrap_or_default();
    let agents: Vec<String> = pre
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            j["agent_type"].as_str().unwrap_or("main").to_string()
        })
        .collect();
    assert_eq!(agents, vec!["checker".to_string()], "{pre}");
    assert!(
        ws.join("stop-canary").exists(),
        "the agent's Stop ran as its SubagentStop"
    );
}
