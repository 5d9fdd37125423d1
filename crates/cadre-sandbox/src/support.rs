//! What this machine offers for sandboxing: Landlock (file system, TCP, scopes), user and
//! network namespaces (tried for real through the launcher), and a working bubblewrap.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Which mechanism confines processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// cadre's launcher: Landlock rules, plus user, network and PID namespaces.
    #[default]
    Landlock,
    /// bubblewrap (`bwrap`), when it is installed.
    Bwrap,
}

impl std::str::FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "landlock" => Ok(Self::Landlock),
            "bwrap" => Ok(Self::Bwrap),
            other => Err(format!(
                "unknown sandbox backend `{other}` (expected `landlock` or `bwrap`)"
            )),
        }
    }
}

/// One mechanism, as named when pretending it is missing (to try out, or test, a weaker
/// sandbox).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// Landlock as a whole (`landlock`).
    Landlock,
    /// Landlock's TCP rules (`landlock-net`).
    LandlockNet,
    /// User and network namespaces (`namespaces`).
    Namespaces,
    /// PID namespaces (`pid-namespace`): without one, processes may outlive their command.
    PidNamespace,
    /// bubblewrap (`bwrap`).
    Bwrap,
}

impl Mechanism {
    /// Parse a comma-separated list (`landlock,namespaces`); unknown names are errors.
    pub fn parse_list(list: &str) -> Result<Vec<Self>, String> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| match s {
                "landlock" => Ok(Self::Landlock),
                "landlock-net" => Ok(Self::LandlockNet),
                "namespaces" => Ok(Self::Namespaces),
                "pid-namespace" => Ok(Self::PidNamespace),
                "bwrap" => Ok(Self::Bwrap),
                other => Err(format!(
                    "unknown sandbox mechanism `{other}` (expected landlock, landlock-net, \
                     namespaces, pid-namespace or bwrap)"
                )),
            })
            .collect()
    }
}

/// The mechanisms found on this machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Support {
    /// Landlock file-system rules (ABI ≥ 1).
    pub landlock_fs: bool,
    /// Landlock TCP bind/connect rules (ABI ≥ 4).
    pub landlock_net: bool,
    /// Landlock signal and abstract-socket scopes (ABI ≥ 6).
    pub landlock_scopes: bool,
    /// User and network namespaces work through the launcher.
    pub namespaces: bool,
    /// A PID namespace works too: nothing a command starts outlives it.
    pub pid_namespace: bool,
    /// A fresh `/proc` can be mounted in that PID namespace (refused where `/proc` is
    /// partly masked, as in many containers: the host's `/proc` is seen then).
    pub fresh_proc: bool,
    /// A working `bwrap`.
    pub bwrap: Option<PathBuf>,
}

impl Support {
    /// Find out what this machine offers, treating `missing` as absent. `launcher` is the
    /// program that applies the sandbox to itself (without one, namespaces cannot be used);
    /// bubblewrap is looked for only when `want_bwrap`.
    pub fn detect(launcher: Option<&Path>, missing: &[Mechanism], want_bwrap: bool) -> Self {
        let off = |m: Mechanism| missing.contains(&m);
        let (fs, net, scopes) = landlock_features();
        let landlock_fs = fs && !off(Mechanism::Landlock);
        let probe = match launcher {
            Some(l) if !off(Mechanism::Namespaces) => probe_namespaces(l),
            _ => crate::pidns::probe::NONE,
        };
        let pid_namespace = !off(Mechanism::PidNamespace)
            && matches!(
                probe,
                crate::pidns::probe::FULL | crate::pidns::probe::NO_PROC
            );
        Self {
            landlock_fs,
            landlock_net: landlock_fs && net && !off(Mechanism::LandlockNet),
            landlock_scopes: landlock_fs && scopes,
            namespaces: probe != crate::pidns::probe::NONE,
            pid_namespace,
            fresh_proc: pid_namespace && probe == crate::pidns::probe::FULL,
            bwrap: (want_bwrap && !off(Mechanism::Bwrap))
                .then(find_bwrap)
                .flatten(),
        }
    }
}

/// Which Landlock features the kernel has: (file system, TCP, scopes). Asked by creating
/// (and dropping) rulesets that require each one, which restricts nothing.
#[cfg(target_os = "linux")]
fn landlock_features() -> (bool, bool, bool) {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, Scope,
    };
    let fs = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(landlock::Ruleset::create)
        .is_ok();
    let net = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessNet::from_all(ABI::V4))
        .and_then(landlock::Ruleset::create)
        .is_ok();
    let scopes = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(Scope::from_all(ABI::V6))
        .and_then(landlock::Ruleset::create)
        .is_ok();
    (fs, net, scopes)
}

#[cfg(not(target_os = "linux"))]
fn landlock_features() -> (bool, bool, bool) {
    (false, false, false)
}

/// Start the launcher in probe mode: it enters the namespaces it would use and exits with
/// one of the [`probe`](crate::pidns::probe) codes (any other answer: none work).
fn probe_namespaces(launcher: &Path) -> i32 {
    use crate::pidns::probe;
    let status = Command::new(launcher)
        .arg(crate::exec::PROBE_ARG)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match status.ok().and_then(|s| s.code()) {
        Some(c @ (probe::FULL | probe::NO_PID | probe::NO_PROC)) => c,
        _ => probe::NONE,
    }
}

/// `bwrap` on the `PATH` that can set up a sandbox here with the options cadre uses (it
/// needs user namespaces when it is not setuid).
fn find_bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let bwrap = std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())?;
    let tmp = std::env::temp_dir();
    let cmd = crate::bwrap::command(
        &bwrap,
        &crate::SandboxPolicy {
            mode: crate::SandboxMode::ReadOnly,
            network: false,
            writable: Vec::new(),
        },
        &crate::bwrap::View {
            tmp: &tmp,
            hidden: &[],
            read_only: &[],
        },
        "true".as_ref(),
    );
    quiet_success(cmd).then_some(bwrap)
}

fn quiet_success(mut cmd: Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
