//! The Landlock launcher (this binary re-executed in launcher mode) on this machine: what a
//! sandboxed shell can and cannot do. The machine must offer Landlock and user namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_sandbox::{Launcher, Mechanism, Sandbox, SandboxMode, SandboxPolicy};
use std::net::{TcpListener, UdpSocket};
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
    std::fs::write(outside.join("notes"), "readable").unwrap();
    Fixture {
        _dir: dir,
        root,
        outside,
    }
}

fn launcher(missing: Vec<Mechanism>, required: bool) -> Arc<Launcher> {
    Arc::new(
        Launcher::new(Some(PathBuf::from(env!("CARGO_BIN_EXE_cadre"))))
            .simulate_missing(missing)
            .required(required),
    )
}

/// The full sandbox; refuses to work (required) if the machine lacks any of it.
fn full() -> Arc<Launcher> {
    let l = launcher(Vec::new(), true);
    assert!(
        l.gaps().is_empty(),
        "this machine must offer Landlock and user namespaces: {:?}",
        l.gaps()
    );
    l
}

fn policy(mode: SandboxMode, root: &Path, network: bool) -> SandboxPolicy {
    SandboxPolicy {
        mode,
        network,
        writable: match mode {
            SandboxMode::WorkspaceWrite => vec![root.to_path_buf()],
            _ => Vec::new(),
        },
    }
}

