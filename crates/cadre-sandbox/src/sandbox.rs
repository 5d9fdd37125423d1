//! One agent's sandbox: its [`SandboxPolicy`] on the process-wide [`Launcher`], and the
//! private temp dir its processes write to. [`Sandbox::command`] is the one way a process
//! for the agent is started.

use crate::credentials::{current_home_credentials, service_sockets};
use crate::error::SandboxError;
use crate::exec::LAUNCH_ARG;
use crate::launcher::{Effective, Launcher};
use crate::plan::LaunchPlan;
use crate::policy::SandboxPolicy;
use crate::watch::{ProtectedWatch, Quarantined, missing_in, neutralise};
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
    /// Protected directories that are cadre's own: made (empty) before a command when
    /// missing, so they are covered like existing ones rather than watched.
    owned: Vec<PathBuf>,
    /// Protected locations still missing after the last command (without a PID namespace,
    /// whose background processes may outlive their call): checked when the next one starts.
    left_missing: Mutex<Vec<PathBuf>>,
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
            owned: Vec::new(),
            left_missing: Mutex::new(Vec::new()),
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

    /// Protected directories (absolute) that cadre itself writes in, such as its `.cadre/`:
    /// created empty before a sandboxed command when missing and inside a writable root, so
    /// they are read-only for it like existing protected paths. Being cadre's own, they are
    /// never taken for something a sandboxed process created.
    pub fn own_protected(mut self, dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        self.owned.extend(dirs);
        self
    }

    /// Create the missing owned directories that lie inside a writable root. One that
    /// cannot be made stays missing, and is watched like the rest.
    fn create_owned(&self) {
        for dir in &self.owned {
            if std::fs::symlink_metadata(dir).is_err()
                && !missing_in(std::slice::from_ref(dir), &self.policy.writable).is_empty()
            {
                let _ = std::fs::create_dir(dir);
            }
        }
    }

    /// Start watching the protected locations that do not exist now (and that a sandboxed
    /// process could create): call it before starting a command, and hand the watch to
    /// [`settle`](Self::settle) when every process of that command has ended. It also
    /// quarantines what appeared since the last command ended, reported by `settle`. Empty
    /// with the `off` mode.
    pub fn watch_protected(&self) -> ProtectedWatch {
        if self.policy.is_off() {
            return ProtectedWatch::default();
        }
        let left = std::mem::take(&mut *self.left());
        let earlier = neutralise(&left, true);
        self.create_owned();
        ProtectedWatch {
            missing: missing_in(&self.protected, &self.policy.writable),
            earlier,
        }
    }

    /// Move each protected location that `watch` found missing and that exists now into
    /// quarantine (`.cadre/quarantine/<stamp>/` beside it), and say what was moved. Nothing
    /// is deleted; a location that cannot be moved is reported as such.
    pub fn settle(&self, watch: ProtectedWatch) -> Vec<Quarantined> {
        let mut out = watch.earlier;
        out.extend(neutralise(&watch.missing, false));
        if !self.launcher.commands_end_their_processes() {
            // With a PID namespace (bubblewrap, or the launcher where it has one) no process
            // outlives its command; otherwise one may still create what is missing after
            // this check.
            let still = missing_in(&self.protected, &self.policy.writable);
            let mut left = self.left();
            left.extend(still);
            left.sort();
            left.dedup();
        }
        out
    }

    fn left(&self) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
        self.left_missing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        self.create_owned();
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
