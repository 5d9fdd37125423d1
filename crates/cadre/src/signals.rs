//! The signals that stop cadre: SIGINT (Ctrl-C), SIGTERM (a service manager, `kill`) and
//! SIGHUP (the terminal went away) all cancel the run the same way, so that child process
//! groups are killed, tasks record why they ended and sessions are complete. A second one
//! kills every process group at once and exits as soon as the tasks have recorded their
//! ends (within 1.5 s). `cadre run`, the line REPL and the full-screen UI share [`SignalStop`].

use cadre_subagents::SubagentRuntime;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// How long a second signal waits for cancelled tasks to store their ends before exiting.
const SECOND_SIGNAL_GRACE: std::time::Duration = std::time::Duration::from_millis(1500);

/// A signal asking cadre to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT.
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP.
    Hangup,
}

impl StopSignal {
    /// The signal's name (`SIGTERM`).
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::Hangup => "SIGHUP",
        }
    }

    /// The exit code of a process stopped by it: 128 + the signal number.
    pub fn exit_code(self) -> u8 {
        match self {
            StopSignal::Interrupt => 130,
            StopSignal::Terminate => 143,
            StopSignal::Hangup => 129,
        }
    }
}

/// Listeners for the stopping signals. Installing them replaces the default action
/// (terminate at once) for as long as the process lives.
pub struct StopSignals {
    /// Absent where SIGINT is handled elsewhere (the REPL's Ctrl-C cancels only a turn).
    interrupt: Option<Signal>,
    terminate: Signal,
    hangup: Signal,
}

impl StopSignals {
    /// Listen for SIGINT, SIGTERM and SIGHUP.
    pub fn install() -> std::io::Result<Self> {
        let mut s = Self::install_terminating()?;
        s.interrupt = Some(signal(SignalKind::interrupt())?);
        Ok(s)
    }

    /// Listen for SIGTERM and SIGHUP only.
    pub fn install_terminating() -> std::io::Result<Self> {
        Ok(Self {
            interrupt: None,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next stopping signal.
    pub async fn next(&mut self) -> StopSignal {
        let interrupt = async {
            match &mut self.interrupt {
                Some(s) => s.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = interrupt => StopSignal::Interrupt,
            _ = self.terminate.recv() => StopSignal::Terminate,
            _ = self.hangup.recv() => StopSignal::Hangup,
        }
    }
}

/// What the first stopping signal does: tell the runtime why (its tasks record `cadre
/// received SIGTERM`) and cancel a token the surface watches; the second exits at once.
/// Stops listening when dropped.
pub struct SignalStop {
    task: tokio::task::JoinHandle<()>,
    received: Arc<OnceLock<StopSignal>>,
}

/// How a surface reacts to a signal besides cancelling.
pub struct OnSignal {
    /// Say on stderr that cadre is stopping (not on the full-screen UI, which owns the screen).
    pub announce: bool,
    /// Run before exiting at the second signal (the UI restores the terminal).
    pub before_exit: fn(),
}

impl SignalStop {
    /// Listen with `signals`, cancelling `cancel` at the first one.
    pub fn spawn(
        mut signals: StopSignals,
        cancel: CancellationToken,
        runtime: Arc<SubagentRuntime>,
        on: OnSignal,
    ) -> Self {
        let received = Arc::new(OnceLock::new());
        let cell = received.clone();
        let task = tokio::spawn(async move {
            let first = signals.next().await;
            let _ = cell.set(first);
            if on.announce {
                match first {
                    StopSignal::Interrupt => {
                        eprintln!("\ncadre: cancelling (Ctrl-C again to quit at once)…")
                    }
                    other => eprintln!("\ncadre: received {}, cancelling…", other.name()),
                }
            }
            runtime.set_shutdown_reason(format!("cadre received {}", first.name()));
            cancel.cancel();
            let second = signals.next().await;
            // No destructor runs past `exit`: every command's process group is killed here
            // (the watchdog would do it too, a moment after the exit), then the tasks the
            // first signal cancelled get a short while to record their ends, which they do
            // at once now that their commands are gone. A third signal does not wait.
            cadre_sandbox::tether::kill_all();
            tokio::select! {
                _ = tokio::time::timeout(SECOND_SIGNAL_GRACE, runtime.wait_idle()) => {}
                _ = signals.next() => {}
            }
            // The transcripts are written here.
            cadre_engine::flush_open_transcripts();
            (on.before_exit)();
            crate::telemetry::shutdown();
            std::process::exit(i32::from(second.exit_code()));
        });
        Self { task, received }
    }

    /// Stop reacting to further signals (the default action does not come back: a signal
    /// now is ignored), once everything the first one asked for is done.
    pub fn disarm(&self) {
        self.task.abort();
    }

    /// The first signal received, if any.
    pub fn received(&self) -> Option<StopSignal> {
        self.received.get().copied()
    }

    /// The exit code of a surface that ended with `code`: SIGTERM's or SIGHUP's when one
    /// stopped it, else `code` (a Ctrl-C ends the run as cancelled, which `code` says).
    pub fn exit_code(&self, code: ExitCode) -> ExitCode {
        match self.received() {
            Some(s) if s != StopSignal::Interrupt => ExitCode::from(s.exit_code()),
            _ => code,
        }
    }
}

impl Drop for SignalStop {
    fn drop(&mut self) {
        self.task.abort();
    }
}