/// Run `script` with `bash -c` in the sandbox; (success, stdout + stderr).
fn bash(sandbox: &Sandbox, root: &Path, script: &str) -> (bool, String) {
    let out = sandbox
        .command("bash")
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
fn writes_outside_the_root_fail_with_the_commands_own_error() {
    let f = fixture();
    let sandbox = Sandbox::new(full(), policy(SandboxMode::WorkspaceWrite, &f.root, false));
    let escape = f.outside.join("escaped");
    let (ok, text) = bash(&sandbox, &f.root, &format!("echo x > {}", escape.display()));
    assert!(!ok, "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert!(!escape.exists());
    for script in [
        format!("rm {}", f.outside.join("notes").display()),
        format!("mkdir {}", f.outside.join("d").display()),
        format!("ln -s /etc {}", f.outside.join("l").display()),
    ] {
        let (ok, text) = bash(&sandbox, &f.root, &script);
        assert!(
            !ok && text.contains("Permission denied"),
            "{script}: {text}"
        );
    }
    assert!(f.outside.join("notes").exists());
    let (ok, text) = bash(
        &sandbox,
        &f.root,
        &format!(
            "echo kept > inside && mkdir -p sub && mv inside sub/ && echo t > \"$TMPDIR/t\" \
             && cat \"$TMPDIR/t\" {} && echo > /dev/null",
            f.outside.join("notes").display()
        ),
    );
    assert!(ok, "{text}");
    assert!(text.contains("t\nreadable"), "{text}");
    assert_eq!(
        std::fs::read_to_string(f.root.join("sub/inside")).unwrap(),
        "kept\n"
    );
}

#[test]
fn read_only_writes_nothing_but_the_private_temp_dir() {
    let f = fixture();
    let sandbox = Sandbox::new(full(), policy(SandboxMode::ReadOnly, &f.root, false));
    let (ok, text) = bash(&sandbox, &f.root, "echo x > inside");
    assert!(!ok && text.contains("Permission denied"), "{text}");
    assert!(!f.root.join("inside").exists());
    let (ok, text) = bash(
        &sandbox,
        &f.root,
        "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
    );
    assert!(ok && text == "t\n", "{text}");
}

#[test]
fn hidden_locations_cannot_be_read() {
    let f = fixture();
    let sandbox = Sandbox::new(full(), policy(SandboxMode::WorkspaceWrite, &f.root, false))
        .hide([f.outside.join(".ssh")]);
    let key = f.outside.join(".ssh/id_ed25519");
    let (ok, text) = bash(&sandbox, &f.root, &format!("cat {}", key.display()));
    assert!(!ok && !text.contains("PRIVATE KEY"), "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    let (ok, text) = bash(&sandbox, &f.root, &format!("ls {}", f.outside.display()));
    assert!(ok && text.contains("notes"), "{text}");
}

/// Connect to a fresh 127.0.0.1 listener from the sandbox; (connected, whether the listener
/// got a connection).
fn try_connect(sandbox: &Sandbox, root: &Path) -> (bool, bool, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (ok, text) = bash(
        sandbox,
        root,
        &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
    );
    // The attempt is over, so a connection would be queued by now.
    (ok, listener.accept().is_ok(), text)
}

/// Send a datagram to a fresh 127.0.0.1 socket from the sandbox; (whether it arrived, output).
fn try_datagram(sandbox: &Sandbox, root: &Path) -> (bool, String) {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let port = udp.local_addr().unwrap().port();
    let (_, text) = bash(
        sandbox,
        root,
        &format!("echo hi > /dev/udp/127.0.0.1/{port}"),
    );
    // Loopback delivery is synchronous: the datagram is queued before the shell exits.
    let mut buf = [0u8; 16];
    (udp.recv(&mut buf).is_ok(), text)
}

#[test]
fn tcp_and_udp_are_unreachable_unless_the_network_is_allowed() {
    let f = fixture();
    let offline = Sandbox::new(full(), policy(SandboxMode::WorkspaceWrite, &f.root, false));
    let (ok, seen, text) = try_connect(&offline, &f.root);
    assert!(!ok && !seen, "{text}");
    let (got, text) = try_datagram(&offline, &f.root);
    assert!(!got, "a datagram got out: {text}");
    let online = Sandbox::new(full(), policy(SandboxMode::WorkspaceWrite, &f.root, true));
    let (ok, seen, text) = try_connect(&online, &f.root);
    assert!(ok && seen, "{text}");
}

#[test]
fn without_namespaces_landlock_still_blocks_tcp() {
    let f = fixture();
    let weak = launcher(vec![Mechanism::Namespaces], false);
    assert!(
        weak.gaps().iter().any(|g| g.contains("UDP")),
        "{:?}",
        weak.gaps()
    );
    let sandbox = Sandbox::new(weak, policy(SandboxMode::WorkspaceWrite, &f.root, false));
    let (ok, seen, text) = try_connect(&sandbox, &f.root);
    assert!(!ok && !seen, "{text}");
    // The gap it reports: UDP still gets out.
    let (got, text) = try_datagram(&sandbox, &f.root);
    assert!(got, "{text}");
}

#[test]
fn a_required_sandbox_refuses_to_run_without_its_mechanisms() {
    let f = fixture();
    let strict = launcher(vec![Mechanism::Landlock], true);
    let err = strict.check_required().unwrap_err().to_string();
    assert!(err.contains("no Landlock"), "{err}");
    let sandbox = Sandbox::new(strict, policy(SandboxMode::WorkspaceWrite, &f.root, false));
    let err = sandbox.command("bash").unwrap_err().to_string();
    assert!(err.contains("required"), "{err}");
    // Not required: it runs, with the weaker sandbox reported.
    let lax = launcher(vec![Mechanism::Landlock], false);
    assert!(!lax.gaps().is_empty());
    let sandbox = Sandbox::new(lax, policy(SandboxMode::WorkspaceWrite, &f.root, false));
    let (ok, seen, text) = try_connect(&sandbox, &f.root);
    assert!(!ok && !seen, "the namespace still cuts the network: {text}");
}

#[test]
fn covered_sockets_refuse_connections() {
    let f = fixture();
    let path = f.outside.join("daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let connect = format!(
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); print('connected')\"",
        path.display()
    );
    let plain = Sandbox::new(full(), policy(SandboxMode::WorkspaceWrite, &f.root, false));
    let (ok, text) = bash(&plain, &f.root, &connect);
    // Landlock (before ABI 9) does not stop a connect to a socket file: the mount does.
    assert!(ok && text.contains("connected"), "{text}");
    assert!(listener.accept().is_ok());
    let covered = Sandbox::new(full(), policy(SandboxMode::WorkspaceWrite, &f.root, true))
        .cover_sockets([path]);
    let (ok, text) = bash(&covered, &f.root, &connect);
    assert!(!ok && !text.contains("connected\n"), "{text}");
    assert!(listener.accept().is_err(), "the daemon saw a connection");
}
