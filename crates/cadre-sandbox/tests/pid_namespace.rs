//! The launcher's PID namespace: nothing a sandboxed command starts outlives it (background
//! jobs, `setsid`, `nohup`, `disown`), nor a launcher killed with SIGKILL; the program's exit
//! status, signal death, stdin, stdout and stderr pass through; stop signals reach it; it
//! sees a `/proc` of its own. This binary is its own launcher (its `main` dispatches the
//! launcher arguments first, as cadre's does), so it has no libtest harness: each test is a
//! function run in turn, and any filter arguments select tests by name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_sandbox::{Launcher, Mechanism, Sandbox, SandboxMode, SandboxPolicy};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

/// Long against any real delay, so a loaded machine only makes a test slower.
const DEADLINE: Duration = Duration::from_secs(30);

fn launcher(missing: Vec<Mechanism>) -> Arc<Launcher> {
    let exe = std::env::current_exe().unwrap();
    Arc::new(Launcher::new(Some(exe)).simulate_missing(missing))
}

/// The full launcher, or `None` after a SKIPPED line (a failure under CI) when this machine
/// has no user or PID namespaces.
fn full() -> Option<Arc<Launcher>> {
    let l = launcher(Vec::new());
    let s = l.support();
    if !(s.namespaces && s.pid_namespace) {
        cadre_testkit::optional::skip_because("user or PID namespaces not available");
        return None;
    }
    Some(l)
}

