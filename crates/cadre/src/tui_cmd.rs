//! `cadre` on a terminal: the full-screen UI (`cadre-tui`) over the configured harness.
//! SIGTERM, SIGHUP (and a SIGINT from outside: in raw mode Ctrl-C is a key) leave it as
//! `/exit` does, then the cancelled tasks record their ends and cadre exits 128 + signal.

use crate::cli::Cli;
use crate::config;
use crate::interactive::{open_session, resume_command, resume_hint};
use crate::setup::{Overrides, Setup};
use crate::signals::{OnSignal, SignalStop, StopSignals};
use anyhow::{Context, Result};
use cadre_engine::ApprovalMode;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long the tasks still running at exit get to record their cancelled ends.
const DRAIN: Duration = Duration::from_secs(5);

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
    let mut setup = Setup::for_screen(cli, &Overrides::default()).await?;
    let warnings = std::mem::take(&mut setup.warnings);
    let session = open_session(cli, &setup.harness)?;
    let ws = setup.harness.workspace().to_path_buf();
    let approval_mode = mode_name(setup.harness.agent().config().permissions.mode).to_string();
    let (harness, maintenance) = setup.into_parts();
    let runtime = harness.runtime().clone();
    let stop = CancellationToken::new();
    let signals = SignalStop::spawn(
        StopSignals::install().context("cannot listen for signals")?,
        stop.clone(),
        runtime.clone(),
        OnSignal {
            announce: false,
            before_exit: cadre_tui::restore_terminal,
        },
    );
    let rules_ws = ws.clone();
    let (list_ws, config_file) = (ws.clone(), cli.config.clone());
    let agents_listing: cadre_tui::AgentsListing = Box::new(move |model| {
        crate::agents_cmd::listing(&list_ws, config_file.as_deref(), model)
            .map_err(|e| format!("{e:#}"))
    });
    let exit = cadre_tui::run(cadre_tui::TuiOptions {
        harness,
        session,
        history_file: ws.join(".cadre").join("history"),
        approval_mode,
        save_allow_rule: Box::new(move |rule| {
            config::add_allow_rule(&rules_ws, rule).map_err(Into::into)
        }),
        stop,
        warnings,
        agents_listing: Some(agents_listing),
    })
    .await?;
    if let Some(s) = signals.received() {
        eprintln!(
            "cadre: received {}, stopped the running turn and tasks",
            s.name()
        );
    }
    let reason = if signals.received().is_some() {
        "other"
    } else {
        "prompt_input_exit"
    };
    crate::hooks_cmd::session_end(&runtime, &exit.session_id, reason).await;
    let left = runtime.shutdown_and_drain(DRAIN).await;
    if left > 0 {
        eprintln!("cadre: {left} task(s) did not stop in time; the next start marks them failed");
    }
    signals.disarm();
    drop(maintenance);
    if exit.saved {
        eprintln!("{}", resume_hint(&resume_command(cli), &exit.session_id));
    }
    Ok(signals
        .received()
        .map_or(ExitCode::SUCCESS, |s| ExitCode::from(s.exit_code())))
}
