//! `cadre` without a terminal (or with `--no-tui`): a line REPL. Each line goes to the main
//! agent in one ongoing session; `@name job` runs that sub-agent directly (bypassing the main
//! model) with live progress; `/commands` are parsed by the same table as the full-screen UI
//! (an unknown one is an error, never a prompt); approval questions are asked on stderr and
//! answered on stdin. Ctrl-C cancels a running turn; at the prompt it explains itself, and a
//! second one within 2 s exits. SIGTERM and SIGHUP cancel the running turn and exit as
//! `cadre run` does (143, 129), once the cancelled tasks have recorded their ends.

use crate::cli::Cli;
use crate::interactive::{open_session, resume_command, resume_hint};
use crate::output::TextSink;
use crate::setup::{Overrides, Setup};
use crate::signals::{OnSignal, SignalStop, StopSignals};
use crate::stdout::out;
use anyhow::{Context, Result};
use async_trait::async_trait;
use cadre_engine::Session;
use cadre_subagents::{Harness, Parent, RunOptions};
use cadre_tools::{ApprovalHandler, RunContext};
use cadre_tui::commands::{Line, LineError, SlashCommand, help_text, parse_line};
use cadre_tui::custom_commands::{self, CommandSet};
use cadre_tui::first_run;
use cadre_types::{ApprovalDecision, ApprovalRequest, EventSink, new_session_id};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

type Input = Arc<Mutex<Lines<BufReader<Stdin>>>>;

/// How long a second Ctrl-C at the prompt counts as "exit".
const DOUBLE_CTRL_C: Duration = Duration::from_secs(2);
/// How long the tasks still running at exit get to record their cancelled ends.
const DRAIN: Duration = Duration::from_secs(5);

/// Asks the person at the terminal; answers come from the same stdin as the prompts.
struct LineApprovals {
    input: Input,
}

/// Parse an answer: `y`/`yes`, `s`/`session`, `n`/`no`/empty, or free text = deny with feedback.
pub fn parse_answer(line: &str) -> ApprovalDecision {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => ApprovalDecision::AllowOnce,
        "s" | "session" | "a" | "always" => ApprovalDecision::AllowSession,
        "" | "n" | "no" => ApprovalDecision::Deny { feedback: None },
        _ => ApprovalDecision::Deny {
            feedback: Some(line.trim().to_string()),
        },
    }
}

#[async_trait]
impl ApprovalHandler for LineApprovals {
    async fn decide(&self, req: ApprovalRequest) -> ApprovalDecision {
        // One question at a time: hold the input while asking.
        let mut input = self.input.lock().await;
        let who = if req.agent == "main" {
            String::new()
        } else {
            format!("[{}] ", req.agent)
        };
        eprint!(
            "\n{who}wants to run {}({}) — {} [risk: {:?}]\nallow? [y]es / [s]ession / [n]o / or type why not: ",
            req.tool,
            req.subject.as_deref().unwrap_or(""),
            req.reason,
            req.risk
        );
        let _ = std::io::stderr().flush();
        match input.next_line().await {
            Ok(Some(line)) => parse_answer(&line),
            _ => ApprovalDecision::Deny {
                feedback: Some("no answer (input closed)".into()),
            },
        }
    }
}

/// Ctrl-C (SIGINT) as a stream, so a signal between two waits is not lost.
struct Interrupts {
    #[cfg(unix)]
    sig: tokio::signal::unix::Signal,
}

