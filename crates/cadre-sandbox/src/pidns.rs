//! The launcher's PID namespace: the program runs as the only child of a small init, PID 1
//! of a namespace of its own, so that when the program ends the kernel ends every process it
//! left behind (background jobs, `setsid`, `nohup` or `disown`ed processes). The launcher
//! outside waits for that init, passes stop requests on and reports the program's status as
//! its own.
//!
//! Why an init and not the program itself as PID 1: the kernel drops every signal sent to a
//! namespace's PID 1 for which it has no handler (SIGTERM, and even SIGKILL from inside), so
//! a shell as PID 1 could not be stopped or kill itself the usual way; and PID 1 adopts and
//! must reap every orphan, which most programs do not.

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::process::Command;

/// Signals the launcher passes on to the program: a terminal's or a supervisor's request to
/// stop, which would otherwise end only the launcher (and with it, at once, everything).
const FORWARDED: [Signal; 3] = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP];

/// Written by the init once the program runs and stop signals are blocked again: from then
/// on one sent to the init is queued for it to forward, not dropped.
const STARTED: u8 = 0xff;

/// Exit status when the sandbox cannot be set up (the program never ran).
pub(crate) const SETUP_FAILED: i32 = 125;
/// Exit status when the program cannot be executed (as a shell reports it).
pub(crate) const EXEC_FAILED: i32 = 127;

/// Answers of the namespace probe, as its exit status.
pub(crate) mod probe {
    /// User, mount, network and PID namespaces work, and a fresh `/proc` can be mounted.
    pub const FULL: i32 = 0;
    /// Nothing works.
    pub const NONE: i32 = 1;
    /// User, mount and network namespaces work; a PID namespace does not.
    pub const NO_PID: i32 = 2;
    /// All namespaces work, but mounting a fresh `/proc` is refused (a masked `/proc`, as
    /// in many containers).
    pub const NO_PROC: i32 = 3;
}

/// Run `argv` under an init in the PID namespace entered (with `CLONE_NEWPID`) by this
/// process: fork that init, which mounts a fresh `/proc` when `fresh_proc`, applies the rest
/// of the sandbox with `apply` and starts the program; wait for it, forwarding
/// [`FORWARDED`] signals; then exit as the program did.
pub(crate) fn run(
    fresh_proc: bool,
    apply: impl FnOnce() -> Result<(), String>,
    argv: &[OsString],
) -> ! {
    let mask = signal_mask();
    // Blocked before the fork, so that none is lost before either side reads them.
    if let Err(e) = mask.thread_block() {
        fail(SETUP_FAILED, &format!("cannot block signals: {}", e.desc()));
    }
    // The init tells us through it that the program runs, and the signal it died of.
    let (status_r, status_w) = match nix::unistd::pipe2(OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => fail(SETUP_FAILED, &format!("pipe: {}", e.desc())),
    };
    // Each side closes the end it does not use: the init's test for a launcher that died
    // early is that nobody reads any more.
    let reader = std::cell::Cell::new(Some(status_r));
    let init = fork_child(|| {
        drop(reader.take());
        init(status_w, fresh_proc, apply, argv, &mask)
    });
    match (init, reader.take()) {
        (Ok(pid), Some(status_r)) => supervise(pid, &status_r, &mask),
        (Ok(pid), None) => {
            let _ = kill(pid, Signal::SIGKILL);
            fail(SETUP_FAILED, "the status pipe is gone")
        }
        (Err(e), _) => fail(
            SETUP_FAILED,
            &format!("cannot start the namespace's init: {e}"),
        ),
    }
}

/// The probe of PID namespaces, called after entering them: whether a process forked into
/// the new namespace can mount a fresh `/proc` there.
pub(crate) fn probe_proc() -> i32 {
    match fork_child(|| i32::from(mount_proc().is_err())) {
        Ok(pid) => match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, 0)) => probe::FULL,
            _ => probe::NO_PROC,
        },
        Err(_) => probe::NO_PID,
    }
}

fn signal_mask() -> SigSet {
    let mut mask = SigSet::empty();
    for s in FORWARDED {
        mask.add(s);
    }
    mask.add(Signal::SIGCHLD);
    mask
}

