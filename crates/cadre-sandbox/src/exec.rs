//! The launcher: cadre's binary started with [`LAUNCH_ARG`] confines itself (namespaces,
//! then Landlock) and executes the program (under an init of a new PID namespace when it
//! can, see [`pidns`](crate::pidns)), so the restrictions hold before the program's first
//! instruction and for everything it starts. With [`PROBE_ARG`] it only tries the
//! namespaces, which tells the parent whether they work here.

use crate::plan::LaunchPlan;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

/// First argument of a launcher run: `<exe> LAUNCH_ARG <plan json> <program> [args...]`.
pub(crate) const LAUNCH_ARG: &str = "__cadre-sandbox-exec";
/// First argument of a namespace probe: `<exe> PROBE_ARG`.
pub(crate) const PROBE_ARG: &str = "__cadre-sandbox-probe";

use crate::pidns::{EXEC_FAILED, SETUP_FAILED, probe};

/// If this process was started as the sandbox launcher, confine it and execute the program
/// (or answer the probe, or be the [`tether`](crate::tether) watchdog); this never returns
/// then. Otherwise it returns at once.
///
/// Call it first thing in `main`, before any thread is started: entering a user namespace
/// needs a single-threaded process.
pub fn run_launcher_if_requested() {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(a) if a == LAUNCH_ARG => launch(args.collect()),
        Some(a) if a == crate::tether::WATCHDOG_ARG => crate::tether::run_watchdog(),
        Some(a) if a == PROBE_ARG => std::process::exit(probe_namespaces()),
        _ => {}
    }
}

fn launch(args: Vec<OsString>) -> ! {
    let mut args = args.into_iter();
    let plan = args
        .next()
        .and_then(|p| p.into_string().ok())
        .ok_or_else(|| "the launch plan is missing".to_string())
        .and_then(|p| serde_json::from_str::<LaunchPlan>(&p).map_err(|e| e.to_string()));
    let plan = match plan {
        Ok(p) => p,
        Err(e) => fail(SETUP_FAILED, &format!("bad launch plan: {e}")),
    };
    let argv_os: Vec<OsString> = args.collect();
    let argv: Vec<CString> = match argv_os.iter().map(|a| CString::new(a.as_bytes())).collect() {
        Ok(v) => v,
        Err(_) => fail(SETUP_FAILED, "an argument contains a NUL byte"),
    };
    let Some(program) = argv.first().cloned() else {
        fail(SETUP_FAILED, "no program to run");
    };
    if plan.new_userns
        && let Err(e) = enter_namespaces(plan.new_netns, plan.new_pidns)
    {
        fail(SETUP_FAILED, &format!("cannot enter namespaces: {e}"));
    }
    if plan.new_userns && plan.new_pidns {
        // The program runs under an init of the new PID namespace, which applies the rest.
        crate::pidns::run(plan.fresh_proc, || apply(&plan), &argv_os);
    }
    if let Err(e) = apply(&plan) {
        fail(SETUP_FAILED, &e);
    }
    let err = match nix::unistd::execvp(&program, &argv) {
        Err(e) => e,
        Ok(never) => match never {},
    };
    fail(
        EXEC_FAILED,
        &format!("{}: {}", program.to_string_lossy(), err.desc()),
    )
}

/// The sandbox inside the namespaces: the mounts of the plan, then Landlock.
fn apply(plan: &LaunchPlan) -> Result<(), String> {
    for path in &plan.cover {
        cover(path).map_err(|e| format!("cannot cover {}: {e}", path.display()))?;
    }
    for path in &plan.read_only {
        bind_read_only(path)
            .map_err(|e| format!("cannot make {} read-only: {e}", path.display()))?;
    }
    confine(plan).map_err(|e| format!("cannot apply Landlock rules: {e}"))
}

/// The namespace probe: enter every namespace the launcher uses, PID namespace included,
/// and say (as [`probe`] codes) how far that got.
fn probe_namespaces() -> i32 {
    if enter_namespaces(true, true).is_ok() {
        return crate::pidns::probe_proc();
    }
    // A refused `unshare` changed nothing: try again without the PID namespace.
    match enter_namespaces(true, false) {
        Ok(()) => probe::NO_PID,
        Err(_) => probe::NONE,
    }
}

fn fail(code: i32, message: &str) -> ! {
    eprintln!("cadre sandbox: {message}");
    std::process::exit(code)
}

