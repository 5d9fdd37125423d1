//! The process-wide side of the sandbox: which program applies it, which backend is chosen,
//! whether a missing mechanism is an error, and what this machine offers (found out once).

use crate::error::SandboxError;
use crate::support::{Backend, Mechanism, Support};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// How this process sandboxes the commands it starts. Shared by every agent's [`Sandbox`]
/// (crate::Sandbox).
#[derive(Debug)]
pub struct Launcher {
    program: Option<PathBuf>,
    backend: Backend,
    required: bool,
    missing: Vec<Mechanism>,
    support: OnceLock<Support>,
}

impl Launcher {
    /// A launcher whose `program` calls [`run_launcher_if_requested`]
    /// (crate::run_launcher_if_requested) first thing in `main` (the cadre binary does).
    /// Without one, only bubblewrap can confine processes.
    pub fn new(program: Option<PathBuf>) -> Self {
        Self {
            program,
            backend: Backend::default(),
            required: false,
            missing: Vec::new(),
            support: OnceLock::new(),
        }
    }

    /// A launcher that re-executes the running program.
    pub fn current_exe() -> Self {
        Self::new(std::env::current_exe().ok())
    }

    /// Choose the backend (default `landlock`).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// Make a missing mechanism an error instead of a weaker sandbox.
    pub fn required(mut self, required: bool) -> Self {
        self.required = required;
        self
    }

    /// Treat these mechanisms as missing (to try out, or test, a weaker machine).
    pub fn simulate_missing(mut self, missing: Vec<Mechanism>) -> Self {
        self.missing = missing;
        self
    }

    /// Whether a missing mechanism is an error.
    pub fn is_required(&self) -> bool {
        self.required
    }

    /// What this machine offers; detected on first use.
    pub fn support(&self) -> &Support {
        self.support.get_or_init(|| {
            Support::detect(
                self.program.as_deref(),
                &self.missing,
                self.backend == Backend::Bwrap,
            )
        })
    }

    /// The backend that is used: bubblewrap when chosen and working, else the launcher.
    pub(crate) fn effective(&self) -> Effective<'_> {
        if self.backend == Backend::Bwrap
            && let Some(b) = &self.support().bwrap
        {
            return Effective::Bwrap(b);
        }
        match &self.program {
            Some(p) => Effective::Launcher(p),
            None => Effective::None,
        }
    }

    /// What a sandboxed process lacks here compared to the full sandbox, worst case (no
    /// network): one sentence per missing mechanism. Empty when nothing is missing.
    pub fn gaps(&self) -> Vec<String> {
        let mut gaps = self.gaps_for(false);
        let s = self.support();
        if matches!(self.effective(), Effective::Launcher(_)) && s.pid_namespace && !s.fresh_proc {
            // Reported, but not a reason to refuse a required sandbox: nothing else is lost.
            gaps.push(
                "a fresh /proc cannot be mounted in the sandbox's PID namespace here (a masked \
                 /proc): sandboxed processes see every process of the machine in /proc, \
                 cadre's own among them"
                    .into(),
            );
        }
        gaps
    }

    /// Whether every process a sandboxed command starts ends with it (its PID namespace
    /// ends): with bubblewrap, and with the launcher where PID namespaces work.
    pub(crate) fn commands_end_their_processes(&self) -> bool {
        match self.effective() {
            Effective::Bwrap(_) => true,
            Effective::Launcher(_) => self.support().namespaces && self.support().pid_namespace,
            Effective::None => false,
        }
    }

    /// As [`gaps`](Self::gaps), for a policy with or without network.
    pub(crate) fn gaps_for(&self, network: bool) -> Vec<String> {
        let mut gaps = Vec::new();
        let s = self.support();
        if self.backend == Backend::Bwrap && s.bwrap.is_none() {
            gaps.push(
                "bubblewrap (`bwrap`) is not installed or cannot create a sandbox here, so \
                 cadre's Landlock launcher is used instead"
                    .to_string(),
            );
        }
        match self.effective() {
            Effective::Bwrap(_) => {}
            Effective::None => gaps
                .push("no launcher program is configured: processes run without a sandbox".into()),
            Effective::Launcher(_) => {
                if !s.landlock_fs {
                    gaps.push(
                        "the kernel has no Landlock: sandboxed processes can write (and read) \
                         wherever the user can"
                            .into(),
                    );
                }
                if !s.namespaces {
                    let sockets = "service sockets (Docker, D-Bus, the SSH agent) stay reachable";
                    gaps.push(match (network, s.landlock_net) {
                        (true, _) => format!("user namespaces are not available: {sockets}"),
                        (false, true) => format!(
                            "user namespaces are not available: TCP is blocked (Landlock) but \
                             UDP and raw sockets are not, and {sockets}"
                        ),
                        (false, false) => format!(
                            "neither user namespaces nor Landlock TCP rules are available: \
                             sandboxed processes reach the network, and {sockets}"
                        ),
                    });
                }
                if !(s.namespaces && s.pid_namespace) {
                    gaps.push(
                        "PID namespaces are not available: a background process of a sandboxed \
                         command can outlive it (what it creates under a protected name later \
                         is moved away only when the agent's next sandboxed command starts)"
                            .into(),
                    );
                }
            }
        }
        gaps
    }

    /// With `required`, an error naming what is missing for a policy with or without
    /// `network`.
    pub(crate) fn check(&self, network: bool) -> Result<(), SandboxError> {
        if !self.required {
            return Ok(());
        }
        let gaps = self.gaps_for(network);
        if gaps.is_empty() {
            Ok(())
        } else {
            Err(SandboxError::Missing(gaps.join("; ")))
        }
    }

    /// With `required`, an error if anything is missing for a sandbox without network (for
    /// refusing to start at all).
    pub fn check_required(&self) -> Result<(), SandboxError> {
        self.check(false)
    }
}

/// The mechanism commands go through.
pub(crate) enum Effective<'a> {
    /// `bwrap` at this path.
    Bwrap(&'a Path),
    /// This program in launcher mode.
    Launcher(&'a Path),
    /// Nothing: commands run unconfined.
    None,
}
