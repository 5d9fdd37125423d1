//! Tests that need a tool the Rust toolchain does not bring (bubblewrap, PostgreSQL, tmux,
//! node, a Python venv): on a machine without it they say SKIPPED and pass, so
//! `cargo test --workspace` passes with only Rust installed; under `CI=true`, where `.ci/run`
//! has installed everything, a missing tool fails the test instead of hiding it.

/// Whether this run is CI's (`CI=true`), where no optional tool may be missing.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Reports that the calling test cannot run because `missing` (e.g. "bwrap not installed")
/// is not here: panics under CI, else prints a SKIPPED line; the caller then returns.
pub fn skip_because(missing: &str) {
    assert!(
        !in_ci(),
        "{missing}: .ci/run installs it, and CI=true needs it"
    );
    eprintln!("\n!!!!!!!! SKIPPED ({missing})\n");
}

/// Whether `program` is an executable file in a directory of `PATH`.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            std::fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_path_only() {
        assert!(on_path("sh"));
        assert!(!on_path("no-such-program-cadre"));
    }
}
