//! Tests of the `bash` tool: output, exit codes, timeouts, cancellation and truncation.

use super::*;
use crate::Tool;
use crate::testutil::{ctx, tree};
use nix::errno::Errno;
use nix::sys::signal::kill;
use serde_json::json;
use std::path::Path;
use std::time::Instant as StdInstant;

async fn run(dir: &tempfile::TempDir, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
    BashTool::default().call(args, &ctx(dir.path())).await
}

/// True while `pid` exists and is not a zombie.
fn alive(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH) {
        return false;
    }
    // A killed process may linger as a zombie until its new parent reaps it: that is dead.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Wait up to ~2 s for `pid` to die.
async fn assert_dies(pid: i32) {
    for _ in 0..40 {
        if !alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("process {pid} survived");
}

fn read_pid(dir: &Path) -> i32 {
    std::fs::read_to_string(dir.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn reports_stdout_stderr_and_exit_code() {
    let dir = tree(&[("marker.txt", b"")]);
    let out = run(
        &dir,
        json!({"command": "echo out; ls; echo err >&2; exit 3"}),
    )
    .await
    .unwrap();
    assert!(!out.is_error, "non-zero exit is not a tool error");
    assert_eq!(out.content, "out\nmarker.txt\n[stderr]\nerr\nexit code: 3");
    let out = run(&dir, json!({"command": "true"})).await.unwrap();
    assert_eq!(out.content, "(no output)\nexit code: 0");
    let out = run(&dir, json!({"command": "kill -9 $$"})).await.unwrap();
    assert_eq!(out.content, "(no output)\nkilled by signal 9");
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tree(&[]);
    let started = StdInstant::now();
    let args =
        json!({"command": "sleep 100 & echo $! > pid; echo started; wait", "timeout_ms": 1500});
    let out = run(&dir, args).await.unwrap();
    assert!(out.is_error);
    assert!(
        out.content
            .starts_with("command timed out after 1.5s; process group killed\nstarted\n"),
        "{}",
        out.content
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_dies(read_pid(dir.path())).await;
}

#[tokio::test]
async fn cancellation_kills_the_whole_process_group() {
    let dir = tree(&[]);
    let c = ctx(dir.path());
    let cancel = c.cancel.clone();
    let task = tokio::spawn(async move {
        let args = json!({"command": "sleep 100 & echo $! > pid; wait"});
        BashTool::default().call(args, &c).await
    });
    let pid_file = dir.path().join("pid");
    for _ in 0..100 {
        if std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n')) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = read_pid(dir.path());
    assert!(alive(pid));
    cancel.cancel();
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
    assert_dies(pid).await;
}

#[tokio::test]
async fn background_child_holding_the_pipe_does_not_hang() {
    let dir = tree(&[]);
    let started = StdInstant::now();
    let out = run(
        &dir,
        json!({"command": "echo hi; sleep 100 & echo $! > pid"}),
    )
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!out.is_error);
    assert!(out.content.starts_with("hi\n"), "{}", out.content);
    assert!(out.content.ends_with("exit code: 0"), "{}", out.content);
    assert_dies(read_pid(dir.path())).await;
}

#[tokio::test]
async fn detached_background_child_survives() {
    let dir = tree(&[]);
    let out = run(
        &dir,
        json!({"command": "sleep 100 > /dev/null 2>&1 & echo $! > pid"}),
    )
    .await
    .unwrap();
    assert_eq!(out.content, "(no output)\nexit code: 0");
    let pid = read_pid(dir.path());
    assert!(alive(pid), "a detached child is left alone");
    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
}

#[tokio::test]
async fn long_output_keeps_head_and_tail() {
    let dir = tree(&[]);
    let out = run(&dir, json!({"command": "seq 1 20000"})).await.unwrap();
    let total: usize = (1..=20000).map(|i: u32| i.to_string().len() + 1).sum();
    let omitted = total - HEAD_BYTES - TAIL_BYTES;
    let marker = format!("\n[... {omitted} bytes omitted ...]\n");
    assert!(out.content.starts_with("1\n2\n3\n"));
    assert!(out.content.contains(&marker), "no marker {marker:?}");
    assert!(out.content.ends_with("19999\n20000\nexit code: 0"));
    assert!(out.content.len() < HEAD_BYTES + TAIL_BYTES + 200);
}

#[tokio::test]
async fn runs_in_the_workspace_root_and_validates_args() {
    let dir = tree(&[]);
    let out = run(&dir, json!({"command": "pwd"})).await.unwrap();
    let root = dir.path().canonicalize().unwrap();
    assert_eq!(out.content, format!("{}\nexit code: 0", root.display()));
    let err = run(&dir, json!({"command": "  "})).await.unwrap_err();
    assert!(matches!(err, ToolError::InvalidArgs(_)));
    let err = run(&dir, json!({"cmd": "ls"})).await.unwrap_err();
    assert!(matches!(err, ToolError::InvalidArgs(_)));
}

#[test]
fn bounded_buffer_without_overflow_keeps_everything() {
    let mut b = Bounded::default();
    b.push(b"abc");
    b.push(&[b'x'; HEAD_BYTES]);
    assert_eq!(b.omitted, 0);
    let text = b.render();
    assert_eq!(text.len(), HEAD_BYTES + 3 + 1);
    assert!(!text.contains("omitted"));
    assert_eq!(seconds(120_000), "120s");
    assert_eq!(seconds(1500), "1.5s");
}

#[tokio::test]
async fn secret_variables_are_not_inherited() {
    // cargo sets CARGO_PKG_NAME for the test process; treat it as a secret.
    let dir = tree(&[]);
    let args = json!({"command": "echo \"[$CARGO_PKG_NAME]\""});
    let plain = run(&dir, args.clone()).await.unwrap();
    assert!(
        plain.content.starts_with("[cadre-tools]"),
        "{}",
        plain.content
    );
    let scrubbed = BashTool::new(SecretEnv::default().with_secret("CARGO_PKG_NAME"));
    let out = scrubbed.call(args.clone(), &ctx(dir.path())).await.unwrap();
    assert!(out.content.starts_with("[]"), "{}", out.content);
    let passed = BashTool::new(
        SecretEnv::default()
            .with_secret("CARGO_PKG_NAME")
            .pass(["CARGO_PKG_NAME"]),
    );
    let out = passed.call(args, &ctx(dir.path())).await.unwrap();
    assert!(out.content.starts_with("[cadre-tools]"), "{}", out.content);
}
