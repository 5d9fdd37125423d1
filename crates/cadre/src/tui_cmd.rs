//! `cadre` on a terminal: the full-screen UI (`cadre-tui`) over the configured harness.

use crate::cli::Cli;
use crate::config;
use crate::interactive::{open_session, resume_hint};
use crate::setup::{Overrides, Setup};
use anyhow::Result;
use cadre_engine::ApprovalMode;
use std::process::ExitCode;

fn mode_name(mode: ApprovalMode) -> &'static str {
    match mode {
        ApprovalMode::Ask => "ask",
        ApprovalMode::AutoApprove => "auto-approve",
        ApprovalMode::ReadOnly => "read-only",
        ApprovalMode::Bypass => "bypass",
    }
}

/// Run the full-screen UI.
pub async fn run(cli: &Cli) -> Result<ExitCode> {
    let setup = Setup::new(cli, &Overrides::default()).await?;
    let session = open_session(cli, &setup.harness)?;
    let ws = setup.harness.workspace().to_path_buf();
    let approval_mode = mode_name(setup.harness.agent().config().permissions.mode).to_string();
    let (harness, maintenance) = setup.into_parts();
    let rules_ws = ws.clone();
    let exit = cadre_tui::run(cadre_tui::TuiOptions {
        harness,
        session,
        history_file: ws.join(".cadre").join("history"),
        approval_mode,
        save_allow_rule: Box::new(move |rule| {
            config::add_allow_rule(&rules_ws, rule)
                .map(|p| p.display().to_string())
                .map_err(|e| format!("{e:#}"))
        }),
    })
    .await?;
    drop(maintenance);
    if exit.saved {
        eprintln!("{}", resume_hint(&exit.session_id));
    }
    Ok(ExitCode::SUCCESS)
}
