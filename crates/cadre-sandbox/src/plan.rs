//! What the launcher applies to itself before it executes the program: the file trees it may
//! read and write, the devices it may use, and which network barriers to raise. Computed by
//! the parent from a [`SandboxPolicy`] and the machine's [`Support`], so the launcher only
//! carries it out.

use crate::policy::SandboxPolicy;
use crate::support::Support;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Device files every sandboxed process may read and write: shells redirect to them.
pub(crate) const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// The launcher's instructions, passed to it as one JSON argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LaunchPlan {
    /// Apply Landlock file-system rules (false: the kernel has no Landlock).
    pub landlock_fs: bool,
    /// Trees that may be read and executed.
    pub read: Vec<PathBuf>,
    /// Directories that may only be listed: the ancestors of hidden paths, whose other
    /// entries are in `read` (listing them also lists the names, not the contents, of what
    /// is hidden).
    pub list: Vec<PathBuf>,
    /// Trees that may also be written.
    pub write: Vec<PathBuf>,
    /// Device files that may be read and written (not `ioctl`ed).
    pub devices: Vec<PathBuf>,
    /// Deny TCP bind and connect with Landlock (ABI ≥ 4).
    pub deny_tcp: bool,
    /// Enter new user and mount namespaces (to cover `cover`).
    pub new_userns: bool,
    /// Also a new network namespace (no interface but a loopback that is down).
    pub new_netns: bool,
    /// Also a new PID namespace: the program runs under an init whose end ends every
    /// process the program left behind.
    #[serde(default)]
    pub new_pidns: bool,
    /// In that PID namespace, mount a fresh `/proc` (it shows that namespace only).
    #[serde(default)]
    pub fresh_proc: bool,
    /// Sockets (bound over with `/dev/null`) and directories (an empty tmpfs on top) to hide
    /// from the process, in the new mount namespace.
    pub cover: Vec<PathBuf>,
    /// Existing locations inside writable roots to bind read-only over themselves, in the
    /// new mount namespace (protected configuration and metadata).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Forbid signals to processes outside the sandbox (Landlock ABI ≥ 6).
    pub scope_signals: bool,
    /// Forbid abstract UNIX sockets created outside the sandbox (Landlock ABI ≥ 6).
    pub scope_abstract_sockets: bool,
}

impl LaunchPlan {
    /// The plan for `policy` on a machine with `support`, with `tmp` as the private temp dir,
    /// `hidden` the locations nobody in the sandbox may read (credentials) and `sockets` the
    /// ones to cover.
    pub fn new(
        policy: &SandboxPolicy,
        support: &Support,
        tmp: &Path,
        hidden: &[PathBuf],
        sockets: &[PathBuf],
    ) -> Self {
        let mut writable = policy.writable.clone();
        writable.push(tmp.to_path_buf());
        // A writable root around a hidden path is writable only in its other entries: write
        // access to the directory itself would let a process create files in the hidden one.
        let (mut write, mut list) = (Vec::new(), Vec::new());
        for root in &writable {
            around(root, hidden, &mut write, &mut list);
        }
        let mut read = Vec::new();
        list.clear();
        around(Path::new("/"), hidden, &mut read, &mut list);
        let offline = !policy.network;
        Self {
            landlock_fs: support.landlock_fs,
            read,
            list,
            write,
            devices: DEVICES.iter().map(PathBuf::from).collect(),
            deny_tcp: offline && support.landlock_net,
            new_userns: support.namespaces,
            new_netns: offline && support.namespaces,
            new_pidns: support.namespaces && support.pid_namespace,
            fresh_proc: support.namespaces && support.pid_namespace && support.fresh_proc,
            cover: if support.namespaces {
                sockets.to_vec()
            } else {
                Vec::new()
            },
            read_only: Vec::new(),
            scope_signals: support.landlock_scopes,
            scope_abstract_sockets: offline && support.landlock_scopes,
        }
    }
}

impl LaunchPlan {
    /// This plan keeping `protected` (existing, canonical, inside writable roots) read-only:
    /// with a mount namespace, read-only bind mounts over them, so the writable roots keep
    /// every other right (creating entries next to them included); without one, Landlock
    /// alone, by granting writes only around them, which also takes from each directory on
    /// the way the right to create, remove or rename its own entries.
    pub fn protecting(
        mut self,
        protected: &[PathBuf],
        policy: &SandboxPolicy,
        tmp: &Path,
        hidden: &[PathBuf],
    ) -> Self {
        if protected.is_empty() {
            return self;
        }
        if self.new_userns {
            self.read_only = protected.to_vec();
            return self;
        }
        let around_both: Vec<PathBuf> = hidden.iter().chain(protected).cloned().collect();
        let (mut write, mut split) = (Vec::new(), Vec::new());
        for root in policy.writable.iter().map(PathBuf::as_path).chain([tmp]) {
            around(root, &around_both, &mut write, &mut split);
        }
        self.write = write;
        self
    }
}

