//! No process cadre starts for an agent outlives it, even when cadre is killed with SIGKILL.
//!
//! Each such process (`bash`, a stdio MCP server) leads a process group of its own. A
//! watchdog — cadre's own binary started with [`WATCHDOG_ARG`] once per process, on first
//! use — learns every group from a pipe only cadre holds the writing end of. When cadre
//! dies, however it dies, the kernel closes that end; the watchdog reads end-of-file, kills
//! every group it was told about with SIGKILL and exits.
//!
//! Why not `PR_SET_PDEATHSIG`: it fires when the *thread* that forked the child exits (tokio
//! retires idle threads), it needs a `pre_exec` hook, and it reaches only the direct child,
//! not the background jobs of a shell. The watchdog covers the child and its whole group
//! with one mechanism and no `unsafe`. A process that leaves its group (`setsid`, a
//! `setpgid` of its own) is not followed; in a sandbox with a PID namespace it still dies
//! with the namespace, whose init is in the group.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};

/// First argument of a watchdog run: `<exe> WATCHDOG_ARG`.
pub(crate) const WATCHDOG_ARG: &str = "__cadre-watchdog";

/// The program that runs the watchdog (one that calls
/// [`run_launcher_if_requested`](crate::run_launcher_if_requested) first in `main`).
static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// The groups watched, and the running watchdog.
static STATE: Mutex<State> = Mutex::new(State {
    groups: BTreeSet::new(),
    watchdog: None,
});

struct State {
    groups: BTreeSet<i32>,
    watchdog: Option<Watchdog>,
}

struct Watchdog {
    /// Kept so the process is not reaped behind our back; never waited for.
    _child: Child,
    stdin: ChildStdin,
}

/// Tie the process groups started from now on to this process's life, with `program` (whose
/// `main` calls [`run_launcher_if_requested`](crate::run_launcher_if_requested) first) as
/// the watchdog. Without it, [`watch_group`] does nothing: a library whose binary does not
/// dispatch the launcher arguments gets no watchdog.
pub fn enable(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// [`enable`] with the running program (the `cadre` binary).
pub fn enable_current_exe() {
    if let Ok(p) = std::env::current_exe() {
        enable(p);
    }
}

/// True once [`enable`] was called.
pub fn is_enabled() -> bool {
    PROGRAM.get().is_some()
}

/// Kill process group `pgid` (a child started with `process_group(0)`: its pid) with
/// SIGKILL when this process dies. Returns false when it is not watched (no watchdog is
/// enabled or none could be started).
pub fn watch_group(pgid: u32) -> bool {
    let Some(pgid) = valid(pgid) else {
        return false;
    };
    let mut state = STATE.lock().unwrap_or_else(PoisonError::into_inner);
    state.groups.insert(pgid);
    state.send(&format!("+{pgid}\n"))
}

/// Stop watching `pgid` (the group is gone: its number may be used again).
pub fn release_group(pgid: u32) {
    let Some(pgid) = valid(pgid) else { return };
    let mut state = STATE.lock().unwrap_or_else(PoisonError::into_inner);
    if state.groups.remove(&pgid) {
        state.send(&format!("-{pgid}\n"));
    }
}

/// Stop watching `pgid` when no process of it is left; else it stays watched (a shell's
/// background job that outlived the call still dies with cadre).
pub fn release_group_if_empty(pgid: u32) {
    let Some(raw) = valid(pgid) else { return };
    if killpg(Pid::from_raw(raw), None) == Err(nix::errno::Errno::ESRCH) {
        release_group(pgid);
    }
}

/// Kill every watched group now (a process about to exit without running destructors).
pub fn kill_all() {
    let state = STATE.lock().unwrap_or_else(PoisonError::into_inner);
    for g in &state.groups {
        let _ = killpg(Pid::from_raw(*g), Signal::SIGKILL);
    }
}

/// Make this process non-dumpable: other processes of the user (an agent's `bash`) can then
/// neither read its `/proc` files that expose memory (`mem`, `environ`) nor attach a
/// debugger. Its children are dumpable again after `exec`. False when the kernel refuses.
pub fn forbid_inspection() -> bool {
    nix::sys::prctl::set_dumpable(false).is_ok()
}

/// Group numbers 0 and 1 mean "my own group" and "every process" to `kill`: never sent.
fn valid(pgid: u32) -> Option<i32> {
    i32::try_from(pgid).ok().filter(|p| *p > 1)
}

impl State {
    /// Tell the watchdog `line`, starting one (and telling it every group) when none runs
    /// or the last one is gone.
    fn send(&mut self, line: &str) -> bool {
        if let Some(w) = &mut self.watchdog
            && w.stdin.write_all(line.as_bytes()).is_ok()
        {
            return true;
        }
        self.watchdog = None;
        let Some(mut w) = PROGRAM.get().and_then(|p| start(p).ok()) else {
            return false;
        };
        let all: String = self.groups.iter().map(|g| format!("+{g}\n")).collect();
        let ok = w.stdin.write_all(all.as_bytes()).is_ok();
        self.watchdog = Some(w);
        ok
    }
}

fn start(program: &std::path::Path) -> std::io::Result<Watchdog> {
    let mut child = Command::new(program)
        .arg(WATCHDOG_ARG)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own group: a Ctrl-C at the terminal, or a kill of cadre's group, does not
        // take it down before it has done its work.
        .process_group(0)
        .spawn()?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("the watchdog has no stdin"))?;
    Ok(Watchdog {
        _child: child,
        stdin,
    })
}

/// The watchdog: read `+PGID` / `-PGID` lines until end-of-file, then kill the groups
/// still listed.
pub(crate) fn run_watchdog() -> ! {
    let mut groups = BTreeSet::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let (sign, number) = line.split_at(line.len().min(1));
        let Some(pgid) = number.parse::<u32>().ok().and_then(valid) else {
            continue;
        };
        match sign {
            "+" => {
                groups.insert(pgid);
            }
            "-" => {
                groups.remove(&pgid);
            }
            _ => {}
        }
    }
    for g in groups {
        let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
    }
    std::process::exit(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_group_and_every_process_are_never_targets() {
        assert_eq!(valid(0), None);
        assert_eq!(valid(1), None);
        assert_eq!(valid(u32::MAX), None);
        assert_eq!(valid(4242), Some(4242));
    }

    #[test]
    fn without_a_program_nothing_is_watched() {
        // Test binaries never call `enable`.
        assert!(!is_enabled());
        assert!(!watch_group(4242));
    }
}