/// Enter new user and mount namespaces, keeping our own uid and gid, with `net` a new
/// network namespace (it has only a loopback interface, which is down, so no socket
/// reaches anything), and with `pid` a new PID namespace for the children of this process.
/// Mounts made here stay here.
#[cfg(target_os = "linux")]
fn enter_namespaces(net: bool, pid: bool) -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, unshare};
    use nix::unistd::{getgid, getuid};
    let (uid, gid) = (getuid(), getgid());
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS;
    if net {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if pid {
        flags |= CloneFlags::CLONE_NEWPID;
    }
    unshare(flags).map_err(|e| format!("unshare: {}", e.desc()))?;
    // Without `deny` here an unprivileged process may not write its gid map.
    match std::fs::write("/proc/self/setgroups", "deny") {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("/proc/self/setgroups: {e}"));
        }
        _ => {}
    }
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))
        .map_err(|e| format!("uid_map: {e}"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
        .map_err(|e| format!("gid_map: {e}"))?;
    // Already the case for a namespace owned by a new user namespace; said explicitly.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("making mounts private: {}", e.desc()))?;
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn enter_namespaces(_net: bool, _pid: bool) -> Result<(), String> {
    Err("namespaces are a Linux feature".into())
}

/// Hide `path` in this mount namespace: an empty tmpfs over a directory, `/dev/null` over
/// anything else (a socket then refuses connections). A path that vanished is fine.
#[cfg(target_os = "linux")]
fn cover(path: &std::path::Path) -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let result = if meta.is_dir() {
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("size=16k,mode=0700"),
        )
    } else {
        mount(
            Some("/dev/null"),
            path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
    };
    result.map_err(|e| e.desc().to_string())
}

#[cfg(not(target_os = "linux"))]
fn cover(_path: &std::path::Path) -> Result<(), String> {
    Err("mounts are a Linux feature".into())
}

/// Bind `path` over itself read-only in this mount namespace, so nothing below it can be
/// written, created, renamed or removed, and the name itself cannot be replaced (a mount
/// point is busy). A path that vanished is fine. The remount keeps the flags the mount it
/// lies on has (`nosuid`, `nodev`, ...): in a user namespace those are locked, and a
/// remount that dropped one would be refused.
#[cfg(target_os = "linux")]
fn bind_read_only(path: &std::path::Path) -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    use nix::sys::statvfs::{FsFlags, statvfs};
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    mount(
        Some(path),
        path,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| format!("bind: {}", e.desc()))?;
    let have = statvfs(path)
        .map_err(|e| format!("statvfs: {}", e.desc()))?
        .flags();
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if have.contains(fs) {
            flags |= ms;
        }
    }
    mount(None::<&str>, path, None::<&str>, flags, None::<&str>)
        .map_err(|e| format!("remount: {}", e.desc()))
}

#[cfg(not(target_os = "linux"))]
fn bind_read_only(_path: &std::path::Path) -> Result<(), String> {
    Err("mounts are a Linux feature".into())
}

/// Restrict this process (and whatever it executes) with Landlock: reads, writes and
/// devices as the plan lists them, TCP and scopes when it asks. Sets `no_new_privs`, so
/// setuid programs cannot regain anything.
#[cfg(target_os = "linux")]
fn confine(plan: &LaunchPlan) -> Result<(), String> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, Scope,
    };
    if !plan.landlock_fs && !plan.deny_tcp {
        return Ok(());
    }
    // The newest ABI this code was written and tested against; newer rights stay unhandled.
    let abi = ABI::V7;
    let err = |e: landlock::RulesetError| e.to_string();
    let mut ruleset = Ruleset::default();
    if plan.landlock_fs {
        ruleset = ruleset
            .handle_access(AccessFs::from_all(abi))
            .map_err(err)?;
    }
    if plan.deny_tcp {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(err)?;
    }
    let mut scopes = BitFlags::<Scope>::empty();
    if plan.scope_signals {
        scopes |= Scope::Signal;
    }
    if plan.scope_abstract_sockets {
        scopes |= Scope::AbstractUnixSocket;
    }
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(err)?;
    }
    let mut created = ruleset.create().map_err(err)?;
    if plan.landlock_fs {
        let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
        let rules = plan
            .read
            .iter()
            .map(|p| (p, AccessFs::from_read(abi)))
            .chain(plan.list.iter().map(|p| (p, AccessFs::ReadDir.into())))
            .chain(plan.write.iter().map(|p| (p, AccessFs::from_all(abi))))
            .chain(plan.devices.iter().map(|p| (p, device)));
        for (path, access) in rules {
            // A path that vanished since the plan was made grants nothing.
            let Ok(fd) = PathFd::new(path) else { continue };
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(err)?;
        }
    }
    let status = created.restrict_self().map_err(err)?;
    // The parent decided from what the kernel offers; anything less now is an error, not a
    // silently weaker sandbox.
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("the kernel did not enforce the ruleset".into());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn confine(plan: &LaunchPlan) -> Result<(), String> {
    if plan.landlock_fs || plan.deny_tcp {
        return Err("Landlock is a Linux feature".into());
    }
    Ok(())
}
