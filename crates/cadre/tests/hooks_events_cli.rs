//! The hook events beyond tool calls, end to end with the scripted model: a
//! `PermissionRequest` hook answers a background child's approvals (allow writes, deny
//! refuses with the hook's message, a deny rule still wins), `Notification` hears of an
//! approval that waits, `PreCompact` blocks a compaction, `SessionEnd` fires once per run
//! (and in the REPL with `clear` and `prompt_input_exit`),
//! the team board's `TaskCreated` / `TaskCompleted` refuse with exit 2 and `TeammateIdle`
//! follows a member's run; and an `http` handler's answer decides a call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::time::Duration;

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

fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn final_output(events: &[Value]) -> String {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "done")
        .and_then(|e| e["output"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The JSON lines a logging hook appended to `<ws>/<file>`.
fn logged(ws: &Path, file: &str) -> Vec<Value> {
    std::fs::read_to_string(ws.join(file))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A handler that appends its stdin, one line, to `<ws>/<file>`.
fn log_to(file: &str) -> String {
    format!(
        "{{\"type\": \"command\", \"command\": \"cat >> \\\"$CADRE_WORKSPACE/{file}\\\"; echo >> \\\"$CADRE_WORKSPACE/{file}\\\"\"}}"
    )
}

const PERMISSION_HOOK: &str = r#"input=$(cat)
printf '%s\n' "$input" >> "$CADRE_WORKSPACE/perm.jsonl"
case "$input" in
  *'"path":"bg-ok.txt"'*|*'"path":"locked/'*)
    echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}' ;;
  *'"path":"bg-no.txt"'*)
    echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "the hook says no"}}}' ;;
esac
exit 0
"#;

const PERMISSION_SCRIPT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [
  { name = "task", args = { subagent_type = "bg", description = "bg job", prompt = "write", background = true } },
  { name = "write_file", args = { path = "main.txt", content = "asked" } },
]
[[scripts.turns]]
text = "waiting"
[[scripts.turns]]
text = "main got: {{user}}"

[[scripts]]
agent = "bg"
[[scripts.turns]]
tool_calls = [
  { name = "write_file", id = "w-ok", args = { path = "bg-ok.txt", content = "written" } },
  { name = "write_file", id = "w-no", args = { path = "bg-no.txt", content = "never" } },
  { name = "write_file", id = "w-locked", args = { path = "locked/x.txt", content = "never" } },
]
[[scripts.turns]]
text = "bg saw: {{tool_results}}"
"#;