impl Interrupts {
    fn new() -> Result<Self> {
        Ok(Self {
            #[cfg(unix)]
            sig: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        {
            if self.sig.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Drive `run` to its end; each Ctrl-C meanwhile prints `cadre: {message}` and cancels
    /// `cancel`, which `run` watches.
    async fn cancelling<F: std::future::Future>(
        &mut self,
        run: F,
        cancel: &CancellationToken,
        message: &str,
    ) -> F::Output {
        tokio::pin!(run);
        loop {
            tokio::select! {
                out = &mut run => return out,
                _ = self.next() => {
                    eprintln!("\ncadre: {message}");
                    cancel.cancel();
                }
            }
        }
    }
}

/// The REPL's state between lines.
struct Repl {
    setup: Setup,
    session: Session,
    input: Input,
    events: Arc<dyn EventSink>,
    approvals: Arc<dyn ApprovalHandler>,
    interrupts: Interrupts,
    /// Cancelled by SIGTERM or SIGHUP: every turn's token is its child, and the REPL exits.
    stop: CancellationToken,
    /// Tokens and cost of this session's runs (each run's total includes its sub-agents).
    spent: cadre_types::Usage,
    /// How to resume, for the hint when a session is left.
    resume: String,
    /// The custom slash commands of the workspace.
    commands: CommandSet,
    /// `--config`, for `/agents`.
    config_file: Option<std::path::PathBuf>,
}

/// Run the REPL.
#[expect(
    clippy::too_many_lines,
    reason = "not split yet (issue 46): the REPL's set-up and its read-eval loop"
)]
pub async fn run(cli: &Cli) -> Result<ExitCode> {
    let setup = Setup::new(cli, &Overrides::default()).await?;
    let session = open_session(cli, &setup.harness)?;
    let commands = CommandSet::load(setup.harness.workspace());
    for w in &commands.warnings {
        eprintln!("cadre: warning: {w}");
    }
    let input: Input = Arc::new(Mutex::new(BufReader::new(tokio::io::stdin()).lines()));
    let mut repl = Repl {
        setup,
        session,
        approvals: Arc::new(LineApprovals {
            input: input.clone(),
        }),
        input,
        events: Arc::new(TextSink::default()),
        interrupts: Interrupts::new()?,
        stop: CancellationToken::new(),
        spent: Default::default(),
        resume: resume_command(cli),
        commands,
        config_file: cli.config.clone(),
    };
    let signals = SignalStop::spawn(
        StopSignals::install_terminating().context("cannot listen for signals")?,
        repl.stop.clone(),
        repl.h().runtime().clone(),
        OnSignal {
            announce: true,
            before_exit: || {},
        },
    );
    // A resumed session's tasks a killed process left are taken up here.
    repl.reattach();
    let tty = std::io::stdin().is_terminal();
    if tty {
        eprintln!(
            "cadre {} — {} · session {}\n/help lists the commands · @agent job runs a sub-agent · Ctrl-C twice exits",
            env!("CARGO_PKG_VERSION"),
            repl.h().agent().config().model.spec,
            repl.session.id()
        );
    }
    if let Some(msg) = first_run::message(&repl.h().agent().config().model) {
        eprintln!("{msg}");
    }
    let mut last_interrupt: Option<Instant> = None;
    while !repl.stop.is_cancelled() {
        if tty {
            eprint!("\n› ");
            let _ = std::io::stderr().flush();
        }
        let next = {
            let mut lines = repl.input.lock().await;
            tokio::select! {
                l = lines.next_line() => Some(l),
                _ = repl.interrupts.next() => None,
                _ = repl.stop.cancelled() => break,
            }
        };
        let line = match next {
            Some(Ok(Some(l))) => l,
            Some(_) => break,
            None => {
                if last_interrupt.is_some_and(|t| t.elapsed() < DOUBLE_CTRL_C) {
                    break;
                }
                last_interrupt = Some(Instant::now());
                eprintln!(
                    "\n(Ctrl-C at the prompt does not cancel anything: press it again within 2 s to exit, or type /exit)"
                );
                continue;
            }
        };
        last_interrupt = None;
        let mut shown = Ok(());
        match parse_line(&line) {
            // A custom command only where no built-in one has the name.
            Err(LineError::UnknownCommand(_)) if repl.custom(&line).await => {}
            Err(e) => eprintln!("cadre: {e}"),
            Ok(Line::Empty) => {}
            Ok(Line::Command(SlashCommand::Exit)) => break,
            Ok(Line::Command(cmd)) => shown = repl.command(cmd).await,
            Ok(Line::Direct { .. } | Line::Prompt(_)) if repl.refused_without_key() => {}
            Ok(Line::Direct { agent, job }) => shown = repl.direct(&agent, job).await,
            Ok(Line::Prompt(p)) => repl.prompt(&p).await,
        }
        // Nobody reads stdout any more (`cadre --no-tui | head -1`): nothing more can be
        // shown, so the REPL ends as if the input had.
        if shown.is_err() {
            break;
        }
    }
    // A signal ends the session; otherwise the user left the prompt.
    let reason = if repl.stop.is_cancelled() {
        "other"
    } else {
        "prompt_input_exit"
    };
    crate::hooks_cmd::session_end(repl.h().runtime(), repl.session.id(), reason).await;
    // The session is written as it goes; what still runs records its cancelled end.
    let left = repl.h().runtime().shutdown_and_drain(DRAIN).await;
    if left > 0 {
        eprintln!("cadre: {left} task(s) did not stop in time; the next start marks them failed");
    }
    signals.disarm();
    repl.leave_session();
    Ok(signals.exit_code(ExitCode::SUCCESS))
}

impl Repl {
    /// Say how to come back to the current session, or remove it if nothing was sent in it.
    fn leave_session(&self) {
        if !self.session.discard_if_empty() {
            eprintln!("{}", resume_hint(&self.resume, self.session.id()));
        }
    }

    fn h(&self) -> &Harness {
        &self.setup.harness
    }

    /// With no key for the model nothing is sent: say so and return true.
    fn refused_without_key(&self) -> bool {
        match first_run::message(&self.h().agent().config().model) {
            Some(msg) => {
                eprintln!("cadre: {msg}");
                true
            }
            None => false,
        }
    }

    /// Runs `cmd`; an error is a write to stdout that failed.
    async fn command(&mut self, cmd: SlashCommand) -> std::io::Result<()> {
        match cmd {
            SlashCommand::Help => eprint!(
                "{}{}",
                help_text(),
                custom_commands::help_text(&self.commands)
            ),
            SlashCommand::Agents => {
                let model = self.h().agent().config().model.spec.clone();
                let ws = self.h().workspace().to_path_buf();
                match crate::agents_cmd::listing(&ws, self.config_file.as_deref(), &model) {
                    Ok(text) => out!("{text}")?,
                    Err(e) => eprintln!("cadre: cannot list the sub-agents: {e:#}"),
                }
            }
            SlashCommand::Tasks => {
                let tasks = self.h().runtime().tasks_of(self.session.id()).await;
                if tasks.is_empty() {
                    out!("no tasks in this session")?;
                }
                for t in tasks {
                    out!("{} [{}] {}: {}", t.id, t.status, t.agent_id, t.description)?;
                }
            }
            SlashCommand::Model(None) => out!("{}", self.h().agent().config().model.spec)?,
            SlashCommand::Model(Some(spec)) => match self.setup.harness.set_model(&spec) {
                Ok(spec) => match first_run::message(&self.h().agent().config().model) {
                    Some(msg) => eprintln!("cadre: {msg}"),
                    None => eprintln!("model: {spec} from the next prompt on"),
                },
                Err(e) => eprintln!("cadre: {e}"),
            },
            SlashCommand::Clear => match self.h().new_session() {
                Ok(s) => {
                    let old = self.session.id().to_string();
                    crate::hooks_cmd::session_end(self.h().runtime(), &old, "clear").await;
                    self.leave_session();
                    eprintln!("new session {}", s.id());
                    self.session = s;
                    self.spent = Default::default();
                }
                Err(e) => eprintln!("cadre: {e}"),
            },
            SlashCommand::Resume(None) => {
                let dir = self.h().sessions_dir().map(std::path::Path::to_path_buf);
                let saved = dir.as_deref().map(Session::list_saved).unwrap_or_default();
                if saved.is_empty() {
                    out!("no saved sessions")?;
                }
                for (id, _) in saved.iter().take(20) {
                    // Titled by the first prompt (a compacted session's too, not its summary).
                    let title = dir
                        .as_deref()
                        .and_then(|d| Session::first_prompt(d, id))
                        .map(|p| cadre_tui::text::short(&p, 60))
                        .unwrap_or_default();
                    out!("{id}  {title}")?;
                }
                eprintln!("/resume ID continues one of them");
            }
            SlashCommand::Resume(Some(id)) => match self.h().open_session(&id) {
                Ok(s) => {
                    // The session left behind is removed when nothing was sent in it, as on
                    // /clear and on exit (not when it is the one resumed).
                    self.session.leave_for(&s);
                    eprintln!("resumed {} ({} messages)", s.id(), s.messages().len());
                    self.session = s;
                    self.spent = Default::default();
                    self.reattach();
                }
                Err(e) => eprintln!("cadre: {e}"),
            },
            SlashCommand::Cost => {
                let children = self
                    .h()
                    .runtime()
                    .tasks_of(self.session.id())
                    .await
                    .iter()
                    .fold(cadre_types::Usage::default(), |mut u, t| {
                        u += t.usage;
                        u
                    });
                out!("this session: {}", self.spent.summary())?;
                out!("of which sub-agents: {}", children.summary())?;
            }
            SlashCommand::Compact(instructions) => self.compact(instructions.as_deref()).await,
            SlashCommand::Exit => {}
        }
        Ok(())
    }

    /// Have the next prompt's run take up the session's tasks whose process was lost
    /// ([`cadre_subagents::SubagentRuntime::reattach_when_run_starts`]), as `cadre run
    /// --resume` does: they are that run's children, in its totals and its budget.
    fn reattach(&self) {
        self.h()
            .runtime()
            .reattach_when_run_starts(self.session.id());
    }

    fn parent(&self, cancel: &CancellationToken) -> Parent {
        let h = self.h();
        h.main_parent(
            Arc::new(RunContext {
                session_id: self.session.id().to_string(),
                agent: "main".into(),
                model: h.agent().config().model.spec.clone(),
                task_id: None,
                user_id: std::env::var("USER").ok(),
                parent_session_id: None,
                depth: 0,
                tool_grant: cadre_tools::ToolGrant::unrestricted(),
                budget: cadre_tools::Budget::unlimited(),
                trace_id: new_session_id().replacen("s-", "", 1),
                events: self.events.clone(),
                approvals: self.approvals.clone(),
            }),
            cancel.clone(),
        )
    }

    /// Runs `agent` on `job`; an error is a write to stdout that failed.
    async fn direct(&mut self, agent: &str, job: String) -> std::io::Result<()> {
        let cancel = self.stop.child_token();
        let parent = self.parent(&cancel);
        let runtime = self.h().runtime().clone();
        let run = runtime.run_direct(agent, job, &parent);
        let out = self
            .interrupts
            .cancelling(run, &cancel, "cancelling…")
            .await;
        match out {
            Ok(snap) => {
                self.spent += snap.usage;
                out!("{}", snap.result.unwrap_or_default())?;
                eprintln!("— [{agent}] {}", snap.status);
            }
            Err(e) => eprintln!("cadre: {e}"),
        }
        Ok(())
    }

    /// The options of one run of the main agent, cancelled by `cancel`.
    fn run_options(&self, cancel: &CancellationToken) -> RunOptions {
        RunOptions {
            events: self.events.clone(),
            approvals: self.approvals.clone(),
            cancel: cancel.clone(),
            user_id: std::env::var("USER").ok(),
        }
    }

    /// `/compact [instructions]`: the result (tokens before → after) is the `compaction`
    /// event, printed by the sink; a failure is said, and the session is left as it was.
    async fn compact(&mut self, instructions: Option<&str>) {
        let cancel = self.stop.child_token();
        let opts = self.run_options(&cancel);
        let run = self
            .setup
            .harness
            .compact(&mut self.session, instructions, opts);
        let out = self
            .interrupts
            .cancelling(run, &cancel, "cancelling the compaction…")
            .await;
        if let Err(e) = out {
            eprintln!("cadre: /compact: {e}; the conversation is unchanged");
        }
    }

    /// Run `line` if it invokes a custom command; false when it names none.
    async fn custom(&mut self, line: &str) -> bool {
        let Some((cmd, args)) = custom_commands::invoked(&self.commands, line) else {
            return false;
        };
        let cmd = cmd.clone();
        if self.refused_without_key() {
            return true;
        }
        let previous = self.h().agent().config().model.spec.clone();
        if let Some(model) = &cmd.model
            && let Err(e) = self.setup.harness.set_model(model)
        {
            eprintln!("cadre: /{}: {e}", cmd.name);
            return true;
        }
        let cancel = self.stop.child_token();
        match custom_commands::prompt_for(self.h(), &cmd, &args, cancel).await {
            Ok(prompt) => {
                let agent = match &cmd.allowed_tools {
                    Some(allowed) => {
                        let mut warnings = Vec::new();
                        let narrowed =
                            custom_commands::narrowed(self.h().agent(), allowed, &mut warnings);
                        for w in warnings {
                            eprintln!("cadre: warning: /{}: {w}", cmd.name);
                        }
                        narrowed
                            .map_err(|e| eprintln!("cadre: /{}: {e}", cmd.name))
                            .ok()
                    }
                    None => Some(self.h().agent().clone()),
                };
                if let Some(agent) = agent {
                    self.turn(&agent, &prompt).await;
                }
            }
            Err(e) => eprintln!("cadre: /{}: {e}", cmd.name),
        }
        if cmd.model.is_some()
            && let Err(e) = self.setup.harness.set_model(&previous)
        {
            eprintln!("cadre: cannot go back to {previous}: {e}");
        }
        true
    }

    async fn prompt(&mut self, prompt: &str) {
        let agent = self.h().agent().clone();
        self.turn(&agent, prompt).await;
    }

    /// One turn of `agent` (the main agent, or it narrowed for a command) on `prompt`.
    async fn turn(&mut self, agent: &cadre_engine::Agent, prompt: &str) {
        let cancel = self.stop.child_token();
        let opts = self.run_options(&cancel);
        let run = self
            .setup
            .harness
            .run_in_as(agent, &mut self.session, prompt, opts);
        let out = self
            .interrupts
            .cancelling(run, &cancel, "cancelling the turn…")
            .await;
        self.spent += out.usage;
        if !matches!(out.state, cadre_types::EndState::Completed) {
            eprintln!("cadre: {}", out.state);
        }
        let running: Vec<String> = self
            .h()
            .runtime()
            .tasks_of(self.session.id())
            .await
            .into_iter()
            .filter(|t| t.background && !t.status.is_terminal())
            .map(|t| format!("{} ({})", t.agent_id, t.id))
            .collect();
        if !running.is_empty() {
            eprintln!("still running in the background: {}", running.join(", "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_map_to_decisions() {
        assert_eq!(parse_answer("y"), ApprovalDecision::AllowOnce);
        assert_eq!(parse_answer(" Session "), ApprovalDecision::AllowSession);
        assert_eq!(parse_answer(""), ApprovalDecision::Deny { feedback: None });
        assert_eq!(
            parse_answer("use git mv instead"),
            ApprovalDecision::Deny {
                feedback: Some("use git mv instead".into())
            }
        );
    }
}