/// Fork; the child runs `child` and exits with what it returns.
fn fork_child(child: impl FnOnce() -> i32) -> Result<Pid, String> {
    // SAFETY: the launcher is single-threaded here: it runs first thing in `main`, before
    // any thread is started, and it got here only after `unshare(CLONE_NEWUSER)`, which the
    // kernel refuses to a process with more than one thread. In a single-threaded process
    // the child may run any code, as after a fork at the start of a C program.
    #[allow(unsafe_code)]
    let forked = unsafe { nix::unistd::fork() };
    match forked.map_err(|e| e.desc().to_string())? {
        ForkResult::Parent { child } => Ok(child),
        ForkResult::Child => std::process::exit(child()),
    }
}

/// The init (PID 1): die with the launcher, finish the sandbox, start the program and reap
/// every process until it ends. Returns the exit status to end with.
fn init(
    status: OwnedFd,
    fresh_proc: bool,
    apply: impl FnOnce() -> Result<(), String>,
    argv: &[OsString],
    mask: &SigSet,
) -> i32 {
    // SIGKILL of the launcher (a timeout, cadre's watchdog) then ends the namespace too.
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() || launcher_gone(&status) {
        return SETUP_FAILED;
    }
    if fresh_proc && let Err(e) = mount_proc() {
        // The probe found this working; a command still runs with the host's /proc.
        eprintln!(
            "cadre sandbox: cannot mount a fresh /proc ({e}); the command sees the host's /proc"
        );
    }
    if let Err(e) = apply() {
        eprintln!("cadre sandbox: {e}");
        return SETUP_FAILED;
    }
    let Some((program, args)) = argv.split_first() else {
        return SETUP_FAILED;
    };
    // The program gets the signal mask the launcher started with (a blocked SIGTERM would
    // be inherited, and ignored by a shell), and the default SIGPIPE (`Command` sees to
    // that). While they are unblocked here, the kernel drops what is sent to PID 1 without
    // a handler: the launcher holds stop requests until it hears STARTED, and a SIGCHLD
    // dropped meanwhile does not matter, as reaping polls before it waits.
    let _ = mask.thread_unblock();
    let spawned = Command::new(program).args(args).spawn();
    let _ = mask.thread_block();
    let child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let why = e
                .raw_os_error()
                .map_or_else(|| e.to_string(), |n| Errno::from_raw(n).desc().to_string());
            eprintln!("cadre sandbox: {}: {why}", program.to_string_lossy());
            return EXEC_FAILED;
        }
    };
    let Ok(pid) = i32::try_from(child.id()).map(Pid::from_raw) else {
        return SETUP_FAILED;
    };
    let _ = nix::unistd::write(&status, &[STARTED]);
    let Ok(signals) = SignalFd::with_flags(mask, SfdFlags::SFD_CLOEXEC) else {
        let _ = kill(pid, Signal::SIGKILL);
        return SETUP_FAILED;
    };
    loop {
        if let Some(end) = reap_all(pid) {
            return match end {
                Ended::Code(code) => code,
                Ended::Signal(sig) => {
                    // PID 1 cannot die of a signal it sends itself: the launcher re-raises it.
                    let _ = nix::unistd::write(&status, &[sig as u8]);
                    128 + sig as i32
                }
            };
        }
        forward(&signals, pid);
    }
}

/// How the program ended.
enum Ended {
    Code(i32),
    Signal(Signal),
}

/// Reap every process that has ended (orphans are ours); `Some` once `program` has.
fn reap_all(program: Pid) -> Option<Ended> {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(p, code)) if p == program => return Some(Ended::Code(code)),
            Ok(WaitStatus::Signaled(p, sig, _)) if p == program => {
                return Some(Ended::Signal(sig));
            }
            Ok(WaitStatus::StillAlive) => return None,
            Ok(_) | Err(Errno::EINTR) => {}
            // ECHILD: nothing left to wait for, which cannot be while the program runs.
            Err(_) => return Some(Ended::Code(SETUP_FAILED)),
        }
    }
}

/// Wait for the next signal; pass it to `to` when it is one to forward.
fn forward(signals: &SignalFd, to: Pid) {
    if let Ok(Some(info)) = signals.read_signal()
        && let Ok(sig) = Signal::try_from(info.ssi_signo as i32)
        && FORWARDED.contains(&sig)
    {
        let _ = kill(to, sig);
    }
}

