//! Where credentials live: the names file tools refuse wherever they appear in a path, and
//! the locations under `$HOME` that sandboxed processes cannot read.

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

/// The credential locations of the current `$HOME` (none without one).
pub(crate) fn current_home_credentials() -> Vec<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| home_credentials(Path::new(&h)))
        .unwrap_or_default()
}
