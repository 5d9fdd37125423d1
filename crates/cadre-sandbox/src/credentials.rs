//! Where credentials live: the names file tools refuse wherever they appear in a path, the
//! locations under `$HOME` that sandboxed processes cannot read, and the service sockets
//! they cannot connect to (a socket is a credential too: the Docker daemon's is root).

use std::path::{Path, PathBuf};

/// Directory names that hold credentials.
pub const CREDENTIAL_DIRS: &[&str] = &[".ssh", ".aws", ".gnupg", ".kube"];
/// File names that hold credentials.
pub const CREDENTIAL_FILES: &[&str] = &[".netrc"];
/// Further credential locations under `$HOME` that sandboxed processes cannot read (too
/// generic as names to refuse anywhere, but never anything else in a home directory).
const HOME_ONLY: &[&str] = &[
    ".docker",
    ".azure",
    ".password-store",
    ".git-credentials",
    ".config/gcloud",
    ".config/gh",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".npmrc",
    ".pypirc",
    // cadre's own keys (the seals on session grants): whoever reads them can forge one.
    ".local/state/cadre",
];

/// The credential locations in `home` (canonicalised, so they match the paths a walk from
/// `/` meets), whether or not they exist.
pub fn home_credentials(home: &Path) -> Vec<PathBuf> {
    let home = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
    CREDENTIAL_DIRS
        .iter()
        .chain(CREDENTIAL_FILES)
        .chain(HOME_ONLY)
        .map(|c| home.join(c))
        .collect()
}

/// UNIX sockets of services that act with more rights than the caller, or on its behalf.
/// Landlock before ABI 9 does not check `connect` on a socket file, and a read-only mount
/// does not stop it either, so these are covered with mounts.
const SERVICE_SOCKETS: &[&str] = &[
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/run/dbus/system_bus_socket",
    "/var/run/dbus/system_bus_socket",
    "/run/snapd.socket",
    "/run/systemd/private",
];

/// The sockets (and directories of sockets) to cover, as they exist now: the service
/// sockets, the user's runtime directory (session bus, agents, per-user daemons) and the SSH
/// agent's socket. Canonical and without duplicates.
pub(crate) fn service_sockets() -> Vec<PathBuf> {
    let uid = nix::unistd::getuid();
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/run/user/{uid}")));
    let ssh_agent = std::env::var_os("SSH_AUTH_SOCK")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let mut out: Vec<PathBuf> = SERVICE_SOCKETS
        .iter()
        .map(PathBuf::from)
        .chain([runtime_dir])
        .chain(ssh_agent)
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The credential locations of the current `$HOME` (none without one), and cadre's state
/// directory where `$XDG_STATE_HOME` moves it.
pub(crate) fn current_home_credentials() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| home_credentials(Path::new(&h)))
        .unwrap_or_default();
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").map(PathBuf::from)
        && state.is_absolute()
    {
        let dir = state.join("cadre");
        out.push(dir.canonicalize().unwrap_or(dir));
    }
    out
}
