//! `cadre run`: run the main agent headless (or one sub-agent directly with `--agent`).

use crate::cli::{ApprovalAnswer, Cli, OutputFormat, RunArgs};
use crate::setup::{Overrides, Setup, workspace_root};
use crate::signals::{OnSignal, SignalStop, StopSignals};
use anyhow::{Context, Result, bail};
use cadre_engine::{Agent, NonInteractiveApprovals, Session};
use cadre_subagents::{Harness, TaskStatus};
use cadre_tools::RunContext;
use cadre_tui::custom_commands::{self, CommandSet, CustomCommand};
use cadre_types::{EndState, Event, EventEnvelope, EventSink, Message, new_session_id};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Exit code of a failed run.
pub const EXIT_FAILED: u8 = 1;
/// Exit code of a run that could not start (bad arguments or setup, no API key).
pub const EXIT_USAGE: u8 = 2;
/// Exit code of a run that hit a limit.
pub const EXIT_LIMIT: u8 = 3;
/// Exit code of a cancelled run.
pub const EXIT_CANCELLED: u8 = 130;

/// The policy that refuses approval requests of a headless run, as the user would change it.
const HEADLESS_POLICY: &str = "headless run without --approval auto";

fn approvals(answer: ApprovalAnswer) -> NonInteractiveApprovals {
    let approve = answer == ApprovalAnswer::Auto;
    NonInteractiveApprovals::new(approve)
        .policy(HEADLESS_POLICY)
        .with_notice(|req, approved| {
        if !approved {
            let who = if req.agent == "main" {
                String::new()
            } else {
                format!("[{}] ", req.agent)
            };
            eprintln!(
                "cadre: {who}{} ({}) needs approval and was refused ({HEADLESS_POLICY}); rerun with --approval auto or --permission-mode auto-approve to allow it",
                req.tool,
                req.subject.as_deref().unwrap_or("")
            );
        }
    })
}

/// The exit code of a run that ended in `state`.
fn exit_code_of(state: &EndState) -> u8 {
    match state {
        EndState::Completed => 0,
        EndState::Failed { .. } => EXIT_FAILED,
        EndState::Cancelled => EXIT_CANCELLED,
        EndState::LimitReached { .. } => EXIT_LIMIT,
    }
}

fn exit_for(state: &EndState) -> ExitCode {
    match state {
        EndState::Completed => {}
        EndState::Failed { error } => eprintln!("cadre: run failed: {error}"),
        EndState::Cancelled => eprintln!("cadre: run cancelled"),
        EndState::LimitReached { limit } => {
            eprintln!("cadre: run stopped: {limit} reached (output above is partial)")
        }
    }
    ExitCode::from(exit_code_of(state))
}

/// The model a resumed session recorded, read before anything is set up.
fn recorded_model(cli: &Cli, id: &str) -> Result<String> {
    let dir = Harness::sessions_dir_of(&workspace_root(cli)?);
    Ok(Session::read_meta(&dir, id)?.model)
}

