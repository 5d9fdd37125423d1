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

/// The line printed when an interactive session ends.
pub fn resume_hint(session_id: &str) -> String {
    format!(
        "session {session_id} saved — resume with: cadre --resume {session_id} (or cadre --continue)"
    )
}
