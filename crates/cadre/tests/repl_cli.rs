//! The line REPL: prompts to the main agent in one session, `@agent` direct runs, approval
//! questions answered on stdin.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;

const SCRIPT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
text = "main says {{user}}"
[[scripts.turns]]
text = "main again: {{user}}"

[[scripts]]
agent = "helper"
[[scripts.turns]]
tool_calls = [{ name = "write_file", args = { path = "out.txt", content = "from helper" } }]
[[scripts.turns]]
text = "helper wrote: {{tool_results}}"
"#;

const HELPER: &str = "---\nname: helper\ndescription: Writes files.\nworkspace: {mode: shared}\n---\nYou write files.\n";

#[test]
fn repl_runs_the_main_agent_and_direct_sub_agents_with_stdin_approvals() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre/agents")).unwrap();
    std::fs::write(dir.path().join(".cadre/agents/helper.md"), HELPER).unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = Command::cargo_bin("cadre")
        .unwrap()
        .env_remove("CADRE_MODEL")
        .env("XDG_CONFIG_HOME", dir.path().join("nocfg"))
        .arg("--workspace")
        .arg(dir.path())
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .write_stdin("hello\n@helper write the file\ny\nagain\n/tasks\n/cost\n/exit\n")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("main says hello"), "{stdout}");
    assert!(
        stdout.contains("main again: again"),
        "the session continued: {stdout}"
    );
    assert!(
        stderr.contains("[helper] wants to run write_file(out.txt)"),
        "{stderr}"
    );
    assert!(stdout.contains("helper wrote: wrote 11 bytes"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "from helper"
    );
    assert!(
        stdout.contains("[completed] helper: write the file"),
        "{stdout}"
    );
    // The scripted model has no price: tokens are counted, the cost is unknown.
    assert!(
        stdout.contains("this session: ") && stdout.contains("cost unknown"),
        "{stdout}"
    );
    assert!(stdout.contains("of which sub-agents: "), "{stdout}");
}

fn repl_command(dir: &std::path::Path, script: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.env_remove("CADRE_MODEL")
        .env("XDG_CONFIG_HOME", dir.join("nocfg"))
        .arg("--workspace")
        .arg(dir)
        .arg("--model")
        .arg(format!("scripted:{}", script.display()));
    cmd
}

#[test]
fn an_unknown_command_is_an_error_and_never_reaches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = Command::from_std(repl_command(dir.path(), &script))
        .write_stdin("/frobnicate the thing\nhello\n/exit\n")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("unknown command /frobnicate"),
        "the error is shown: {stderr}"
    );
    // Had the command gone to the model, "hello" would have been its second turn.
    assert!(
        stdout.contains("main says hello"),
        "the model saw only the prompt: {stdout}"
    );
    assert!(!stdout.contains("frobnicate"), "{stdout}");
}

/// The lines of a pipe, read on a thread, with what was seen so far.
struct Output {
    rx: std::sync::mpsc::Receiver<String>,
    seen: String,
}

impl Output {
    fn of(pipe: impl std::io::Read + Send + 'static) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            rx,
            seen: String::new(),
        }
    }

    /// Wait (up to 20 s) for a line containing `needle`.
    fn wait_for(&mut self, needle: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !self.seen.contains(needle) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                }
                Err(_) => panic!("never saw {needle:?} in: {}", self.seen),
            }
        }
    }
}

#[test]
fn a_session_nothing_was_sent_in_is_not_saved_nor_offered_for_resuming() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = repl_command(dir.path(), &script)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("resume with"), "{stderr}");
    let sessions = dir.path().join(".cadre/sessions");
    let left: Vec<_> = std::fs::read_dir(&sessions)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "an empty session was saved: {left:?}");
}

#[test]
fn resuming_another_session_leaves_no_empty_one_behind() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let sessions = dir.path().join(".cadre/sessions");
    let saved = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&sessions)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let first = repl_command(dir.path(), &script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = first.stdin.as_ref().unwrap();
        stdin.write_all(b"hello\n/exit\n").unwrap();
    }
    assert!(first.wait_with_output().unwrap().status.success());
    let before = saved();
    assert_eq!(before.len(), 1, "{before:?}");
    let id = before[0].trim_end_matches(".jsonl").to_string();

    // A new REPL opens an empty session, then resumes the saved one and leaves.
    let mut second = repl_command(dir.path(), &script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = second.stdin.take().unwrap();
        stdin
            .write_all(format!("/resume {id}\n/exit\n").as_bytes())
            .unwrap();
    }
    let out = second.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("resumed {id}")), "{stderr}");
    assert_eq!(saved(), before, "the empty session was saved: {stderr}");
}

#[test]
fn ctrl_c_at_the_idle_prompt_explains_itself_and_a_second_one_exits_0() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let mut child = repl_command(dir.path(), &script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = Output::of(child.stdout.take().unwrap());
    let mut stderr = Output::of(child.stderr.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    // /tasks is answered at the idle prompt, so after its reply the REPL waits for input.
    writeln!(stdin, "hello\n/tasks").unwrap();
    stdout.wait_for("no tasks in this session");
    let interrupt = || {
        let ok = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    interrupt();
    stderr.wait_for("press it again within 2 s to exit");
    interrupt();
    // The exit comes with the resume hint; the status is read once stderr has said so.
    // The hint names the binary as it can be run (it is not on PATH as `cadre` here).
    stderr.wait_for(&format!(
        "resume with: {} --workspace {} --resume s-",
        env!("CARGO_BIN_EXE_cadre"),
        dir.path().display()
    ));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait().unwrap()));
    let status = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the REPL did not exit after the second Ctrl-C");
    assert_eq!(status.code(), Some(0), "{}", stderr.seen);
    assert!(stdout.seen.contains("main says hello"));
    drop(stdin);
}
