//! What the two interactive surfaces (full-screen UI and line REPL) share in the binary:
//! which session to open (`--continue`, `--resume ID`, or a new one) and the resume hint
//! printed on exit.

use crate::cli::Cli;
use anyhow::{Context, Result};
use cadre_engine::Session;
use cadre_subagents::Harness;

/// The session to work in: the one `--resume` names, the latest with `--continue`, else new.
pub fn open_session(cli: &Cli, h: &Harness) -> Result<Session> {
    let id = match (&cli.resume, cli.continue_latest) {
        (Some(id), _) => Some(id.clone()),
        (None, true) => {
            let latest = h
                .sessions_dir()
                .and_then(|d| Session::list_saved(d).into_iter().next());
            match latest {
                Some((id, _)) => Some(id),
                None => anyhow::bail!("--continue: no saved session in this workspace"),
            }
        }
        (None, false) => None,
    };
    match id {
        Some(id) => h
            .open_session(&id)
            .with_context(|| format!("cannot resume session {id}")),
        None => Ok(h.new_session()?),
    }
}

/// How to start this workspace's sessions again, as a command that works as typed: this
/// program the way it can be run (`cadre` only when that is what `PATH` finds) and the
/// workspace when one was given.
pub fn resume_command(cli: &Cli) -> String {
    let mut cmd = program();
    if let Some(ws) = &cli.workspace {
        cmd.push_str(&format!(
            " --workspace {}",
            shell_word(&ws.to_string_lossy())
        ));
    }
    cmd
}

/// The line printed when an interactive session ends; `cmd` is [`resume_command`].
pub fn resume_hint(cmd: &str, session_id: &str) -> String {
    format!(
        "session {session_id} saved — resume with: {cmd} --resume {session_id} (or {cmd} --continue)"
    )
}

/// How to run this program again: `cadre` when `PATH` leads to this executable, else its path.
fn program() -> String {
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return "cadre".into();
    };
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .filter_map(|d| std::fs::canonicalize(d.join("cadre")).ok())
            .next()
            .is_some_and(|found| found == me)
    });
    if on_path {
        return "cadre".into();
    }
    // Shorter when under the current directory (`target/debug/cadre` after `cargo run`).
    let shown = std::env::current_dir()
        .ok()
        .and_then(|cwd| me.strip_prefix(cwd).ok().map(std::path::Path::to_path_buf))
        .unwrap_or_else(|| me.clone());
    shell_word(&shown.to_string_lossy())
}

/// `s` quoted for a POSIX shell when it holds anything but plain path characters.
fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_is_a_command_that_runs_as_typed() {
        assert_eq!(shell_word("/tmp/demo"), "/tmp/demo");
        assert_eq!(shell_word("my dir/it's"), r"'my dir/it'\''s'");
        let cli = <Cli as clap::Parser>::parse_from(["cadre", "--workspace", "/tmp/my demo"]);
        let hint = resume_hint(&resume_command(&cli), "s-1");
        // Test binaries are not on PATH as `cadre`: the hint names the executable itself.
        assert!(!hint.contains(" cadre --resume"), "{hint}");
        assert!(
            hint.contains(" --workspace '/tmp/my demo' --resume s-1 (or "),
            "{hint}"
        );
    }
}
