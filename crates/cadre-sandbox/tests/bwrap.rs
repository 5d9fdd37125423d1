//! The bubblewrap backend on this machine: what a sandboxed shell can and cannot do. Needs
//! `bwrap` (CI installs it); the Landlock launcher is tested from the cadre binary's tests,
//! which have a program that runs it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_sandbox::{Backend, Launcher, Sandbox, SandboxMode, SandboxPolicy};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (root, outside) = (base.join("root"), base.join("outside"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(outside.join(".ssh")).unwrap();
    std::fs::write(outside.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    Fixture {
        _dir: dir,
        root,
        outside,
    }
}

/// The bubblewrap launcher; `None` (after a SKIPPED line, or a failure under CI) when
/// `bwrap` is not installed.
fn launcher() -> Option<Arc<Launcher>> {
    if !cadre_testkit::optional::on_path("bwrap") {
        cadre_testkit::optional::skip_because("bwrap not installed");
        return None;
    }
    let l = Launcher::new(None).backend(Backend::Bwrap).required(true);
    assert!(
        l.support().bwrap.is_some(),
        "bubblewrap is installed but does not work here: {:?}",
        l.gaps()
    );
    Some(Arc::new(l))
}

fn policy(root: &Path, network: bool) -> SandboxPolicy {
    SandboxPolicy {
        mode: SandboxMode::WorkspaceWrite,
        network,
        writable: vec![root.to_path_buf()],
    }
}

/// Run `script` with `sh -c` in the sandbox; (success, stdout + stderr).
fn sh(sandbox: &Sandbox, root: &Path, script: &str) -> (bool, String) {
    let out = sandbox
        .command("sh")
        .unwrap()
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn writes_stay_inside_the_root_and_the_private_temp_dir() {
    let Some(launcher) = launcher() else { return };
    let f = fixture();
    let sandbox = Sandbox::new(launcher, policy(&f.root, false));
    let escape = f.outside.join("escaped");
    let (ok, text) = sh(&sandbox, &f.root, &format!("echo x > {}", escape.display()));
    assert!(!ok, "{text}");
    assert!(text.contains("Read-only file system"), "{text}");
    assert!(!escape.exists());
    let (ok, text) = sh(
        &sandbox,
        &f.root,
        "echo kept > inside && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo > /dev/null",
    );
    assert!(ok, "{text}");
    assert_eq!(
        std::fs::read_to_string(f.root.join("inside")).unwrap(),
        "kept\n"
    );
}

#[test]
fn hidden_locations_cannot_be_read() {
    let Some(launcher) = launcher() else { return };
    let f = fixture();
    let sandbox = Sandbox::new(launcher, policy(&f.root, false)).hide([f.outside.join(".ssh")]);
    let key = f.outside.join(".ssh/id_ed25519");
    let (ok, text) = sh(&sandbox, &f.root, &format!("cat {}", key.display()));
    assert!(!ok && !text.contains("PRIVATE KEY"), "{text}");
}

#[test]
fn the_network_is_unreachable_unless_allowed() {
    let Some(launcher) = launcher() else { return };
    let f = fixture();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let offline = Sandbox::new(launcher.clone(), policy(&f.root, false));
    let (ok, text) = sh(&offline, &f.root, &format!("bash -c '{connect}'"));
    assert!(!ok && !text.contains("connected"), "{text}");
    // The attempt is over, so a connection would be queued by now.
    assert!(listener.accept().is_err(), "the listener saw a connection");
    let online = Sandbox::new(launcher, policy(&f.root, true));
    let (ok, text) = sh(&online, &f.root, &format!("bash -c '{connect}'"));
    assert!(ok && text.contains("connected"), "{text}");
    assert!(listener.accept().is_ok());
}

#[test]
fn covered_sockets_refuse_connections() {
    let Some(launcher) = launcher() else { return };
    let f = fixture();
    let path = f.outside.join("daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let connect = format!(
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); print('connected')\"",
        path.display()
    );
    let plain = Sandbox::new(launcher.clone(), policy(&f.root, false));
    let (ok, text) = sh(&plain, &f.root, &connect);
    // A read-only mount does not stop a connect to a socket file: covering it does.
    assert!(ok && text.contains("connected"), "{text}");
    assert!(listener.accept().is_ok());
    let covered = Sandbox::new(launcher, policy(&f.root, true)).cover_sockets([path]);
    let (ok, text) = sh(&covered, &f.root, &connect);
    assert!(!ok && !text.contains("connected\n"), "{text}");
    assert!(listener.accept().is_err(), "the daemon saw a connection");
}