/// Run `cadre run`.
#[expect(
    clippy::too_many_lines,
    reason = "not split yet (issue 46): `cadre run`'s set-up, its run, and its summary and exit code"
)]
pub async fn run(cli: &Cli, args: &RunArgs) -> Result<ExitCode> {
    if args.prompt.trim().is_empty() {
        bail!("the prompt is empty: say what the agent should do, as in cadre run \"PROMPT\"");
    }
    // A resumed session goes on with its own model unless `--model` names another.
    let model = match (&args.resume, &cli.model) {
        (Some(id), None) => Some(recorded_model(cli, id)?),
        _ => None,
    };
    let mut setup = Setup::new(
        cli,
        &Overrides {
            max_turns: args.max_turns,
            permission_mode: args.permission_mode.clone(),
            model,
            sandbox: args.sandbox,
            // An `--agent` with a model of its own may not need the main model's key: that
            // is known once its definition is loaded, below.
            needs_key: args.agent.is_none(),
            ..Overrides::default()
        },
    )
    .await?;
    let custom = custom_command(&mut setup, &args.prompt)?;
    let h = &setup.harness;
    // Without a key nothing can succeed: say so once rather than retry a refusing host.
    // (`--agent` with a model of its own: that model is not checked here.)
    let inherits = args.agent.as_deref().is_none_or(|name| {
        h.runtime()
            .registry()
            .get(name)
            .is_none_or(|d| d.model.is_none())
    });
    if inherits && let Some(line) = cadre_tui::first_run::one_line(&h.agent().config().model) {
        eprintln!("cadre: {line}");
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    if args.detach {
        h.runtime().detach_background();
    }
    let events: Arc<dyn EventSink> = match args.output {
        OutputFormat::Text => Arc::new(crate::output::TextSink::default()),
        OutputFormat::Jsonl => Arc::new(crate::output::JsonlSink::default()),
    };
    let run_for = |session_id: String, events: Arc<dyn EventSink>| {
        Arc::new(RunContext {
            session_id,
            agent: "main".into(),
            model: h.agent().config().model.spec.clone(),
            task_id: None,
            user_id: std::env::var("USER").ok(),
            parent_session_id: None,
            depth: 0,
            tool_grant: cadre_tools::ToolGrant::unrestricted(),
            budget: cadre_tools::Budget::unlimited(),
            trace_id: new_session_id().replacen("s-", "", 1),
            events: events.clone(),
            approvals: Arc::new(approvals(args.approval)),
        })
    };
    let cancel = CancellationToken::new();
    let signals = SignalStop::spawn(
        StopSignals::install().context("cannot listen for signals")?,
        cancel.clone(),
        h.runtime().clone(),
        OnSignal {
            announce: true,
            before_exit: || {},
        },
    );
    let (prompt, agent) = match &custom {
        Some((cmd, cmd_args)) => command_turn(h, cmd, cmd_args, &cancel).await?,
        None => (args.prompt.clone(), h.agent().clone()),
    };
    // The session to name at the end, if it holds something to resume.
    let mut resumable = None;
    let (state, session_id) = match &args.agent {
        Some(name) => {
            // The sub-agent has its own session; the main one exists only as a parent id.
            let session_id = new_session_id();
            let calls = Arc::new(CallCounter::new(name, events.clone()));
            let run = run_for(session_id.clone(), calls.clone());
            let state = direct(
                &setup,
                name,
                &prompt,
                run,
                cancel.clone(),
                &calls,
                args.output,
            )
            .await?;
            (state, session_id)
        }
        None => {
            let mut session = match &args.resume {
                Some(id) => h.open_session(id)?,
                None => h.new_session()?,
            };
            let workspace = Arc::new(h.open_workspace()?);
            let run = run_for(session.id().to_string(), events.clone());
            if args.resume.is_some() {
                // Its tasks a killed run left: taken up when this run starts, as its own
                // children, so it waits for them, gets their results, and counts their
                // usage in its totals and against its limits.
                h.runtime().reattach_when_run_starts(session.id());
            }
            if let Some(instructions) = &args.compact_now {
                compact_now(h, &mut session, instructions.as_deref(), &run, &cancel).await;
            }
            let outcome = agent
                .run(
                    &mut session,
                    Some(prompt.clone()),
                    run,
                    workspace,
                    cancel.clone(),
                )
                .await;
            if args.resume.is_some() || has_reply(&session) {
                resumable = Some(session.id().to_string());
            } else if let Some(path) = session.path() {
                // A new session the model never answered holds nothing worth resuming.
                let _ = std::fs::remove_file(path);
            }
            (outcome.state, session.id().to_string())
        }
    };
    crate::hooks_cmd::session_end(h.runtime(), &session_id, "other").await;
    let running = h.runtime().open_background(&session_id);
    if running > 0 {
        eprintln!(
            "cadre: {running} background task(s) still running were cancelled at exit; see cadre tasks list --session {session_id}"
        );
    }
    let left = h.runtime().shutdown_and_drain(Duration::from_secs(5)).await;
    if left > 0 {
        eprintln!("cadre: {left} task(s) did not stop in time; the next start marks them failed");
    }
    // Only now: a second signal while the tasks drain still exits at once.
    signals.disarm();
    if args.output == OutputFormat::Text
        && let Some(id) = resumable
    {
        eprintln!("session: {id} (resume with --resume {id})");
    }
    Ok(signals.exit_code(exit_for(&state)))
}

/// The custom command `prompt` invokes (`/review src`), if it names one; its `model`, if it
/// has one, becomes the run's. Broken command files are warnings.
fn custom_command(setup: &mut Setup, prompt: &str) -> Result<Option<(CustomCommand, String)>> {
    let commands = CommandSet::load(setup.harness.workspace());
    for w in &commands.warnings {
        eprintln!("cadre: warning: {w}");
    }
    let Some((cmd, cmd_args)) = custom_commands::invoked(&commands, prompt) else {
        return Ok(None);
    };
    if let Some(model) = &cmd.model {
        let chosen = setup.harness.set_model(model)?;
        eprintln!("cadre: /{} runs on {chosen}", cmd.name);
    }
    Ok(Some((cmd.clone(), cmd_args)))
}

/// The prompt a custom command runs and the main agent narrowed to its `allowed-tools`.
async fn command_turn(
    h: &Harness,
    cmd: &CustomCommand,
    cmd_args: &str,
    cancel: &CancellationToken,
) -> Result<(String, Agent)> {
    let prompt = custom_commands::prompt_for(h, cmd, cmd_args, cancel.clone()).await?;
    let agent = match &cmd.allowed_tools {
        Some(allowed) => {
            let mut warnings = Vec::new();
            let agent = custom_commands::narrowed(h.agent(), allowed, &mut warnings)?;
            for w in warnings {
                eprintln!("cadre: warning: /{}: {w}", cmd.name);
            }
            agent
        }
        None => h.agent().clone(),
    };
    Ok((prompt, agent))
}

/// `--compact-now`: compact the session before the prompt. What it did is the `compaction`
/// event; a failure is a notice, and the run goes on with the conversation as it was.
async fn compact_now(
    h: &Harness,
    session: &mut Session,
    instructions: Option<&str>,
    run: &Arc<RunContext>,
    cancel: &CancellationToken,
) {
    let result = h
        .agent()
        .compact(session, instructions, run.clone(), cancel.clone())
        .await;
    if let Err(e) = result {
        run.events.emit(EventEnvelope {
            session_id: run.session_id.clone(),
            agent: run.agent.clone(),
            task_id: None,
            event: Event::Notice {
                message: format!(
                    "--compact-now: {e}; the run goes on with the conversation as it was"
                ),
            },
        });
    }
}

/// True when the model answered at least once in `session`.
fn has_reply(session: &Session) -> bool {
    session
        .messages()
        .iter()
        .any(|m| matches!(m, Message::Assistant { .. }))
}

/// Counts the model calls of the sub-agent `cadre run --agent` runs (its own, not those of
/// its children), which are its turns: its end reaches this run as a sub-agent update, which
/// carries no turn count.
struct CallCounter {
    agent: String,
    inner: Arc<dyn EventSink>,
    calls: AtomicU32,
}

impl CallCounter {
    fn new(agent: &str, inner: Arc<dyn EventSink>) -> Self {
        CallCounter {
            agent: agent.to_string(),
            inner,
            calls: AtomicU32::new(0),
        }
    }
}

impl EventSink for CallCounter {
    fn emit(&self, env: EventEnvelope) {
        if let Event::Usage {
            subagent: Some(s), ..
        } = &env.event
            && *s == self.agent
            && env.agent == "main"
        {
            self.calls.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.emit(env);
    }
}

/// The end state `cadre run --agent` reports (and exits with) for the sub-agent's record.
fn direct_state(snap: &cadre_subagents::TaskRecord) -> EndState {
    let stored = snap
        .end_state
        .as_deref()
        .and_then(|e| cadre_types::parse_end_state(e, snap.error.as_deref()));
    stored.unwrap_or_else(|| match snap.status {
        TaskStatus::Cancelled => EndState::Cancelled,
        _ => EndState::Failed {
            error: snap
                .error
                .clone()
                .unwrap_or_else(|| "the sub-agent failed".into()),
        },
    })
}

/// The word a summary line names an end state with: the same end state the exit code says.
fn verdict(state: &EndState) -> String {
    state.to_string()
}

/// `cadre run --agent NAME`: the named sub-agent runs in the foreground, bypassing the main
/// model, with live progress and the approval channel. Its end is the run's `done` event
/// (JSONL) or summary line (text), naming the state the exit code reports.
async fn direct(
    setup: &Setup,
    name: &str,
    prompt: &str,
    run: Arc<RunContext>,
    cancel: CancellationToken,
    calls: &CallCounter,
    output: OutputFormat,
) -> Result<EndState> {
    let parent = setup.harness.main_parent(run.clone(), cancel);
    let snap = setup
        .harness
        .runtime()
        .run_direct(name, prompt.to_string(), &parent)
        .await?;
    let result = snap.result.clone().unwrap_or_default();
    let state = direct_state(&snap);
    if output == OutputFormat::Text {
        crate::stdout::out!("{result}")?;
        eprintln!(
            "— [{name}] {} · {} · session {}",
            verdict(&state),
            snap.usage.summary(),
            snap.child_session_id.as_deref().unwrap_or("-")
        );
        return Ok(state);
    }
    run.events.emit(EventEnvelope {
        session_id: snap
            .child_session_id
            .clone()
            .unwrap_or_else(|| run.session_id.clone()),
        agent: name.to_string(),
        task_id: Some(snap.id.clone()),
        event: Event::Done {
            state: state.clone(),
            output: result,
            turns: calls.calls.load(Ordering::Relaxed),
            usage: snap.usage,
        },
    });
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_types::LimitKind;

    /// Every exit code a run can end with, beside the word its summary line starts with:
    /// a script reading either must learn the same end.
    #[test]
    fn every_exit_code_has_the_summary_word_of_the_same_end_state() {
        let table = [
            (EndState::Completed, 0, "completed"),
            (
                EndState::Failed {
                    error: "boom".into(),
                },
                EXIT_FAILED,
                "failed",
            ),
            (
                EndState::LimitReached {
                    limit: LimitKind::Tokens,
                },
                EXIT_LIMIT,
                "limit reached",
            ),
            (
                EndState::LimitReached {
                    limit: LimitKind::MaxTurns,
                },
                EXIT_LIMIT,
                "limit reached",
            ),
            (EndState::Cancelled, EXIT_CANCELLED, "cancelled"),
        ];
        for (state, code, word) in table {
            assert_eq!(exit_code_of(&state), code, "{state}");
            assert!(
                verdict(&state).starts_with(word),
                "exit {code}: summary says {:?}",
                verdict(&state)
            );
        }
    }
}