struct Root {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn root() -> Root {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    Root { _dir: dir, path }
}

fn sandbox(launcher: Arc<Launcher>, root: &Path) -> Sandbox {
    Sandbox::new(
        launcher,
        SandboxPolicy {
            mode: SandboxMode::WorkspaceWrite,
            network: false,
            writable: vec![root.to_path_buf()],
        },
    )
}

/// Start `script` with `bash -c` in the sandbox, every stream piped.
fn start(sandbox: &Sandbox, root: &Path, script: &str) -> Child {
    sandbox
        .command("bash")
        .unwrap()
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Read `pipe` to its end on another thread; the text once every writer has closed it (all
/// processes holding it are gone), or `None` if that takes longer than [`DEADLINE`].
fn until_eof(mut pipe: impl Read + Send + 'static) -> Option<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    rx.recv_timeout(DEADLINE).ok()
}

/// Each spelling starts a process, detached in its own way, that keeps stderr (an inherited
/// pipe) and would create a file in the writable root after the command has returned.
fn background_processes_end_with_the_command() {
    let Some(l) = full() else { return };
    let spellings = [
        (
            "setsid",
            "setsid sh -c 'sleep 2; touch planted' > /dev/null &",
        ),
        ("disown", "(sleep 2; touch planted) > /dev/null & disown"),
        (
            "nohup",
            "nohup sh -c 'sleep 2; touch planted' > /dev/null &",
        ),
        (
            "double fork",
            "( (sleep 2; touch planted) > /dev/null & ) ; true",
        ),
    ];
    for (name, spawn) in spellings {
        let r = root();
        let s = sandbox(l.clone(), &r.path);
        let mut child = start(&s, &r.path, &format!("{spawn}\necho started; exit 0"));
        let stderr = child.stderr.take().unwrap();
        let mut stdout = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!((status.code(), stdout.as_str()), (Some(0), "started\n"));
        // EOF on stderr: no process of the command holds it any more.
        let rest = until_eof(stderr);
        assert!(
            rest.is_some(),
            "{name}: a background process still runs {DEADLINE:?} after the command"
        );
        assert!(
            !r.path.join("planted").exists(),
            "{name}: the background process outlived the command and planted its file"
        );
    }
}

/// SIGKILL of the launcher alone (not its process group) still ends every process of the
/// command: the init dies with it, and the namespace with the init.
fn a_killed_launcher_takes_the_command_down() {
    let Some(l) = full() else { return };
    let r = root();
    let s = sandbox(l, &r.path);
    let mut child = start(
        &s,
        &r.path,
        "setsid sh -c 'sleep 5; touch planted' > /dev/null & echo ready; sleep 60",
    );
    let stderr = child.stderr.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    kill(pid, Signal::SIGKILL).unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(9));
    assert!(
        until_eof(stderr).is_some(),
        "the command's processes outlived its killed launcher"
    );
    assert!(!r.path.join("planted").exists());
}

/// Run `script`, feeding `input`; (exit code, signal, stdout, stderr).
fn run(
    s: &Sandbox,
    root: &Path,
    script: &str,
    input: &str,
) -> (Option<i32>, Option<i32>, String, String) {
    let mut child = start(s, root, script);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        out.status.signal(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn status_and_streams_pass_through() {
    let Some(l) = full() else { return };
    let r = root();
    let s = sandbox(l, &r.path);
    let p = &r.path;
    assert_eq!(
        run(&s, p, "exit 0", ""),
        (Some(0), None, String::new(), String::new())
    );
    assert_eq!(
        run(
            &s,
            p,
            "cat; printf 'to err' >&2; exit 3",
            "a line\nno newline"
        ),
        (Some(3), None, "a line\nno newline".into(), "to err".into())
    );
    // A signal death is reported as one, not as 128 + n.
    assert_eq!(run(&s, p, "echo x; kill -KILL $$", "").0, None);
    assert_eq!(run(&s, p, "kill -KILL $$", "").1, Some(9));
    assert_eq!(run(&s, p, "kill -TERM $$", "").1, Some(15));
    assert_eq!(run(&s, p, "exit 137", "").0, Some(137));
    let (code, _, _, err) = run(&s, p, "exec /no/such/program", "");
    assert_eq!(code, Some(127), "{err}");
    // A program the launcher itself cannot start.
    let mut child = s
        .command("/no/such/program")
        .unwrap()
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(127));
    assert!(err.contains("No such file or directory"), "{err}");
    // SIGPIPE kills a writer to a closed pipe, as outside a sandbox.
    let (code, _, out, err) = run(&s, p, "yes | head -n 1; echo \"${PIPESTATUS[0]}\"", "");
    assert_eq!((code, out.as_str()), (Some(0), "y\n141\n"), "{err}");
}

/// SIGTERM to the launcher reaches the program, which may handle it.
fn stop_signals_are_forwarded() {
    let Some(l) = full() else { return };
    let r = root();
    let s = sandbox(l, &r.path);
    let mut child = start(
        &s,
        &r.path,
        "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done",
    );
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    kill(pid, Signal::SIGTERM).unwrap();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(7));
    assert_eq!(rest, "got-term\n");
}

/// The command sees its own namespace in `/proc`, not this process.
fn proc_shows_the_commands_namespace_only() {
    let Some(l) = full() else { return };
    if !l.support().fresh_proc {
        cadre_testkit::optional::skip_because("a fresh /proc cannot be mounted here");
        return;
    }
    let r = root();
    let s = sandbox(l, &r.path);
    let me = std::process::id();
    let script = format!("echo $$; [ -e /proc/{me} ] && echo visible || echo hidden");
    let (code, _, out, err) = run(&s, &r.path, &script, "");
    assert_eq!((code, out.as_str()), (Some(0), "2\nhidden\n"), "{err}");
}

/// Without PID namespaces the launcher runs the program as before, and says what is lost.
fn without_pid_namespaces_the_command_still_runs() {
    if full().is_none() {
        return;
    }
    let l = launcher(vec![Mechanism::PidNamespace]);
    assert!(l.support().namespaces && !l.support().pid_namespace);
    assert!(
        l.gaps().iter().any(|g| g.contains("PID namespaces")),
        "{:?}",
        l.gaps()
    );
    let r = root();
    let s = sandbox(l, &r.path);
    assert_eq!(
        run(&s, &r.path, "cat; exit 3", "in"),
        (Some(3), None, "in".into(), String::new())
    );
}

fn main() {
    cadre_sandbox::run_launcher_if_requested();
    let tests: [(&str, fn()); 6] = [
        (
            "background_processes_end_with_the_command",
            background_processes_end_with_the_command,
        ),
        (
            "a_killed_launcher_takes_the_command_down",
            a_killed_launcher_takes_the_command_down,
        ),
        (
            "status_and_streams_pass_through",
            status_and_streams_pass_through,
        ),
        ("stop_signals_are_forwarded", stop_signals_are_forwarded),
        (
            "proc_shows_the_commands_namespace_only",
            proc_shows_the_commands_namespace_only,
        ),
        (
            "without_pid_namespaces_the_command_still_runs",
            without_pid_namespaces_the_command_still_runs,
        ),
    ];
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut ran = 0;
    for (name, test) in tests {
        if filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())) {
            eprintln!("test {name} ...");
            test();
            eprintln!("test {name} ... ok");
            ran += 1;
        }
    }
    eprintln!("{ran} tests passed");
}
