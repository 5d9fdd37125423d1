//! The `cadre` binary: parse the command line, set up logging, run the subcommand.

mod agents_cmd;
mod claude_settings;
mod cli;
mod config;
mod hooks_cmd;
mod interactive;
mod mcp_cmd;
mod output;
mod repl_cmd;
mod run_cmd;
mod secrets;
mod serve_cmd;
mod setup;
mod signals;
mod stdout;
mod tasks_cmd;
mod tasks_team;
mod tasks_tree;
mod telemetry;
mod tui_cmd;
mod worktrees_cmd;

use clap::Parser;

// mimalloc: many small, short-lived allocations on few threads (messages, events, JSON) are
// its strength; with glibc malloc the fan-out benchmark spends ~20% of its CPU in the
// allocator (docs/benchmarks-history.md, "Profile").
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

fn init_logging(
    log_file: Option<&std::path::Path>,
    telemetry: Option<telemetry::OtelLayer>,
) -> anyhow::Result<()> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let Some(otel) = telemetry else {
        // Telemetry off: the subscriber of before, with no layer to pay for.
        let builder = tracing_subscriber::fmt().with_env_filter(filter);
        match log_file {
            Some(path) => builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(open_log(path)?))
                .init(),
            None => builder
                .with_ansi(colour_on_stderr())
                // Standard error, but not while the TUI draws on it: there the lines become
                // notices in its transcript.
                .with_writer(cadre_tui::LogWriter::new)
                .init(),
        }
        return Ok(());
    };
    // With telemetry the log filter is the log lines' own: the exporter admits the spans
    // the log filter leaves out.
    let fmt: telemetry::OtelLayer = match log_file {
        Some(path) => Box::new(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(open_log(path)?))
                .with_filter(filter),
        ),
        None => Box::new(
            tracing_subscriber::fmt::layer()
                .with_ansi(colour_on_stderr())
                .with_writer(cadre_tui::LogWriter::new)
                .with_filter(filter),
        ),
    };
    tracing_subscriber::registry().with(vec![fmt, otel]).init();
    Ok(())
}

fn open_log(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// Colour only for a person at a terminal: stderr is one and `NO_COLOR` is unset or empty.
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))
}

/// Run `fut` on a multi-threaded tokio runtime.
fn block_on<F: std::future::Future<Output = anyhow::Result<ExitCode>>>(
    fut: F,
) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(fut)
}

/// As [`block_on`], for the interactive surfaces: a read of the terminal or stdin may still
/// be pending in a blocking thread when they end, and nothing must wait for it.
fn block_on_interactive<F: std::future::Future<Output = anyhow::Result<ExitCode>>>(
    fut: F,
) -> anyhow::Result<ExitCode> {
    let rt = runtime()?;
    let out = rt.block_on(fut);
    rt.shutdown_background();
    out
}

fn main() -> ExitCode {
    // Started as the sandbox launcher, this process confines itself and becomes the
    // sandboxed program; it must happen before any thread exists.
    cadre_sandbox::run_launcher_if_requested();
    let cli = cli::Cli::parse();
    // Also before any thread: the secrets leave the environment, and the processes started
    // for agents are tied to this one's life.
    secrets::protect(&cli);
    cadre_sandbox::tether::enable_current_exe();
    if cli.version {
        // `cadre --version | true` closed the pipe: nothing more was wanted, not a failure.
        let _ = stdout::out!("cadre {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let otel = match telemetry::start(&cli) {
        Ok(layer) => layer,
        Err(e) => {
            eprintln!("cadre: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = init_logging(cli.log_file.as_deref(), otel) {
        eprintln!("cadre: cannot open log file: {e}");
        return ExitCode::from(2);
    }
    let result = match &cli.command {
        // Synchronous: no async runtime to start.
        Some(cli::Command::Agents(cmd)) => agents_cmd::run(&cli, cmd),
        Some(cli::Command::Run(args)) => block_on(run_cmd::run(&cli, args)),
        Some(cli::Command::Serve(args)) => block_on(serve_cmd::run(&cli, args)),
        Some(cli::Command::Tasks(cmd)) => block_on(tasks_cmd::run(&cli, cmd)),
        Some(cli::Command::Worktrees(cmd)) => block_on(worktrees_cmd::run(&cli, cmd)),
        Some(cli::Command::Mcp(cmd)) => block_on(mcp_cmd::run(&cli, cmd)),
        Some(cli::Command::Hooks(cmd)) => hooks_cmd::run(&cli, cmd),
        None => {
            use std::io::IsTerminal;
            let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
            if tty && !cli.no_tui {
                block_on_interactive(tui_cmd::run(&cli))
            } else {
                block_on_interactive(repl_cmd::run(&cli))
            }
        }
    };
    telemetry::shutdown();
    match result {
        Ok(code) => code,
        // The reader of stdout has gone (`cadre tasks list | head`): it wanted no more.
        Err(e) if stdout::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cadre: {e:#}");
            ExitCode::from(2)
        }
    }
}
