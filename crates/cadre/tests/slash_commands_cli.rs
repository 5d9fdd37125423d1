//! Custom slash commands from `.claude/commands/` and `.cadre/commands/`, end to end with
//! the scripted model: `cadre run "/review src"` and the REPL send the expanded prompt
//! (`$ARGUMENTS`, `$1`, `!` lines run through `bash` under the permission rules, `@path`
//! includes under the read rules), `allowed-tools` narrows the turn, and a broken file is a
//! warning naming it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use assert_cmd::Command;
use cli_support::{HomeCase as Env, write};
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(120);

const REVIEW: &str = "---\ndescription: Review a path\nargument-hint: [path]\n---\n\
Review $ARGUMENTS carefully.\n\
!echo shell-said-$1\n\
!rm victim\n\
Notes: @notes.txt and @secrets/k, ask @nobody.\n";

fn env() -> Env {
    let e = Env::new();
    let ws = &e.ws;
    write(&ws.join(".claude/commands/review.md"), REVIEW);
    write(
        &ws.join(".claude/settings.json"),
        r#"{"permissions": {"allow": ["Bash(echo *)"], "deny": ["Read(./secrets/**)"]}}"#,
    );
    write(&ws.join("notes.txt"), "NOTES-BODY");
    write(&ws.join("secrets/k"), "TOPSECRET");
    write(&ws.join("victim"), "keep");
    e
}

fn cadre(e: &Env, script: &str) -> Command {
    e.scripted(script, DEADLINE)
}

const ECHO: &str = "[[turns]]\ntext = \"saw: {{user}}\"\n[[turns]]\ntext = \"again: {{user}}\"\n";

/// What the model was sent for `/review src`, as the scripted model echoes it.
fn assert_expanded(stdout: &str) {
    assert!(stdout.contains("saw: Review src carefully."), "{stdout}");
    assert!(stdout.contains("shell-said-src"), "{stdout}");
    assert!(stdout.contains("`rm victim` was not run"), "{stdout}");
    assert!(stdout.contains("NOTES-BODY"), "{stdout}");
    assert!(stdout.contains("secrets/k was not included"), "{stdout}");
    assert!(!stdout.contains("TOPSECRET"), "{stdout}");
    assert!(stdout.contains("ask @nobody."), "{stdout}");
}

#[test]
fn cadre_run_sends_a_custom_commands_expanded_prompt() {
    let e = env();
    let out = cadre(&e, ECHO)
        .args(["run", "/review src"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_expanded(&stdout);
    assert!(e.ws.join("victim").exists());
    // A prompt that only looks like a path is sent as it is.
    let out = cadre(&e, ECHO)
        .args(["run", "/tmp/x is broken"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("saw: /tmp/x is broken"), "{stdout}");
}

#[test]
fn the_repl_runs_custom_commands_and_lists_them_in_help() {
    let e = env();
    let out = cadre(&e, ECHO)
        .write_stdin("/review src\n/help\n/nope\n/exit\n")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_expanded(&stdout);
    assert!(
        stderr.contains("/review [path]") && stderr.contains("Review a path"),
        "{stderr}"
    );
    assert!(stderr.contains("unknown command /nope"), "{stderr}");
}

#[test]
fn folders_positions_allowed_tools_and_broken_files() {
    let e = env();
    write(
        &e.ws.join(".cadre/commands/git/sum.md"),
        "---\nallowed-tools: Read\n---\nsum $2 then $1",
    );
    write(
        &e.ws.join(".claude/commands/broken.md"),
        "---\ndescription: [x\n---\nbody",
    );
    let script = "[[turns]]\ntool_calls = [{ name = \"bash\", args = { command = \"echo made > made.txt\" } }]\n\
                  [[turns]]\ntext = \"saw: {{user}} / {{tool_results}}\"\n";
    let out = cadre(&e, script)
        .args(["run", "--permission-mode", "auto-approve", "/git:sum a b"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("saw: sum b then a"), "{stdout}");
    // `allowed-tools: Read` leaves this turn without `bash`.
    assert!(!e.ws.join("made.txt").exists(), "{stdout}");
    assert!(stdout.contains("unknown tool `bash`"), "{stdout}");
    let broken =
        e.ws.join(".claude/commands/broken.md")
            .display()
            .to_string();
    assert!(
        stderr.contains("skipped command file") && stderr.contains(&broken),
        "{stderr}"
    );
}
