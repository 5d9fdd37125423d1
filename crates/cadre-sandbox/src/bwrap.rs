//! The bubblewrap backend: the same view as the Landlock launcher's, built from mounts. The
//! whole file system read-only, the writable roots and the private temp dir bound writable,
//! credential locations covered (an empty tmpfs over a directory, `/dev/null` over a file),
//! a fresh `/dev` and `/proc`, and new user, PID, IPC and (without network) network
//! namespaces.

use crate::policy::SandboxPolicy;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `bwrap ARGS -- program`; the caller appends the program's own arguments.
pub(crate) fn command(
    bwrap: &Path,
    policy: &SandboxPolicy,
    tmp: &Path,
    hidden: &[PathBuf],
    program: &OsStr,
) -> Command {
    let mut cmd = Command::new(bwrap);
    cmd.args(args(policy, tmp, hidden)).arg("--").arg(program);
    cmd
}

fn args(policy: &SandboxPolicy, tmp: &Path, hidden: &[PathBuf]) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&OsStr]| a.extend(items.iter().map(|s| s.to_os_string()));
    // A new session keeps the sandbox from pushing input into cadre's terminal (TIOCSTI);
    // the PID namespace then ends every process of the command when bwrap is killed.
    push(&[
        "--die-with-parent".as_ref(),
        "--new-session".as_ref(),
        "--unshare-user".as_ref(),
        "--unshare-pid".as_ref(),
        "--unshare-ipc".as_ref(),
        "--cap-drop".as_ref(),
        "ALL".as_ref(),
    ]);
    if !policy.network {
        push(&["--unshare-net".as_ref()]);
    }
    push(&[
        "--ro-bind".as_ref(),
        "/".as_ref(),
        "/".as_ref(),
        "--dev".as_ref(),
        "/dev".as_ref(),
        "--proc".as_ref(),
        "/proc".as_ref(),
    ]);
    for w in policy
        .writable
        .iter()
        .map(PathBuf::as_path)
        .chain([tmp])
        .filter(|p| p.is_dir())
    {
        push(&["--bind".as_ref(), w.as_os_str(), w.as_os_str()]);
    }
    // Mounted last, so they also cover credentials inside a writable root.
    for h in hidden {
        match std::fs::symlink_metadata(h) {
            Ok(m) if m.is_dir() => push(&["--tmpfs".as_ref(), h.as_os_str()]),
            Ok(_) => {
                // A file or a socket: nothing to read, nothing to connect to.
                push(&["--ro-bind".as_ref(), "/dev/null".as_ref(), h.as_os_str()]);
            }
            _ => {}
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_writable_roots_and_covers_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("w/.ssh")).unwrap();
        std::fs::write(root.join(".netrc"), "x").unwrap();
        let policy = SandboxPolicy {
            mode: crate::SandboxMode::WorkspaceWrite,
            network: false,
            writable: vec![root.join("w"), root.join("missing")],
        };
        let tmp = root.join("w");
        let hidden = vec![root.join("w/.ssh"), root.join(".netrc"), root.join(".aws")];
        let got: Vec<String> = args(&policy, &tmp, &hidden)
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let text = got.join(" ");
        let w = root.join("w").display().to_string();
        assert!(text.contains("--unshare-net"), "{text}");
        assert!(text.contains(&format!("--bind {w} {w}")), "{text}");
        assert!(!text.contains("missing"), "{text}");
        let ssh = format!("--tmpfs {w}/.ssh");
        let netrc = format!("--ro-bind /dev/null {}/.netrc", root.display());
        assert!(text.contains(&ssh) && text.contains(&netrc), "{text}");
        assert!(
            text.find(&ssh) > text.find(&format!("--bind {w}")),
            "credentials are covered after the binds: {text}"
        );
        assert!(!text.contains(".aws"), "{text}");
        let open = SandboxPolicy {
            network: true,
            ..policy
        };
        let text: Vec<OsString> = args(&open, &tmp, &hidden);
        assert!(!text.iter().any(|a| a == "--unshare-net"));
    }
}