#[test]
fn a_permission_request_hook_answers_a_background_childs_approvals_and_notification_hears_the_rest()
{
    let d = tempfile::tempdir().unwrap();
    let ws = &d.path().canonicalize().unwrap();
    write(
        ws,
        ".cadre/agents/bg.md",
        "---\nname: bg\ndescription: Writes in the background.\ntools: write_file\n---\nYou write.\n",
    );
    write(ws, ".claude/perm.sh", PERMISSION_HOOK);
    write(
        ws,
        ".claude/settings.json",
        &format!(
            r#"{{"permissions": {{"deny": ["Write(locked/**)"]}},
              "hooks": {{
              "PermissionRequest": [{{"matcher": "Write", "hooks": [
                {{"type": "command", "command": "sh \"$CLAUDE_PROJECT_DIR/.claude/perm.sh\""}}]}}],
              "SubagentStop": [{{"hooks": [{stop}]}}],
              "Notification": [{{"matcher": "permission_prompt", "hooks": [{note}]}},
                               {{"matcher": "idle_prompt", "hooks": [{never}]}}]
            }}}}"#,
            note = log_to("note.jsonl"),
            stop = log_to("stop.jsonl"),
            never = log_to("never.jsonl"),
        ),
    );
    write(ws, "s.toml", PERMISSION_SCRIPT);
    let model = format!("scripted:{}", ws.join("s.toml").display());
    // Default mode: writes are asked; a background child's questions are refused unless
    // a hook answers them, and `cadre run` refuses the main agent's.
    let out = cadre(ws)
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The hook's allow answered the child's approval: the write happened.
    assert_eq!(
        std::fs::read_to_string(ws.join("bg-ok.txt")).unwrap(),
        "written"
    );
    // Its deny stopped the other, and the child read the hook's message.
    assert!(!ws.join("bg-no.txt").exists());
    // (The child's answer, from its SubagentStop: whether the parent's script reads it
    // in its second or third turn depends on when the child ends.)
    let stop = logged(ws, "stop.jsonl");
    assert_eq!(stop.len(), 1, "{stop:?}");
    let said = stop[0]["last_assistant_message"].as_str().unwrap();
    assert!(said.contains("the hook says no"), "{said}");
    assert!(said.contains("a PermissionRequest hook"), "{said}");
    // A deny rule wins over any hook: it was never asked about.
    assert!(!ws.join("locked/x.txt").exists());
    assert!(!ws.join("main.txt").exists(), "nobody approved it");
    let perm = logged(ws, "perm.jsonl");
    let mut paths: Vec<&str> = perm
        .iter()
        .map(|j| j["tool_input"]["path"].as_str().unwrap())
        .collect();
    paths.sort_unstable();
    assert_eq!(paths, ["bg-no.txt", "bg-ok.txt", "main.txt"], "{perm:?}");
    for j in &perm {
        assert_eq!(j["hook_event_name"], "PermissionRequest");
        assert_eq!(j["tool_name"], "Write");
        assert_eq!(j["cadre_tool_name"], "write_file");
        assert_eq!(j["permission_mode"], "default");
        assert!(j["permission_suggestions"].is_array(), "{j}");
        if j["tool_input"]["path"] == "main.txt" {
            assert!(j.get("agent_id").is_none(), "{j}");
        } else {
            assert_eq!(j["agent_type"], "bg");
            assert!(j["agent_id"].as_str().is_some_and(|s| !s.is_empty()));
        }
    }
    // Only the main agent's approval waited for someone: one notification, matched on
    // its type.
    let note = logged(ws, "note.jsonl");
    assert_eq!(note.len(), 1, "{note:?}");
    assert_eq!(note[0]["hook_event_name"], "Notification");
    assert_eq!(note[0]["notification_type"], "permission_prompt");
    assert!(
        note[0]["message"].as_str().unwrap().contains("write_file"),
        "{note:?}"
    );
    assert!(logged(ws, "never.jsonl").is_empty());
}

#[test]
fn pre_compact_exit_2_blocks_the_compaction_and_session_end_fires_once_per_run() {
    let d = tempfile::tempdir().unwrap();
    let ws = &d.path().canonicalize().unwrap();
    write(
        ws,
        ".cadre/config.toml",
        "[compaction]\nenabled = false\nkeep_recent_turns = 1\n",
    );
    write(
        ws,
        ".claude/settings.json",
        &format!(
            r#"{{"hooks": {{
              "SessionEnd": [{{"matcher": "other", "hooks": [{end}]}}],
              "PreCompact": [{{"matcher": "manual", "hooks": [{pre},
                {{"type": "command", "command": "grep -q keep-x && {{ echo 'not now' >&2; exit 2; }}; exit 0"}}]}}]
            }}}}"#,
            end = log_to("end.jsonl"),
            pre = log_to("pre.jsonl"),
        ),
    );
    write(
        ws,
        "s.toml",
        "[[scripts]]\n[[scripts.turns]]\ntext = \"one\"\n[[scripts.turns]]\ntext = \"two\"\n\
         [[scripts.turns]]\ntext = \"three\"\n",
    );
    let model = format!("scripted:{}", ws.join("s.toml").display());
    let run = |args: &[&str]| {
        let out = cadre(ws)
            .args(["--model", &model, "run", "--output", "jsonl"])
            .args(args)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        events(&out.stdout)
    };
    let first = run(&["first"]);
    let session = first[0]["session_id"].as_str().unwrap().to_string();
    run(&["--resume", &session, "second"]);
    let third = run(&[
        "--resume",
        &session,
        "--compact-now=keep-x in mind",
        "third",
    ]);
    // The hook blocked it: no compaction, a notice with the hook's reason, the run went on.
    assert!(
        !third.iter().any(|e| e["type"] == "compaction"),
        "{third:?}"
    );
    let notice = third
        .iter()
        .filter_map(|e| e["message"].as_str())
        .find(|m| m.contains("PreCompact"))
        .unwrap_or_default();
    assert!(notice.contains("not now"), "{third:?}");
    assert_eq!(final_output(&third), "three");
    let pre = logged(ws, "pre.jsonl");
    assert_eq!(pre.len(), 1, "{pre:?}");
    assert_eq!(pre[0]["hook_event_name"], "PreCompact");
    assert_eq!(pre[0]["trigger"], "manual");
    assert_eq!(pre[0]["custom_instructions"], "keep-x in mind");
    assert_eq!(pre[0]["session_id"], session.as_str());
    // One SessionEnd per run, for its session, with Claude Code's reason for a run's end.
    let end = logged(ws, "end.jsonl");
    assert_eq!(end.len(), 3, "{end:?}");
    for j in &end {
        assert_eq!(j["hook_event_name"], "SessionEnd");
        assert_eq!(j["reason"], "other");
        assert_eq!(j["session_id"], session.as_str());
        assert_eq!(j["cwd"], ws.display().to_string());
    }
}

