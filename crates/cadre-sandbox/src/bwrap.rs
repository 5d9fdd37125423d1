//! The bubblewrap backend: the same view as the Landlock launcher's, built from mounts. The
//! whole file system read-only, the writable roots and the private temp dir bound writable,
//! credential locations covered (an empty tmpfs over a directory, `/dev/null` over a file),
//! a fresh `/dev` and `/proc`, and new user, PID, IPC and (without network) network
//! namespaces.

use crate::policy::SandboxPolicy;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the mounts make of the file system besides the policy's writable roots.
pub(crate) struct View<'a> {
    /// The private temp dir (writable).
    pub tmp: &'a Path,
    /// Locations covered: nothing to read, nothing to connect to.
    pub hidden: &'a [PathBuf],
    /// Existing locations inside writable roots that stay read-only.
    pub read_only: &'a [PathBuf],
}

/// `bwrap ARGS -- program`; the caller appends the program's own arguments.
pub(crate) fn command(
    bwrap: &Path,
    policy: &SandboxPolicy,
    view: &View<'_>,
    program: &OsStr,
) -> Command {
    let mut cmd = Command::new(bwrap);
    cmd.args(args(policy, view)).arg("--").arg(program);
    cmd
}

fn args(policy: &SandboxPolicy, view: &View<'_>) -> Vec<OsString> {
    let (tmp, hidden) = (view.tmp, view.hidden);
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
    // After the writable binds, so a protected path inside a writable root is read-only
    // there (a later mount covers an earlier one).
    for p in view.read_only {
        push(&["--ro-bind".as_ref(), p.as_os_str(), p.as_os_str()]);
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
        std::fs::create_dir_all(root.join("w/.cadre")).unwrap();
        let read_only = vec![root.join("w/.cadre")];
        let view = View {
            tmp: &tmp,
            hidden: &hidden,
            read_only: &read_only,
        };
        let got: Vec<String> = args(&policy, &view)
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
        let ro = format!("--ro-bind {w}/.cadre {w}/.cadre");
        assert!(
            text.find(&ro) > text.find(&format!("--bind {w}")),
            "protected paths are bound read-only over the writable root: {text}"
        );
        let open = SandboxPolicy {
            network: true,
            ..policy
        };
        let text: Vec<OsString> = args(&open, &view);
        assert!(!text.iter().any(|a| a == "--unshare-net"));
    }
}
