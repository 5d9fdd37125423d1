//! The OS sandbox of the processes cadre starts for agents (`bash`, sandboxed MCP servers).
//!
//! A [`SandboxPolicy`] says what an agent's processes may write and whether they reach the
//! network; a [`Launcher`] (one per process) knows which mechanisms this machine offers; a
//! [`Sandbox`] (one per agent) turns a program into a [`std::process::Command`] that runs it
//! confined. Two backends:
//!
//! - `landlock`: the command starts cadre's own binary in launcher mode
//!   ([`run_launcher_if_requested`], called first thing in `main`), which enters new user,
//!   mount, network and PID namespaces, applies a Landlock ruleset and then executes the
//!   program under a small init of the PID namespace (nothing outlives the program).
//!   No `unsafe` and no `pre_exec` hook: the restrictions are applied by a fresh process
//!   before `exec`.
//! - `bwrap`: bubblewrap builds the same view of the file system with bind mounts.
//!
//! [`tether`] ties those processes' groups to cadre's life (a watchdog kills them when cadre
//! dies).

mod bwrap;
mod credentials;
mod error;
mod exec;
mod launcher;
mod pidns;
mod plan;
mod policy;
mod sandbox;
mod support;
pub mod tether;
mod watch;

pub use credentials::{CREDENTIAL_DIRS, CREDENTIAL_FILES, home_credentials};
pub use error::SandboxError;
pub use exec::run_launcher_if_requested;
pub use launcher::Launcher;
pub use policy::{SandboxMode, SandboxPolicy, SandboxSpec};
pub use sandbox::Sandbox;
pub use support::{Backend, Mechanism, Support};
pub use watch::{ProtectedWatch, QUARANTINE_DIR, Quarantined};
