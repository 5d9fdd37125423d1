//! The environment cadre started with, kept in memory: the `cadre` binary takes a snapshot
//! before any thread exists and then removes every credential-like variable from its own
//! environment, so the processes it starts (and anything reading `/proc/<cadre>/environ`)
//! do not find them. Code that needs a variable reads it here; without a snapshot (a
//! library user that never called [`capture`]) the live environment is read instead.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::sync::OnceLock;

/// What [`capture`] saw.
#[derive(Debug)]
struct Snapshot {
    vars: BTreeMap<OsString, OsString>,
    /// The variables taken out of the live environment (by name, sorted).
    scrubbed: Vec<String>,
}

static SNAPSHOT: OnceLock<Snapshot> = OnceLock::new();

/// Parts of a name that mark a variable as a credential (compared in upper case).
const SECRET_MARKS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];

/// Names with such a part that hold no credential (a socket, a file name) and stay.
const NOT_SECRETS: &[&str] = &["SSH_AUTH_SOCK", "GPG_AGENT_INFO", "XAUTHORITY"];

/// True when `name` looks like it holds a credential: it contains `KEY`, `TOKEN`, `SECRET`,
/// `PASSWORD`, `PASSWD` or `CREDENTIAL` (in any case).
///
/// ```
/// use cadre_types::process_env::looks_secret;
/// assert!(looks_secret("OPENAI_API_KEY"));
/// assert!(looks_secret("github_token"));
/// assert!(!looks_secret("PATH"));
/// assert!(!looks_secret("SSH_AUTH_SOCK"));
/// ```
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    !NOT_SECRETS.contains(&upper.as_str()) && SECRET_MARKS.iter().any(|m| upper.contains(m))
}

/// Take the snapshot of the environment and return the names (sorted) the caller is to
/// remove from the live environment: those that [`looks_secret`] or `also` names. Only
/// the first call takes a snapshot; a later one returns nothing.
///
/// The caller removes them while the process is still single-threaded (removing a
/// variable races with every other thread's reads of the environment).
pub fn capture(also: &[String]) -> Vec<String> {
    let vars: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    let scrubbed: Vec<String> = vars
        .keys()
        .filter_map(|k| k.to_str())
        .filter(|k| looks_secret(k) || also.iter().any(|a| a == k))
        .map(str::to_string)
        .collect();
    match SNAPSHOT.set(Snapshot {
        vars,
        scrubbed: scrubbed.clone(),
    }) {
        Ok(()) => scrubbed,
        Err(_) => Vec::new(),
    }
}

/// True once [`capture`] ran in this process.
pub fn captured() -> bool {
    SNAPSHOT.get().is_some()
}

/// The value of `name` when cadre started (the live environment without a snapshot).
pub fn var_os(name: impl AsRef<OsStr>) -> Option<OsString> {
    let name = name.as_ref();
    match SNAPSHOT.get() {
        Some(s) => s.vars.get(name).cloned(),
        None => std::env::var_os(name),
    }
}

/// [`var_os`] as UTF-8 text (`None` when unset or not UTF-8, like [`std::env::var`]).
pub fn var(name: impl AsRef<OsStr>) -> Option<String> {
    var_os(name).and_then(|v| v.into_string().ok())
}

/// The variables taken out of the live environment at start, with their values: a child
/// that should see one (it is none of cadre's own secrets) is given it explicitly.
pub fn scrubbed() -> impl Iterator<Item = (&'static str, &'static OsStr)> {
    SNAPSHOT.get().into_iter().flat_map(|s| {
        s.scrubbed.iter().filter_map(|name| {
            s.vars
                .get(OsStr::new(name))
                .map(|v| (name.as_str(), v.as_os_str()))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_are_recognised_in_any_case() {
        for name in [
            "OPENAI_API_KEY",
            "CADRE_SERVE_TOKEN",
            "aws_secret_access_key",
            "PGPASSWORD",
            "Db_Passwd",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "REMOTE_TOKEN",
        ] {
            assert!(looks_secret(name), "{name}");
        }
        for name in ["PATH", "HOME", "SSH_AUTH_SOCK", "xauthority", "TERM", ""] {
            assert!(!looks_secret(name), "{name}");
        }
    }

    #[test]
    fn without_a_snapshot_the_live_environment_is_read() {
        // Test processes never capture: library users read the live environment.
        assert!(!captured());
        assert_eq!(var("PATH"), std::env::var("PATH").ok());
        assert_eq!(scrubbed().count(), 0);
    }
}
