//! `cadre run`: build the main agent from the configuration and run it headless.

use crate::cli::{ApprovalAnswer, Cli, OutputFormat, RunArgs};
use crate::config::{self, Config};
use anyhow::{Context, Result, bail};
use cadre_engine::{Agent, Limits, NonInteractiveApprovals, Offloader, Session, SessionMeta};
use cadre_llm::ProviderRegistry;
use cadre_tools::{RunContext, Workspace, builtin::builtin_tools};
use cadre_types::{EndState, EventSink, new_session_id, unix_millis};
use std::path::{Path, PathBuf};
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

/// The resolved workspace root.
pub fn workspace_root(cli: &Cli) -> Result<PathBuf> {
    let dir = match &cli.workspace {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("cannot determine the current directory")?,
    };
    if !dir.is_dir() {
        bail!("workspace {} is not a directory", dir.display());
    }
    dir.canonicalize()
        .with_context(|| format!("cannot resolve workspace {}", dir.display()))
}

/// The model spec in force: `--model`, then `CADRE_MODEL`, then the config, then the default.
pub fn model_spec(cli: &Cli, config: &Config) -> String {
    cli.model
        .clone()
        .or_else(|| std::env::var("CADRE_MODEL").ok().filter(|s| !s.is_empty()))
        .or_else(|| config.model.clone())
        .unwrap_or_else(|| config::DEFAULT_MODEL.to_string())
}

fn sessions_dir(ws: &Path) -> PathBuf {
    ws.join(".cadre").join("sessions")
}

/// Build the main agent for `ws` from `config`.
fn build_agent(cli: &Cli, args: &RunArgs, config: &Config, ws: &Path) -> Result<Agent> {
    let spec = model_spec(cli, config);
    let default_provider = spec
        .split_once(':')
        .map_or("openai", |(p, _)| p)
        .to_string();
    let providers = ProviderRegistry::new(config.providers.clone(), &default_provider);
    let model = providers.resolve(&spec)?;
    let mut policy = config.permissions.policy()?;
    if let Some(mode) = &args.permission_mode {
        policy.mode = mode.parse().map_err(anyhow::Error::msg)?;
    }
    let limits = Limits {
        max_turns: args.max_turns.or(config.limits.max_turns).unwrap_or(50),
        wall_clock: config.limits.wall_clock_secs.map(Duration::from_secs),
        max_tokens: config.limits.max_tokens,
    };
    let mut builder = Agent::builder("main", model)
        .system_prompt(cadre_engine::prompt::main_system_prompt(ws))
        .tools(builtin_tools())
        .limits(limits)
        .permissions(policy)
        .offloader(Offloader::new(
            ws,
            config
                .tools
                .offload_threshold
                .unwrap_or(cadre_engine::DEFAULT_OFFLOAD_THRESHOLD),
        ));
    if let Some(t) = config.tools.timeout_secs {
        builder = builder.tool_timeout(Duration::from_secs(t));
    }
    if let Some(n) = config.tools.max_parallel {
        builder = builder.max_parallel_tools(n);
    }
    Ok(builder.build())
}

/// Run `cadre run`.
pub async fn run(cli: &Cli, args: &RunArgs) -> Result<ExitCode> {
    let ws = workspace_root(cli)?;
    let config = config::load(&ws, cli.config.as_deref())?;
    let agent = build_agent(cli, args, &config, &ws)?;
    let spec = agent.config().model.spec.clone();

    let mut session = match &args.resume {
        Some(id) => Session::open(&sessions_dir(&ws), id)?,
        None => Session::create(
            &sessions_dir(&ws),
            SessionMeta {
                id: new_session_id(),
                agent: "main".into(),
                model: spec.clone(),
                created_at: unix_millis(),
                parent_session_id: None,
            },
        )?,
    };

    let events: Arc<dyn EventSink> = match args.output {
        OutputFormat::Text => Arc::new(crate::output::TextSink::default()),
        OutputFormat::Jsonl => Arc::new(crate::output::JsonlSink::default()),
    };
    let approve = args.approval == ApprovalAnswer::Auto;
    let approvals = NonInteractiveApprovals::new(approve).with_notice(|req, approved| {
        if !approved {
            eprintln!(
                "cadre: {} ({}) needs approval and was denied; rerun with --approval auto or --permission-mode auto-approve to allow it",
                req.tool,
                req.subject.as_deref().unwrap_or("")
            );
        }
    });
    let run = Arc::new(RunContext {
        session_id: session.id().to_string(),
        agent: "main".into(),
        model: spec,
        task_id: None,
        user_id: std::env::var("USER").ok(),
        parent_session_id: None,
        depth: 0,
        trace_id: new_session_id().replacen("s-", "", 1),
        events,
        approvals: Arc::new(approvals),
    });
    let workspace = Arc::new(Workspace::new(&ws)?);
    let cancel = CancellationToken::new();
    let ctrl_c = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\ncadre: cancelling (Ctrl-C again to quit at once)…");
                cancel.cancel();
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(EXIT_CANCELLED as i32);
                }
            }
        })
    };
    let outcome = agent
        .run(
            &mut session,
            Some(args.prompt.clone()),
            run,
            workspace,
            cancel,
        )
        .await;
    ctrl_c.abort();
    if args.output == OutputFormat::Text {
        eprintln!(
            "session: {} (resume with --resume {})",
            session.id(),
            session.id()
        );
    }
    Ok(match &outcome.state {
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
    })
}