/// Whether the launcher died before the init asked to die with it: the reading end of the
/// status pipe, which only the launcher holds, is then closed.
fn launcher_gone(status: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(status.as_fd(), PollFlags::POLLOUT)];
    poll(&mut fds, PollTimeout::ZERO).is_err()
        || fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}

/// The launcher's side: wait for the init, forwarding signals to it once the program runs
/// (before, the init would drop them: held until then), then exit as the program did.
fn supervise(init: Pid, status: &OwnedFd, mask: &SigSet) -> ! {
    let signals = match SignalFd::with_flags(mask, SfdFlags::SFD_CLOEXEC) {
        Ok(s) => s,
        Err(e) => {
            let _ = kill(init, Signal::SIGKILL);
            fail(SETUP_FAILED, &format!("signalfd: {}", e.desc()));
        }
    };
    let _ = fcntl(status, FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
    let mut news = News::default();
    let mut held = Vec::new();
    loop {
        match waitpid(init, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => {
                news.read(status);
                match news.died_of {
                    Some(sig) => reraise(sig, code),
                    None => std::process::exit(code),
                }
            }
            Ok(WaitStatus::Signaled(_, sig, _)) => reraise(sig, 128 + sig as i32),
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => fail(SETUP_FAILED, &format!("waiting for the init: {}", e.desc())),
        }
        let mut fds = [
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(status.as_fd(), PollFlags::POLLIN),
        ];
        // Once the init closed its end (it is exiting), only signals are waited for.
        let watched = if news.closed { 1 } else { 2 };
        if poll(&mut fds[..watched], PollTimeout::NONE).is_err() {
            continue;
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        let (signal_ready, status_ready) = (ready(&fds[0]), watched == 2 && ready(&fds[1]));
        if status_ready {
            news.read(status);
        }
        if signal_ready
            && let Ok(Some(info)) = signals.read_signal()
            && let Ok(sig) = Signal::try_from(info.ssi_signo as i32)
            && FORWARDED.contains(&sig)
        {
            held.push(sig);
        }
        if news.started {
            for sig in held.drain(..) {
                let _ = kill(init, sig);
            }
        }
    }
}

/// What the init told the launcher through the status pipe.
#[derive(Default)]
struct News {
    /// The program runs ([`STARTED`]).
    started: bool,
    /// The signal the program died of.
    died_of: Option<Signal>,
    /// The init closed its end.
    closed: bool,
}

impl News {
    /// Read what is there now (the pipe does not block).
    fn read(&mut self, status: &OwnedFd) {
        let mut buf = [0u8; 16];
        loop {
            match nix::unistd::read(status, &mut buf) {
                Ok(0) => {
                    self.closed = true;
                    return;
                }
                Ok(n) => {
                    for &b in &buf[..n] {
                        if b == STARTED {
                            self.started = true;
                        } else {
                            self.died_of = Signal::try_from(i32::from(b)).ok();
                        }
                    }
                }
                Err(Errno::EINTR) => {}
                Err(_) => return,
            }
        }
    }
}

/// Die of `sig` as the program did, so our parent sees the same status; without a core
/// file (the program may have left one). Exit with `fallback` when the signal does not kill
/// us (one that this process ignores, as Rust programs do SIGPIPE).
fn reraise(sig: Signal, fallback: i32) -> ! {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_CORE) {
        let _ = setrlimit(Resource::RLIMIT_CORE, 0, hard);
    }
    let _ = kill(nix::unistd::getpid(), sig);
    let mut one = SigSet::empty();
    one.add(sig);
    // A blocked signal is delivered, and kills, once unblocked.
    let _ = one.thread_unblock();
    std::process::exit(fallback)
}

/// Mount a fresh `/proc`, showing this PID namespace only (and hiding cadre's processes).
#[cfg(target_os = "linux")]
fn mount_proc() -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| e.desc().to_string())
}

#[cfg(not(target_os = "linux"))]
fn mount_proc() -> Result<(), String> {
    Err("mounts are a Linux feature".into())
}

fn fail(code: i32, message: &str) -> ! {
    eprintln!("cadre sandbox: {message}");
    std::process::exit(code)
}