/// The trees that together cover `root` except the `hidden` paths: `root` itself when no
/// hidden path is inside it, otherwise its entries, each treated the same way. Landlock
/// only grants (it cannot carve a hole in a granted tree), so a hidden path is left out by
/// granting its siblings and those of each of its ancestors up to `root`. Symlinks are
/// skipped: access is checked on what they lead to, which has its own rule (or none). The
/// directories split this way go to `split`.
pub(crate) fn around(
    root: &Path,
    hidden: &[PathBuf],
    out: &mut Vec<PathBuf>,
    split: &mut Vec<PathBuf>,
) {
    if hidden.iter().any(|h| h == root) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(root)) {
        out.push(root.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    split.push(root.to_path_buf());
    for entry in entries.flatten() {
        let is_link = entry.file_type().map(|t| t.is_symlink()).unwrap_or(true);
        if !is_link {
            around(&entry.path(), hidden, out, split);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn hidden_paths_are_left_out_by_granting_their_siblings() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in ["home/me/.ssh", "home/me/src", "home/other", "usr/bin"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("home/me/.netrc"), "machine x").unwrap();
        fs::write(root.join("home/me/notes"), "n").unwrap();
        std::os::unix::fs::symlink(root.join("home/me/.ssh"), root.join("home/me/keys")).unwrap();
        let hidden = vec![
            root.join("home/me/.ssh"),
            root.join("home/me/.netrc"),
            root.join("home/me/.aws"),
        ];
        let (mut got, mut split) = (Vec::new(), Vec::new());
        around(&root, &hidden, &mut got, &mut split);
        got.sort();
        split.sort();
        assert_eq!(
            split,
            vec![root.clone(), root.join("home"), root.join("home/me")]
        );
        let want: Vec<PathBuf> = ["home/me/notes", "home/me/src", "home/other", "usr"]
            .iter()
            .map(|p| root.join(p))
            .collect();
        // Neither the hidden paths nor the symlink to one of them are granted.
        assert_eq!(got, want);
        let (mut got, mut split) = (Vec::new(), Vec::new());
        around(&root.join("usr"), &hidden, &mut got, &mut split);
        assert_eq!(got, vec![root.join("usr")]);
        let mut got = Vec::new();
        around(&root.join("home/me/.ssh"), &hidden, &mut got, &mut split);
        assert!(got.is_empty() && split.is_empty());
    }

    #[test]
    fn network_barriers_follow_the_policy_and_the_machine() {
        let full = Support {
            landlock_fs: true,
            landlock_net: true,
            landlock_scopes: true,
            namespaces: true,
            pid_namespace: true,
            fresh_proc: true,
            bwrap: None,
        };
        let mut policy = SandboxPolicy {
            mode: crate::SandboxMode::WorkspaceWrite,
            network: false,
            writable: vec![PathBuf::from("/w")],
        };
        let tmp = Path::new("/tmp/private");
        let sockets = vec![PathBuf::from("/run/docker.sock")];
        let p = LaunchPlan::new(&policy, &full, tmp, &[], &sockets);
        assert!(p.deny_tcp && p.new_netns && p.scope_abstract_sockets && p.scope_signals);
        assert!(p.new_pidns && p.fresh_proc);
        assert_eq!(p.cover, sockets);
        assert_eq!(p.write, vec![PathBuf::from("/w"), tmp.to_path_buf()]);
        assert_eq!(p.read, vec![PathBuf::from("/")]);
        policy.network = true;
        let p = LaunchPlan::new(&policy, &full, tmp, &[], &sockets);
        assert!(!p.deny_tcp && !p.new_netns && !p.scope_abstract_sockets && p.scope_signals);
        // Sockets are covered with the network allowed too: they are not the network.
        assert!(p.new_userns && p.cover == sockets);
        policy.network = false;
        let weak = Support {
            namespaces: false,
            ..full.clone()
        };
        let p = LaunchPlan::new(&policy, &weak, tmp, &[], &sockets);
        assert!(p.deny_tcp && !p.new_netns && !p.new_userns && p.cover.is_empty());
        assert!(!p.new_pidns && !p.fresh_proc);
        // No PID namespace: the other namespaces are still used.
        let no_pid = Support {
            pid_namespace: false,
            ..full.clone()
        };
        let p = LaunchPlan::new(&policy, &no_pid, tmp, &[], &sockets);
        assert!(p.new_userns && p.new_netns && !p.new_pidns && !p.fresh_proc);
        let no_proc = Support {
            fresh_proc: false,
            ..full
        };
        let p = LaunchPlan::new(&policy, &no_proc, tmp, &[], &sockets);
        assert!(p.new_pidns && !p.fresh_proc);
    }

    #[test]
    fn protected_paths_are_mounted_read_only_or_left_out_of_the_writes() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().canonicalize().unwrap();
        for d in [".cadre", "src"] {
            fs::create_dir_all(w.join(d)).unwrap();
        }
        fs::write(w.join("README"), "r").unwrap();
        let policy = SandboxPolicy {
            mode: crate::SandboxMode::WorkspaceWrite,
            network: true,
            writable: vec![w.clone()],
        };
        let tmp = Path::new("/tmp/private");
        let protected = vec![w.join(".cadre")];
        let mut support = Support {
            landlock_fs: true,
            landlock_net: true,
            landlock_scopes: true,
            namespaces: true,
            pid_namespace: true,
            fresh_proc: true,
            bwrap: None,
        };
        let p = LaunchPlan::new(&policy, &support, tmp, &[], &[]).protecting(
            &protected,
            &policy,
            tmp,
            &[],
        );
        // With namespaces: a mount; the root stays writable as a whole.
        assert_eq!(p.read_only, protected);
        assert_eq!(p.write, vec![w.clone(), tmp.to_path_buf()]);
        support.namespaces = false;
        let p = LaunchPlan::new(&policy, &support, tmp, &[], &[]).protecting(
            &protected,
            &policy,
            tmp,
            &[],
        );
        // Without: the writes go around it.
        assert!(p.read_only.is_empty());
        let mut write = p.write;
        write.sort();
        assert_eq!(
            write,
            vec![w.join("README"), w.join("src"), tmp.to_path_buf()]
        );
    }
}