const TEAM_SCRIPT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "planner", description = "plan", prompt = "plan", team = "t" } }]
[[scripts.turns]]
text = "main got: {{tool_results}}"

[[scripts]]
agent = "planner"
[[scripts.turns]]
tool_calls = [{ name = "board_add", args = { title = "ok item", detail = "the detail" } }]
[[scripts.turns]]
tool_calls = [{ name = "board_claim", args = { id = 1 } }]
[[scripts.turns]]
tool_calls = [
  { name = "board_add", args = { title = "forbidden item" } },
  { name = "board_done", args = { id = 1, result = "nope" } },
]
[[scripts.turns]]
text = "planner saw: {{tool_results}}"
"#;

#[test]
fn task_created_and_task_completed_guard_the_board_and_teammate_idle_follows_a_members_run() {
    let d = tempfile::tempdir().unwrap();
    let ws = &d.path().canonicalize().unwrap();
    write(ws, ".cadre/config.toml", "[subagents]\nteams = true\n");
    write(
        ws,
        ".cadre/agents/planner.md",
        "---\nname: planner\ndescription: Plans.\ntools: list_dir\n---\nYou plan.\n",
    );
    write(
        ws,
        ".claude/settings.json",
        &format!(
            r#"{{"hooks": {{
              "TaskCreated": [{{"hooks": [{created},
                {{"type": "command", "command": "grep -q forbidden && {{ echo 'no forbidden items' >&2; exit 2; }}; exit 0"}}]}}],
              "TaskCompleted": [{{"hooks": [{completed},
                {{"type": "command", "command": "grep -q nope && {{ echo 'show the tests first' >&2; exit 2; }}; exit 0"}}]}}],
              "TeammateIdle": [{{"hooks": [{idle}]}}]
            }}}}"#,
            created = log_to("created.jsonl"),
            completed = log_to("completed.jsonl"),
            idle = log_to("idle.jsonl"),
        ),
    );
    write(ws, "s.toml", TEAM_SCRIPT);
    let model = format!("scripted:{}", ws.join("s.toml").display());
    let out = cadre(ws)
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said = final_output(&events(&out.stdout));
    // Exit 2 refused the add and the done; the member read each hook's reason.
    assert!(said.contains("no forbidden items"), "{said}");
    assert!(said.contains("TaskCreated"), "{said}");
    assert!(said.contains("show the tests first"), "{said}");
    assert!(said.contains("TaskCompleted"), "{said}");
    let created = logged(ws, "created.jsonl");
    let mut subjects: Vec<&str> = created
        .iter()
        .map(|j| j["task_subject"].as_str().unwrap())
        .collect();
    subjects.sort_unstable();
    assert_eq!(subjects, ["forbidden item", "ok item"], "{created:?}");
    for j in &created {
        assert_eq!(j["hook_event_name"], "TaskCreated");
        assert_eq!(j["team_name"], "t");
        assert_eq!(j["teammate_name"], "planner");
        assert_eq!(j["agent_type"], "planner");
        // Asked before the item exists: it has no number yet.
        assert!(j.get("task_id").is_none(), "{j}");
    }
    let ok = created.iter().find(|j| j["task_subject"] == "ok item");
    assert_eq!(ok.unwrap()["task_description"], "the detail");
    let completed = logged(ws, "completed.jsonl");
    assert_eq!(completed.len(), 1, "{completed:?}");
    let c = &completed[0];
    assert_eq!(c["hook_event_name"], "TaskCompleted");
    assert_eq!(c["task_id"], "1");
    assert_eq!(c["task_subject"], "ok item");
    assert_eq!(c["task_description"], "the detail");
    assert_eq!(c["task_result"], "nope");
    assert_eq!(c["team_name"], "t");
    assert_eq!(c["teammate_name"], "planner");
    let idle = logged(ws, "idle.jsonl");
    assert_eq!(idle.len(), 1, "{idle:?}");
    assert_eq!(idle[0]["hook_event_name"], "TeammateIdle");
    assert_eq!(idle[0]["teammate_name"], "planner");
    assert_eq!(idle[0]["team_name"], "t");
}

