//! One agent's sandbox: its [`SandboxPolicy`] on the process-wide [`Launcher`], and the
//! private temp dir its processes write to. [`Sandbox::command`] is the one way a process
//! for the agent is started.

use crate::credentials::{current_home_credentials, service_sockets};
use crate::error::SandboxError;
use crate::exec::LAUNCH_ARG;
use crate::launcher::{Effective, Launcher};
use crate::plan::LaunchPlan;
use crate::policy::SandboxPolicy;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// The sandbox of one agent's processes.
#[derive(Debug)]
pub struct Sandbox {
    launcher: Arc<Launcher>,
    policy: SandboxPolicy,
    /// Locations its processes cannot read (the credentials under `$HOME`, and more).
    hidden: Vec<PathBuf>,
    /// Sockets its processes cannot connect to.
    sockets: Vec<PathBuf>,
    /// Locations its processes may read but never write, even inside a writable root.
    protected: Vec<PathBuf>,
    /// Created with the first sandboxed command, removed when the sandbox is dropped.
    tmp: Mutex<Option<Arc<tempfile::TempDir>>>,
}

impl Sandbox {
    /// `policy` applied through `launcher`.
    pub fn new(launcher: Arc<Launcher>, policy: SandboxPolicy) -> Self {
        Self {
            launcher,
            policy,
            hidden: current_home_credentials(),
            sockets: service_sockets(),
            protected: Vec::new(),
            tmp: Mutex::new(None),
        }
    }

    /// Also keep these locations (absolute, canonical) from being read.
    pub fn hide(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.hidden.extend(paths);
        self
    }

    /// Also keep these sockets (or directories of sockets; absolute, canonical) from being
    /// connected to.
    pub fn cover_sockets(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.sockets.extend(paths);
        self
    }

    /// Keep these locations (absolute; they need not exist) read-only for the agent's
    /// processes even where they lie inside a writable root: cadre's configuration, agent
    /// definitions, sessions and git metadata, which its processes must not rewrite.
    pub fn protect(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.protected.extend(paths);
        self
    }

    /// The protected locations that exist now inside one of `writable` (canonical, links
    /// followed, so the mount lands on what a write would reach). One that does not exist is
    /// left out: a mount needs something to cover.
    fn read_only(&self, writable: &[PathBuf]) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = (self.protected.iter())
            .filter_map(|p| p.canonicalize().ok())
            .filter(|p| writable.iter().any(|w| p.starts_with(w)))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// What the agent's processes may do.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// The launcher it goes through.
    pub fn launcher(&self) -> &Arc<Launcher> {
        &self.launcher
    }

    /// A command that runs `program` in this sandbox; add its arguments, environment and
    /// working directory as usual. `TMPDIR` points at the private temp dir. With the `off`
    /// mode (or, unless required, a machine without any mechanism) it is a plain command.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Result<Command, SandboxError> {
        let program = program.as_ref();
        if self.policy.is_off() {
            return Ok(Command::new(program));
        }
        self.launcher.check(self.policy.network)?;
        let tmp = self.temp_dir()?;
        let hidden = &self.hidden;
        let read_only = self.read_only(&self.policy.writable);
        let mut cmd = match self.launcher.effective() {
            Effective::Bwrap(bwrap) => {
                let covered: Vec<PathBuf> = hidden.iter().chain(&self.sockets).cloned().collect();
                let view = crate::bwrap::View {
                    tmp: &tmp,
                    hidden: &covered,
                    read_only: &read_only,
                };
                crate::bwrap::command(bwrap, &self.policy, &view, program)
            }
            Effective::Launcher(exe) => {
                let plan = LaunchPlan::new(
                    &self.policy,
                    self.launcher.support(),
                    &tmp,
                    hidden,
                    &self.sockets,
                )
                .protecting(&read_only, &self.policy, &tmp, hidden);
                let json = serde_json::to_string(&plan).map_err(|_| {
                    let bad = plan
                        .read
                        .iter()
                        .chain(&plan.write)
                        .find(|p| p.to_str().is_none());
                    SandboxError::NonUtf8(bad.cloned().unwrap_or_default())
                })?;
                let mut cmd = Command::new(exe);
                cmd.arg(LAUNCH_ARG).arg(json).arg(program);
                cmd
            }
            Effective::None => Command::new(program),
        };
        cmd.env("TMPDIR", &tmp);
        Ok(cmd)
    }

    /// The private temp dir (created on first use).
    pub fn temp_dir(&self) -> Result<PathBuf, SandboxError> {
        let mut slot = self
            .tmp
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(t) = slot.as_ref() {
            return Ok(t.path().to_path_buf());
        }
        let dir = tempfile::Builder::new()
            .prefix("cadre-sandbox-")
            .tempdir()
            .map_err(SandboxError::TempDir)?;
        let path = dir.path().canonicalize().map_err(SandboxError::TempDir)?;
        *slot = Some(Arc::new(dir));
        Ok(path)
    }
}
