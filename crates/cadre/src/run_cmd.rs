//! `cadre run`: run the main agent headless (or one sub-agent directly with `--agent`).

use crate::cli::{ApprovalAnswer, Cli, OutputFormat, RunArgs};
use crate::setup::{Overrides, Setup};
use anyhow::Result;
use cadre_engine::NonInteractiveApprovals;
use cadre_subagents::TaskStatus;
use cadre_tools::RunContext;
use cadre_types::{EndState, EventSink, new_session_id};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Exit code of a failed run.
pub const EXIT_FAILED: u8 = 1;
/// Exit code of a run that hit a limit.
pub const EXIT_LIMIT: u8 = 3;
/// Exit code of a cancelled run.
pub const EXIT_CANCELLED: u8 = 130;

fn approvals(answer: ApprovalAnswer) -> NonInteractiveApprovals {
    let approve = answer == ApprovalAnswer::Auto;
    NonInteractiveApprovals::new(approve).with_notice(|req, approved| {
        if !approved {
            let who = if req.agent == "main" {
                String::new()
            } else {
                format!("[{}] ", req.agent)
            };
            eprintln!(
                "cadre: {who}{} ({}) needs approval and was denied; rerun with --approval auto or --permission-mode auto-approve to allow it",
                req.tool,
                req.subject.as_deref().unwrap_or("")
            );
        }
    })
}

fn exit_for(state: &EndState) -> ExitCode {
    match state {
        EndState::Completed => ExitCode::SUCCESS,
        EndState::Failed { error } => {
            eprintln!("cadre: run failed: {error}");
            ExitCode::from(EXIT_FAILED)
        }
        EndState::Cancelled => {
            eprintln!("cadre: run cancelled");
            ExitCode::from(EXIT_CANCELLED)
        }
        EndState::LimitReached { limit } => {
            eprintln!("cadre: run stopped: {limit} reached (output above is partial)");
            ExitCode::from(EXIT_LIMIT)
        }
    }
}

/// Cancel `cancel` on the first Ctrl-C; exit at once on the second.
fn on_ctrl_c(cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\ncadre: cancelling (Ctrl-C again to quit at once)…");
            cancel.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(EXIT_CANCELLED as i32);
            }
        }
    })
}

/// Run `cadre run`.
pub async fn run(cli: &Cli, args: &RunArgs) -> Result<ExitCode> {
    let setup = Setup::new(
        cli,
        &Overrides {
            max_turns: args.max_turns,
            permission_mode: args.permission_mode.clone(),
        },
    )
    .await?;
    let h = &setup.harness;
    if args.detach {
        h.runtime().detach_background();
    }
    let spec = h.agent().config().model.spec.clone();
    let mut session = match &args.resume {
        Some(id) => h.open_session(id)?,
        None => h.new_session()?,
    };
    let session_id = session.id().to_string();

    let events: Arc<dyn EventSink> = match args.output {
        OutputFormat::Text => Arc::new(crate::output::TextSink::default()),
        OutputFormat::Jsonl => Arc::new(crate::output::JsonlSink::default()),
    };
    let run = Arc::new(RunContext {
        session_id: session.id().to_string(),
        agent: "main".into(),
        model: spec,
        task_id: None,
        user_id: std::env::var("USER").ok(),
        parent_session_id: None,
        depth: 0,
        tool_grant: cadre_tools::ToolGrant::unrestricted(),
        budget: cadre_tools::Budget::unlimited(),
        trace_id: new_session_id().replacen("s-", "", 1),
        events,
        approvals: Arc::new(approvals(args.approval)),
    });
    let cancel = CancellationToken::new();
    let ctrl_c = on_ctrl_c(cancel.clone());
    let state = match &args.agent {
        Some(name) => {
            direct(
                &setup,
                name,
                &args.prompt,
                run.clone(),
                cancel.clone(),
                args.output,
            )
            .await?
        }
        None => {
            let workspace = Arc::new(h.open_workspace()?);
            let outcome = h
                .agent()
                .run(
                    &mut session,
                    Some(args.prompt.clone()),
                    run,
                    workspace,
                    cancel.clone(),
                )
                .await;
            outcome.state
        }
    };
    ctrl_c.abort();
    let running = h.runtime().tracker().open_background(&session_id);
    if running > 0 {
        eprintln!(
            "cadre: {running} background task(s) still running were cancelled at exit; see cadre tasks list --session {session_id}"
        );
    }
    let left = h.runtime().shutdown_and_drain(Duration::from_secs(5)).await;
    if left > 0 {
        eprintln!("cadre: {left} task(s) did not stop in time; the next start marks them failed");
    }
    if args.output == OutputFormat::Text && args.agent.is_none() {
        eprintln!(
            "session: {} (resume with --resume {})",
            session.id(),
            session.id()
        );
    }
    Ok(exit_for(&state))
}

/// `cadre run --agent NAME`: the named sub-agent runs in the foreground, bypassing the main
/// model, with live progress and the approval channel.
async fn direct(
    setup: &Setup,
    name: &str,
    prompt: &str,
    run: Arc<RunContext>,
    cancel: CancellationToken,
    output: OutputFormat,
) -> Result<EndState> {
    let parent = setup.harness.main_parent(run, cancel);
    let snap = setup
        .harness
        .runtime()
        .run_direct(name, prompt.to_string(), &parent)
        .await?;
    let result = snap.result.clone().unwrap_or_default();
    if output == OutputFormat::Text {
        println!("{result}");
        eprintln!(
            "— [{name}] {} · {} tokens ({} in / {} out) · session {}",
            snap.status,
            snap.usage.total(),
            snap.usage.input_tokens,
            snap.usage.output_tokens,
            snap.child_session_id
        );
    }
    Ok(snap.end_state.clone().unwrap_or(match snap.status {
        TaskStatus::Cancelled => EndState::Cancelled,
        _ => EndState::Failed {
            error: snap.error.unwrap_or_else(|| "the sub-agent failed".into()),
        },
    }))
}
