use super::*;
use std::time::Instant;

fn env(dir: &std::path::Path) -> RunnerEnv {
    RunnerEnv {
        workspace: dir.to_path_buf(),
        secrets: SecretEnv::default().with_secret("CADRE_TEST_HOOK_SECRET"),
    }
}

fn sh(command: &str) -> Handler {
    Handler {
        kind: HandlerKind::Command {
            command: command.into(),
            args: Vec::new(),
        },
        timeout: None,
    }
}

#[tokio::test]
async fn a_command_reads_the_json_on_stdin_and_sees_the_workspace() {
    let d = tempfile::tempdir().unwrap();
    let h = sh(
        "cat; echo; echo \"$CLAUDE_PROJECT_DIR|$CADRE_WORKSPACE|$(pwd)\"; \
                echo err >&2; exit 3",
    );
    let r = env(d.path())
        .run(&h, b"{\"a\":1}", Duration::from_secs(10))
        .await;
    assert_eq!(r.ending, Ending::Exited(3));
    let ws = d.path().display().to_string();
    assert_eq!(r.stdout, format!("{{\"a\":1}}\n{ws}|{ws}|{ws}\n"));
    assert_eq!(r.stderr, "err\n");
}

#[tokio::test]
async fn the_exec_form_passes_arguments_without_a_shell() {
    let d = tempfile::tempdir().unwrap();
    let h = Handler {
        kind: HandlerKind::Command {
            command: "printf".into(),
            args: vec!["%s|".into(), "$(id)".into(), "a b".into()],
        },
        timeout: None,
    };
    let r = env(d.path()).run(&h, b"", Duration::from_secs(10)).await;
    assert_eq!(r.ending, Ending::Exited(0));
    assert_eq!(r.stdout, "$(id)|a b|");
}

#[tokio::test]
async fn a_hook_past_its_timeout_is_killed_with_its_group() {
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("pid");
    // A grandchild in the background would keep the pipes open if it were not killed.
    let h = sh(&format!(
        "sleep 30 & echo $! > '{}'; sleep 30",
        pidfile.display()
    ));
    let started = Instant::now();
    let r = env(d.path()).run(&h, b"{}", Duration::from_secs(1)).await;
    assert_eq!(r.ending, Ending::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Killed with its group: gone once reaped, well within the deadline.
    let deadline = Instant::now() + Duration::from_secs(10);
    while nix::sys::signal::kill(Pid::from_raw(pid), None).is_ok() {
        assert!(Instant::now() < deadline, "the grandchild {pid} still runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The handler's own timeout wins over the event's default.
    let h = Handler {
        timeout: Some(Duration::from_millis(200)),
        ..sh("sleep 30")
    };
    let started = Instant::now();
    let r = env(d.path()).run(&h, b"{}", Duration::from_secs(60)).await;
    assert_eq!(r.ending, Ending::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_megabyte_of_output_is_cut_and_the_rest_discarded() {
    let d = tempfile::tempdir().unwrap();
    let h = sh("head -c 1048576 /dev/zero | tr '\\0' x; head -c 2000000 /dev/zero >&2");
    let r = env(d.path()).run(&h, b"", Duration::from_secs(20)).await;
    assert_eq!(r.ending, Ending::Exited(0));
    assert_eq!(r.stdout.chars().count(), MAX_OUTPUT_CHARS);
    assert_eq!(r.stderr.chars().count(), MAX_OUTPUT_CHARS);
}

#[tokio::test]
async fn a_handler_that_does_not_read_its_input_is_fine() {
    let d = tempfile::tempdir().unwrap();
    let big = vec![b'x'; 4 << 20];
    let r = env(d.path())
        .run(&sh("echo ok"), &big, Duration::from_secs(20))
        .await;
    assert_eq!(r.ending, Ending::Exited(0));
    assert_eq!(r.stdout, "ok\n");
}

#[tokio::test]
async fn a_missing_program_is_a_failure_not_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let h = Handler {
        kind: HandlerKind::Command {
            command: "/nonexistent/hook; rm -rf /".into(),
            args: vec!["x".into()],
        },
        timeout: None,
    };
    let r = env(d.path()).run(&h, b"", Duration::from_secs(5)).await;
    assert!(matches!(r.ending, Ending::Failed(_)), "{:?}", r.ending);
}
