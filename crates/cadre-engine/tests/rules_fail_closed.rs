//! Permission rules fail closed on shell code the walker cannot see: whole agent runs whose
//! `bash` calls hide a `touch` in a construct the walker does not model (one or more per
//! construct class), through the engine's permission path with a person who refuses. Each
//! call is asked (or denied), so the file it would create never appears; a control call the
//! rules do allow creates its file, so the commands really run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::{ApprovalMode, PermissionPolicy, PermissionRules};
use cadre_tools::builtin::builtin_tools;
use cadre_types::{ApprovalDecision, EndState, Message};
use common::*;
use serde_json::json;
use std::path::Path;

/// One `bash` call per line, then a final answer.
fn script_of(commands: &[String]) -> String {
    let calls: Vec<String> = commands
        .iter()
        .map(|c| {
            let args = json!({ "command": c }).to_string();
            format!(
                "{{ name = \"bash\", args_raw = {} }}",
                toml::Value::from(args)
            )
        })
        .collect();
    format!(
        "[[turns]]\ntool_calls = [{}]\n[[turns]]\ntext = \"done\"\n",
        calls.join(", ")
    )
}

/// The hiding lines, by class, each creating `OUT/NAME`.
fn hiding_lines(out: &Path) -> Vec<(&'static str, String)> {
    let o = out.display();
    vec![
        (
            "[[ -v ]]",
            format!("git status && [[ -v 'a[$(touch {o}/c1)]' ]]"),
        ),
        (
            "test -v",
            format!("git status; test -v 'a[$(touch {o}/c2)]'"),
        ),
        (
            "here-document",
            format!("cat <<EOF\n$\\\n(touch {o}/c3)\nEOF"),
        ),
        (
            "here-document <<-",
            format!("cat <<-EOF\n\t$\\\n(touch {o}/c4)\n\tEOF"),
        ),
        ("shell stdin", format!("echo 'touch {o}/c5' | bash")),
        ("here-string", format!("bash <<< 'touch {o}/c6'")),
        ("source", format!(". <(echo 'touch {o}/c7')")),
        ("printf -v", format!("printf -v 'a[$(touch {o}/c8)]' x")),
        ("declare", format!("declare 'a[$(touch {o}/c9)]=1'")),
        ("read", format!("read 'a[$(touch {o}/c10)]' <<< x")),
        ("let", format!("let 'a[$(touch {o}/c11)]=1'")),
        ("PS4", format!("PS4='$(touch {o}/c12)'; set -x; git status")),
        ("@P", format!("x='$(touch {o}/c13)'; echo ${{x@P}}")),
        (
            "mapfile -C",
            format!("mapfile -C 'touch {o}/c14 #' -c 1 a <<< x"),
        ),
        ("git alias", format!("git -c alias.x='!touch {o}/c15' x")),
        ("awk", format!("awk 'BEGIN{{system(\"touch {o}/c16\")}}'")),
        ("sed e", format!("echo x | sed 's|x|touch {o}/c17|e'")),
        ("perl -e", format!("perl -e 'open(F, \">{o}/c18\")'")),
        ("xargs", format!("echo 'touch {o}/c19' | xargs -0 bash -c")),
        ("${!x}", format!("x='a[$(touch {o}/c20)]'; echo ${{!x}}")),
    ]
}

/// Allow rules naming every command the hiding lines are made of, and the control.
fn carriers(out: &Path) -> Vec<String> {
    let mut rules: Vec<String> = [
        "git *",
        "test *",
        "cat *",
        "echo *",
        "bash *",
        ". *",
        "printf *",
        "declare *",
        "read *",
        "let *",
        "PS4=*",
        "set *",
        "x=*",
        "mapfile *",
        "awk *",
        "sed *",
        "perl *",
        "xargs *",
    ]
    .iter()
    .map(|r| format!("bash({r})"))
    .collect();
    rules.push(format!("bash(touch {}/control)", out.display()));
    rules
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

/// Run `commands` in a fresh git workspace under `policy`, a person refusing every
/// question; the number of questions and the tool results.
async fn run_refusing(
    commands: &[String],
    policy: PermissionPolicy,
) -> (usize, Vec<(String, bool)>) {
    let (model, _rec) = scripted(&script_of(commands));
    let agent = builder(model)
        .tools(builtin_tools())
        .permissions(policy)
        .build();
    let h = Harness::with_answer(ApprovalDecision::Deny { feedback: None });
    // `git status && …` must succeed for the hidden part to run if it were allowed.
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(h.dir.path())
        .status()
        .expect("git runs");
    assert!(init.success());
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "go").await;
    assert_eq!(out.state, EndState::Completed);
    (h.approvals.count(), tool_results(session.messages()))
}

fn missing(out: &Path, lines: &[(&str, String)]) -> Vec<String> {
    (1..=lines.len())
        .filter(|n| out.join(format!("c{n}")).exists())
        .map(|n| format!("{} created its file: {:?}", lines[n - 1].0, lines[n - 1].1))
        .collect()
}

#[tokio::test]
async fn allow_rules_do_not_run_hidden_code_unasked() {
    let out = tempfile::tempdir().unwrap();
    let lines = hiding_lines(out.path());
    let mut commands: Vec<String> = lines.iter().map(|(_, l)| l.clone()).collect();
    commands.push(format!("touch {}/control", out.path().display()));
    let rules = PermissionRules::parse(&carriers(out.path()), &[], &[]).unwrap();
    let (asked, results) = run_refusing(
        &commands,
        PermissionPolicy {
            mode: ApprovalMode::Ask,
            rules,
        },
    )
    .await;
    let ran = missing(out.path(), &lines);
    assert!(ran.is_empty(), "{}", ran.join("\n"));
    assert!(
        out.path().join("control").exists(),
        "the allowed control did not run"
    );
    assert_eq!(asked, lines.len(), "every hiding line is asked about");
    let refused = results
        .iter()
        .filter(|(t, e)| *e && t == "denied by the user");
    assert_eq!(refused.count(), lines.len(), "{results:?}");
}

#[tokio::test]
async fn a_deny_rule_asks_for_hidden_code_or_denies_it() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path().display();
    let mut lines = hiding_lines(out.path());
    let n = lines.len();
    // Code the walker reads is walked, so the deny rule sees it.
    for (class, line) in [
        (
            "script -c",
            format!("script -qc 'touch {o}/c{}' /dev/null", n + 1),
        ),
        ("trap --", format!("trap -- 'touch {o}/c{}' EXIT", n + 2)),
        ("$'…'", format!("bash -c $'touch\\x20{o}/c{}'", n + 3)),
        ("eval", format!("eval $'touch {o}/c{}'", n + 4)),
    ] {
        lines.push((class, line));
    }
    let commands: Vec<String> = lines.iter().map(|(_, l)| l.clone()).collect();
    let rules = PermissionRules::parse(&[], &["bash(touch *)".to_string()], &[]).unwrap();
    let (_asked, results) = run_refusing(
        &commands,
        PermissionPolicy {
            mode: ApprovalMode::AutoApprove,
            rules,
        },
    )
    .await;
    let ran = missing(out.path(), &lines);
    assert!(ran.is_empty(), "{}", ran.join("\n"));
    assert_eq!(results.len(), lines.len());
    assert!(results.iter().all(|(_, is_error)| *is_error), "{results:?}");
}
