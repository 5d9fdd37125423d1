//! Command-line definitions: the flags and subcommands scripts call, so renaming or removing
//! one is a breaking change.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// cadre — a local-first agent harness with sub-agents.
#[derive(Debug, Parser)]
#[command(name = "cadre", version, about, disable_version_flag = true)]
pub struct Cli {
    /// Print the version.
    #[arg(long, short = 'V', global = false)]
    pub version: bool,
    /// Workspace directory (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Model as PROVIDER:MODEL (overrides CADRE_MODEL and the config).
    #[arg(long, global = true, value_name = "PROVIDER:MODEL")]
    pub model: Option<String>,
    /// Extra configuration file, applied over the user and project files.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Write logs to this file instead of stderr (filter with RUST_LOG).
    #[arg(long, global = true, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// Interactive: continue the most recent session of this workspace.
    #[arg(long = "continue", short = 'c', conflicts_with = "resume")]
    pub continue_latest: bool,
    /// Interactive: continue this session.
    #[arg(long, value_name = "SESSION_ID")]
    pub resume: Option<String>,
    /// Use the line REPL even on a terminal (the full-screen UI is the default there).
    #[arg(long)]
    pub no_tui: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an agent headless on PROMPT and stream its progress.
    Run(RunArgs),
    /// Inspect and validate the sub-agent definitions.
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// Serve the configured agents over A2A and the task protocol until SIGTERM / Ctrl-C.
    Serve(ServeArgs),
    /// Inspect and control the persisted sub-agent tasks (any node sharing the store).
    #[command(subcommand)]
    Tasks(TasksCommand),
    /// The git worktrees and branches of `isolation: worktree` children: list, or clean up
    /// what a crash left behind.
    #[command(subcommand)]
    Worktrees(WorktreesCommand),
    /// MCP: the configured servers, and cadre's sub-agents served as MCP tools.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Hooks from `.claude/settings*.json` and `config.toml` (see docs/hooks.md).
    #[command(subcommand)]
    Hooks(HooksCommand),
}

/// `cadre hooks ...`.
#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Every configured handler: its source, event, matcher and command.
    List {
        /// Print a JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `cadre mcp ...`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start every configured MCP server and show its source, state, tools and prompts.
    List {
        /// Print a JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Serve cadre's sub-agents (task and the lifecycle tools) to an MCP client, over stdio,
    /// or streamable HTTP at /mcp with --http.
    Serve {
        /// Listen for streamable HTTP on this address instead of using stdio (bearer token
        /// and site checks as for `cadre serve`).
        #[arg(long, value_name = "HOST:PORT")]
        http: Option<String>,
    },
}

/// `cadre worktrees ...`.
#[derive(Debug, Subcommand)]
pub enum WorktreesCommand {
    /// The worktrees under `.cadre/worktrees/` (running or left over) and the `cadre/*`
    /// branches.
    List,
    /// Commit what leftover worktrees hold onto their branches and remove them (a running
    /// task's is kept); delete `cadre/*` branches with no commits of their own.
    Prune,
}

/// `cadre tasks ...`.
#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// List task records, oldest first.
    List {
        /// Print a JSON array of records.
        #[arg(long)]
        json: bool,
        /// Only this status: pending, running, completed, failed or cancelled.
        #[arg(long, value_name = "STATUS")]
        status: Option<String>,
        /// Only tasks of this parent session.
        #[arg(long, value_name = "SESSION_ID")]
        session: Option<String>,
    },
    /// Show one task in full.
    Show {
        /// The task id.
        id: String,
        /// Print the raw record as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A session's delegation tree: each sub-agent under the agent that started it, with
    /// its node, state, turns, tokens, cost and duration.
    Tree {
        /// The session (default: the session of the newest task in the store).
        session: Option<String>,
        /// Print the tree as nested JSON.
        #[arg(long)]
        json: bool,
    },
    /// A team of a session: its lead, members (with their tasks' state and the board
    /// items they hold), its board and its newest messages.
    Team {
        /// The lead's session.
        session: String,
        /// The team's name.
        name: String,
        /// Print the team as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Request cancellation; the node running the task stops it.
    Cancel {
        /// The task id.
        id: String,
    },
    /// Fail orphaned tasks (no heartbeat for the orphan timeout) once, now.
    Sweep,
}

/// Arguments of `cadre serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// On SIGTERM, how long running tasks may finish before durable ones are handed to
    /// another node and the rest cancelled (default `[serve] grace_secs`, else 10).
    #[arg(long, value_name = "SECS")]
    pub drain_grace_secs: Option<u64>,
}

/// `cadre agents ...`.
#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// List every agent with its source, model and tools.
    List {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one agent in full: source, tools, model, workspace, prompt.
    Show {
        /// The agent's name.
        name: String,
    },
    /// Validate every definition file; exit 1 if any is broken.
    Check,
}

/// Output format of `cadre run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Human-readable: the answer on stdout, progress on stderr.
    Text,
    /// One JSON event per line on stdout.
    Jsonl,
}

/// How a headless run answers approval requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApprovalAnswer {
    /// Refuse (the model is told why).
    Deny,
    /// Approve.
    Auto,
}

/// Arguments of `cadre run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task for the agent.
    pub prompt: String,
    /// Run this sub-agent directly in the foreground, bypassing the main model (`@agent`).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Maximum model turns (at least 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,
    /// How calls that need approval are answered, since nobody can be asked.
    #[arg(long, value_enum, default_value_t = ApprovalAnswer::Deny)]
    pub approval: ApprovalAnswer,
    /// Approval mode: ask, auto-approve, read-only or bypass (overrides the config).
    #[arg(long, value_name = "MODE")]
    pub permission_mode: Option<String>,
    /// The main agent's OS sandbox for this run: read-only, workspace-write or off
    /// (overrides `[sandbox] mode`; sub-agents are narrowed to it).
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<cadre_sandbox::SandboxMode>,
    /// Continue this session instead of starting a new one (with its model, unless
    /// `--model` is given).
    #[arg(long, value_name = "SESSION_ID", conflicts_with = "agent")]
    pub resume: Option<String>,
    /// Compact the resumed session before the new prompt, whether or not compaction is
    /// automatic, like `/compact [INSTRUCTIONS]`: instructions for the summary go after an
    /// equals sign (`--compact-now="keep the API decisions"`); a word after a space is the
    /// prompt (`--compact-now "go on"`).
    #[arg(
        long,
        value_name = "INSTRUCTIONS",
        num_args = 0..=1,
        require_equals = true,
        requires = "resume"
    )]
    pub compact_now: Option<Option<String>>,
    /// Also write the run's telemetry spans to FILE as OTLP JSON lines (one
    /// `ExportTraceServiceRequest` per line), with or without a collector.
    #[arg(long, value_name = "FILE")]
    pub trace_file: Option<PathBuf>,
    /// Do not wait for background sub-agents when the main agent is done: they are
    /// cancelled at exit and their records stay in the task store (`cadre tasks list`).
    #[arg(long)]
    pub detach: bool,
}
