//! The signals that stop a run: SIGINT (Ctrl-C), SIGTERM (a service manager, `kill`) and
//! SIGHUP (the terminal went away) all cancel it the same way, so that child process groups
//! are killed, tasks record why they ended and sessions are complete. A second one exits
//! at once.

use tokio::signal::unix::{Signal, SignalKind, signal};

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
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl StopSignals {
    /// Install the listeners.
    pub fn install() -> std::io::Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next stopping signal.
    pub async fn next(&mut self) -> StopSignal {
        tokio::select! {
            _ = self.interrupt.recv() => StopSignal::Interrupt,
            _ = self.terminate.recv() => StopSignal::Terminate,
            _ = self.hangup.recv() => StopSignal::Hangup,
        }
    }
}