/// Accept one request on `listener`, answer it with `reply` and give its body.
fn serve_once(listener: std::net::TcpListener, reply: &'static str) -> String {
    let (stream, _) = listener.accept().unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).unwrap();
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reply.len()
    )
    .unwrap();
    String::from_utf8(body).unwrap()
}

#[test]
fn an_http_hook_gets_the_event_posted_and_its_answer_decides_the_call() {
    let d = tempfile::tempdir().unwrap();
    let ws = &d.path().canonicalize().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let body = serve_once(
            listener,
            r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "the endpoint says no"}}"#,
        );
        let _ = tx.send(body);
    });
    write(
        ws,
        ".claude/settings.json",
        &format!(
            r#"{{"hooks": {{"PreToolUse": [{{"matcher": "Bash", "hooks": [
                {{"type": "http", "url": "http://127.0.0.1:{port}/hook", "timeout": 20}}]}}]}}}}"#
        ),
    );
    write(
        ws,
        "s.toml",
        r#"
[[scripts]]
[[scripts.turns]]
tool_calls = [{ name = "bash", id = "call-1", args = { command = "touch made.txt" } }]
[[scripts.turns]]
text = "saw: {{tool_results}}"
"#,
    );
    let model = format!("scripted:{}", ws.join("s.toml").display());
    let out = cadre(ws)
        .args(["--model", &model, "run", "--permission-mode", "bypass"])
        .args(["--output", "jsonl", "go"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said = final_output(&events(&out.stdout));
    assert!(said.contains("the endpoint says no"), "{said}");
    assert!(!ws.join("made.txt").exists());
    let body = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let j: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(j["hook_event_name"], "PreToolUse");
    assert_eq!(j["tool_name"], "Bash");
    assert_eq!(j["tool_input"]["command"], "touch made.txt");
    assert_eq!(j["tool_use_id"], "call-1");
}

#[test]
fn the_repl_ends_its_sessions_with_clear_and_prompt_input_exit() {
    let d = tempfile::tempdir().unwrap();
    let ws = &d.path().canonicalize().unwrap();
    write(
        ws,
        ".claude/settings.json",
        &format!(
            r#"{{"hooks": {{"SessionEnd": [{{"hooks": [{end}]}}]}}}}"#,
            end = log_to("end.jsonl")
        ),
    );
    write(
        ws,
        "s.toml",
        "[[scripts]]\n[[scripts.turns]]\ntext = \"answered\"\n",
    );
    let model = format!("scripted:{}", ws.join("s.toml").display());
    // Not a terminal: the line REPL; the input ends after the second prompt.
    let out = cadre(ws)
        .args(["--model", &model])
        .write_stdin("hello\n/clear\nhi again\n")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let end = logged(ws, "end.jsonl");
    let reasons: Vec<&str> = end.iter().map(|j| j["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["clear", "prompt_input_exit"], "{end:?}");
    // Each for its own session: the one /clear left, then the one the input ended.
    assert_ne!(end[0]["session_id"], end[1]["session_id"]);
    for j in &end {
        let id = j["session_id"].as_str().unwrap();
        assert!(stderr.contains(id), "{id} not in {stderr}");
        assert_eq!(j["hook_event_name"], "SessionEnd");
    }
}
