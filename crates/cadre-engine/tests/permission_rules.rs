//! Permission rules judge what a call acts on after resolution: a table of call spellings
//! through the real built-in tools' subjects and the policy, and whole agent runs showing
//! that a chained command is not allowed by `bash(git status*)` and that `grep` without a
//! path does not print a file a `read_file` deny rule covers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::{ApprovalMode, PermissionPolicy, PermissionRules, PolicyDecision};
use cadre_tools::Workspace;
use cadre_tools::builtin::builtin_tools;
use cadre_types::{ApprovalDecision, EndState, Message};
use common::*;
use serde_json::{Value, json};

const ALLOW: &[&str] = &[
    "bash(git status*)",
    "bash(cargo test*)",
    "bash(tail *)",
    "write_file(src/**)",
];
const DENY: &[&str] = &["bash(rm -rf *)", "bash(git push*)", "read_file(secrets/**)"];

fn policy(mode: ApprovalMode) -> PermissionPolicy {
    let v = |x: &[&str]| {
        x.iter()
            .map(std::string::ToString::to_string)
            .collect::<Vec<_>>()
    };
    PermissionPolicy {
        mode,
        rules: PermissionRules::parse(&v(ALLOW), &v(DENY), &[]).unwrap(),
    }
}

/// A workspace with `src/`, `secrets/key`, a symlinked `pub -> secrets`, `srclink -> src`,
/// and a directory outside it.
struct Fixture {
    ws_dir: tempfile::TempDir,
    outside: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let ws_dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = ws_dir.path();
    for (path, text) in [
        ("src/main.rs", "fn main() {}\n"),
        ("src/notes.txt", "not the TOPSECRET itself\n"),
        ("secrets/key", "TOPSECRET=hunter2\n"),
        ("secrets/deeper/more", "TOPSECRET again\n"),
        ("docs/x.md", "# docs\n"),
        (".cadre/config.toml", "model = \"openai:x\"\n"),
    ] {
        std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
        std::fs::write(root.join(path), text).unwrap();
    }
    std::fs::write(outside.path().join("file"), "outside\n").unwrap();
    std::os::unix::fs::symlink(root.join("secrets"), root.join("pub")).unwrap();
    std::os::unix::fs::symlink(root.join("src"), root.join("srclink")).unwrap();
    Fixture { ws_dir, outside }
}

/// `allow`, `ask`, `deny`, or `refused` (the subject was refused before any rule).
fn decide(policy: &PermissionPolicy, ws: &Workspace, tool: &str, args: &Value) -> &'static str {
    let registry = builtin_tools();
    let t = registry.get(tool).unwrap();
    match t.permission_subject(args, ws) {
        Err(_) => "refused",
        Ok(subject) => match policy.decide(tool, &subject, t.is_read_only(), false) {
            PolicyDecision::Allow => "allow",
            PolicyDecision::Ask(_) => "ask",
            PolicyDecision::Deny(_) => "deny",
        },
    }
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
fn rules_judge_resolved_paths_and_each_simple_command() {
    let f = fixture();
    let ws = Workspace::new(f.ws_dir.path()).unwrap();
    let root = ws.root().display().to_string();
    let out = f.outside.path().display().to_string();
    let bash = |c: &str| ("bash", json!({ "command": c }));
    let read = |p: &str| ("read_file", json!({ "path": p }));
    let write = |p: &str| ("write_file", json!({ "path": p, "content": "x" }));
    let cases: Vec<((&str, Value), &str)> = vec![
        // Paths: every spelling of secrets/key is denied, outside paths are refused.
        (read("secrets/key"), "deny"),
        (read("./secrets/key"), "deny"),
        (read(&format!("{root}/secrets/key")), "deny"),
        (read("src/../secrets/key"), "deny"),
        (read("pub/key"), "deny"),
        (read("secrets/deeper/more"), "deny"),
        (read("src/main.rs"), "allow"),
        (read("./src//main.rs"), "allow"),
        (read("../x"), "refused"),
        (read("/etc/passwd"), "refused"),
        (read(&format!("{out}/file")), "refused"),
        (write("src/a.rs"), "allow"),
        (write("./src/a.rs"), "allow"),
        (write(&format!("{root}/src/deep/a.rs")), "allow"),
        (write("srclink/a.rs"), "allow"),
        (write("src/../.cadre/config.toml"), "refused"),
        (write("src/../../escape"), "refused"),
        (write("docs/x.md"), "ask"),
        // Reading tools: no path means the root; a read_file deny hides the subtree.
        (("grep", json!({ "pattern": "x" })), "allow"),
        (("glob", json!({ "pattern": "*" })), "allow"),
        (("list_dir", json!({})), "allow"),
        (
            ("grep", json!({ "pattern": "x", "path": "secrets" })),
            "deny",
        ),
        (
            ("grep", json!({ "pattern": "x", "path": "./pub/" })),
            "deny",
        ),
        (
            ("glob", json!({ "pattern": "*", "path": "secrets/deeper" })),
            "deny",
        ),
        (("list_dir", json!({ "path": "pub" })), "deny"),
        (("grep", json!({ "pattern": "x", "path": "src" })), "allow"),
        // Allowed commands, also with harmless redirections, pipes and spacing.
        (bash("git status"), "allow"),
        (bash("git  status\t -s"), "allow"),
        (bash("git status | tail -5"), "allow"),
        (bash("cargo test 2>&1 | tail -50"), "allow"),
        (bash("(git status) &"), "allow"),
        // Chains: every simple command needs an allow rule.
        (bash(&format!("git status; echo X > {out}/file")), "ask"),
        (bash("git status > out.txt"), "ask"),
        (bash("echo hi; git status"), "ask"),
        (bash("git status `id`"), "ask"),
        (bash("git status '"), "ask"),
        // Deny rules match any simple command, however it is spelled.
        (bash("git status*; rm -rf victim"), "deny"),
        (bash("git status && git push --force"), "deny"),
        (bash("git status\nrm -rf victim"), "deny"),
        (bash("git status $(rm -rf victim)"), "deny"),
        (bash("rm  -rf victim"), "deny"),
        (bash("/bin/rm -rf victim"), "deny"),
        (bash("command rm -rf victim"), "deny"),
        (bash("env rm -rf victim"), "deny"),
        (bash("sudo -u root rm -rf victim"), "deny"),
        (bash("nice -n 5 nohup rm -rf victim"), "deny"),
        (bash("\\rm -rf victim"), "deny"),
        (bash("'rm' \"-rf\" victim"), "deny"),
        (bash("bash -c 'cd /tmp && rm -rf victim'"), "deny"),
        (bash("find . -name victim -exec rm -rf {} +"), "deny"),
        (bash("rm -rf $DIR"), "deny"),
        // What a deny rule cannot see asks; other spellings of the words are other commands.
        (bash("$RM -rf victim"), "ask"),
        (bash("rm -rf vict*"), "deny"),
        (bash("ls | xargs rm -rf"), "ask"),
        (bash("eval \"$CODE\""), "ask"),
        (bash("rm -r -f victim"), "ask"),
    ];
    let ask = policy(ApprovalMode::Ask);
    let mut failures = Vec::new();
    for ((tool, args), want) in &cases {
        let got = decide(&ask, &ws, tool, args);
        if got != *want {
            failures.push(format!("{tool} {args}: got {got}, want {want}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(cases.len() >= 40);

    // In auto-approve mode unknown commands still ask when a deny rule cannot be checked,
    // and unparseable ones always ask; in read-only mode bash is refused.
    let auto = policy(ApprovalMode::AutoApprove);
    for (command, want) in [
        ("ls -la", "allow"),
        ("echo hi; git status", "allow"),
        ("$RM -rf victim", "ask"),
        ("cat $F", "allow"),
        ("rm -r -f vict*", "ask"),
        ("rm -r -f victim", "allow"),
        ("git status '", "ask"),
        ("rm -rf victim", "deny"),
    ] {
        let (tool, args) = bash(command);
        assert_eq!(
            decide(&auto, &ws, tool, &args),
            want,
            "auto-approve: {command}"
        );
    }
    let read_only = policy(ApprovalMode::ReadOnly);
    for command in ["git status", "git status '"] {
        let (tool, args) = bash(command);
        assert_eq!(
            decide(&read_only, &ws, tool, &args),
            "deny",
            "read-only: {command}"
        );
    }
}

fn tool_results(messages: &[Message]) -> Vec<(String, bool)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

fn script_of(calls: &[Value]) -> String {
    let calls: Vec<String> = calls
        .iter()
        .map(|c| {
            format!(
                "{{ name = {}, args_raw = {} }}",
                toml::Value::from(c["name"].as_str().unwrap()),
                toml::Value::from(c["args"].to_string())
            )
        })
        .collect();
    format!(
        "[[turns]]\ntool_calls = [{}]\n[[turns]]\ntext = \"done\"\n",
        calls.join(", ")
    )
}

#[tokio::test]
async fn an_allowed_prefix_does_not_run_a_chained_command_without_asking() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("file");
    let command = format!("git status; echo X > {}", target.display());
    let script = script_of(&[json!({ "name": "bash", "args": { "command": command } })]);
    let (model, _rec) = scripted(&script);
    let rules = PermissionRules::parse(&["bash(git status*)".to_string()], &[], &[]).unwrap();
    let agent = builder(model)
        .tools(builtin_tools())
        .permissions(PermissionPolicy {
            mode: ApprovalMode::Ask,
            rules,
        })
        .build();
    let h = Harness::with_answer(ApprovalDecision::Deny { feedback: None });
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "go").await;
    assert_eq!(out.state, EndState::Completed);
    assert_eq!(
        h.approvals.count(),
        1,
        "the chained command must be asked about"
    );
    let asked = h.approvals.asked.lock().unwrap()[0].clone();
    assert_eq!(asked.subject.as_deref(), Some(command.as_str()));
    assert_eq!(
        tool_results(session.messages()),
        [("denied by the user".to_string(), true)]
    );
    assert!(!target.exists(), "the redirect ran without approval");
}

#[tokio::test]
async fn grep_without_a_path_does_not_print_files_a_read_deny_covers() {
    let f = fixture();
    let script = script_of(&[
        json!({ "name": "grep", "args": { "pattern": "TOPSECRET" } }),
        json!({ "name": "glob", "args": { "pattern": "**/*" } }),
        json!({ "name": "list_dir", "args": {} }),
        json!({ "name": "read_file", "args": { "path": "./pub/key" } }),
    ]);
    let (model, _rec) = scripted(&script);
    let rules = PermissionRules::parse(&[], &["read_file(secrets/**)".to_string()], &[]).unwrap();
    let agent = builder(model)
        .tools(builtin_tools())
        .permissions(PermissionPolicy {
            mode: ApprovalMode::Ask,
            rules,
        })
        .build();
    let h = Harness::new();
    // Run in the fixture's workspace.
    let mut session = h.session();
    let run = h.run_context(&session);
    let ws = std::sync::Arc::new(Workspace::new(f.ws_dir.path()).unwrap());
    let out = agent
        .run(&mut session, Some("go".into()), run, ws, h.cancel.clone())
        .await;
    assert_eq!(out.state, EndState::Completed);
    let results = tool_results(session.messages());
    let (grep, glob, list, read) = (&results[0], &results[1], &results[2], &results[3]);
    assert_eq!(grep.0, "src/notes.txt:1:not the TOPSECRET itself\n");
    assert!(!glob.0.contains("secrets/"), "{}", glob.0);
    assert!(glob.0.contains("src/main.rs"), "{}", glob.0);
    assert!(!list.0.contains("secrets"), "{}", list.0);
    assert!(list.0.contains("src/"), "{}", list.0);
    assert!(read.1 && read.0.contains("denied"), "{read:?}");
    assert!(results.iter().all(|(text, _)| !text.contains("hunter2")));
    assert_eq!(h.approvals.count(), 0);
}

/// Every spelling of a write into an agent directory cadre reads definitions from fails as
/// the call's result, and the approval channel is never asked (an `AllowOnce` answer would
/// otherwise have been given, and only then the write refused).
#[tokio::test]
async fn protected_writes_fail_before_any_approval_is_asked() {
    let f = fixture();
    let root = f.ws_dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("subagents")).unwrap();
    std::os::unix::fs::symlink(root.join("subagents"), root.join("agentlink")).unwrap();
    let abs = root.join("subagents/abs.md").display().to_string();
    let paths = [
        ".gemini/agents/general-purpose.md",
        "subagents/general-purpose.md",
        "./subagents/x.md",
        "a/../subagents/y.md",
        abs.as_str(),
        "agentlink/z.md",
        ".opencode/agents/x.md",
        ".codex/agents/x.toml",
        ".harness9/agents/x.md",
        ".claude/agents/x.md",
        ".cadre/agents/x.md",
        "skills/s/SKILL.md",
        "CLAUDE.md",
        "AGENTS.md",
        ".mcp.json",
    ];
    let mut calls: Vec<Value> = paths
        .iter()
        .map(|p| json!({ "name": "write_file", "args": { "path": p, "content": "---\nsandbox: off\n---\n" } }))
        .collect();
    calls.push(json!({ "name": "edit_file", "args": { "path": "AGENTS.md", "old_string": "a", "new_string": "b" } }));
    let (model, _rec) = scripted(&script_of(&calls));
    let agent = builder(model)
        .tools(builtin_tools())
        .permissions(policy(ApprovalMode::Ask))
        .build();
    let h = Harness::with_answer(ApprovalDecision::AllowOnce);
    let mut session = h.session();
    let run = h.run_context(&session);
    let ws = std::sync::Arc::new(Workspace::new(&root).unwrap());
    let out = agent
        .run(&mut session, Some("go".into()), run, ws, h.cancel.clone())
        .await;
    assert_eq!(out.state, EndState::Completed);
    let results = tool_results(session.messages());
    assert_eq!(results.len(), calls.len());
    for (path, (text, is_error)) in paths.iter().chain(&["AGENTS.md (edit)"]).zip(&results) {
        assert!(*is_error && text.contains("is protected"), "{path}: {text}");
    }
    assert_eq!(
        h.approvals.count(),
        0,
        "a protected write was put to the user"
    );
    for p in [
        "subagents/general-purpose.md",
        "subagents/x.md",
        "subagents/y.md",
        "subagents/abs.md",
        "subagents/z.md",
        ".gemini",
    ] {
        assert!(!root.join(p).exists(), "{p} was written");
    }
}

#[tokio::test]
async fn an_overwrite_is_previewed_with_the_text_it_replaces_unless_it_is_hidden() {
    let f = fixture();
    let script = script_of(&[
        json!({ "name": "write_file", "args": { "path": "src/notes.txt", "content": "new\n" } }),
        json!({ "name": "write_file", "args": { "path": "src/fresh.txt", "content": "x\n" } }),
        json!({ "name": "write_file", "args": { "path": "pub/key", "content": "gone\n" } }),
    ]);
    let (model, _rec) = scripted(&script);
    let rules = PermissionRules::parse(&[], &["read_file(secrets/**)".to_string()], &[]).unwrap();
    let agent = builder(model)
        .tools(builtin_tools())
        .permissions(PermissionPolicy {
            mode: ApprovalMode::Ask,
            rules,
        })
        .build();
    let h = Harness::with_answer(ApprovalDecision::AllowOnce);
    let mut session = h.session();
    let run = h.run_context(&session);
    let ws = std::sync::Arc::new(Workspace::new(f.ws_dir.path()).unwrap());
    let out = agent
        .run(&mut session, Some("go".into()), run, ws, h.cancel.clone())
        .await;
    assert_eq!(out.state, EndState::Completed);
    let asked: Vec<Option<String>> = h
        .approvals
        .asked
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.replaces.clone())
        .collect();
    // The file's text before the write; nothing for a new file; nothing for one a read
    // deny rule hides (through a symlink too).
    let before = Some("not the TOPSECRET itself\n".to_string());
    assert_eq!(asked, [before.clone(), None, None]);
    let started: Vec<Option<String>> = h
        .events
        .events()
        .into_iter()
        .filter_map(|e| match e {
            cadre_types::Event::ToolStart { replaces, .. } => Some(replaces),
            _ => None,
        })
        .collect();
    assert_eq!(started, [before, None, None]);
}
