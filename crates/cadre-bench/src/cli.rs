//! Command-line interface of `cadre-bench`: the `fanout` benchmark (one run or the whole
//! matrix with `--sweep`), the `cache` benchmark of prompt-cache friendliness, the
//! `coldstart` benchmark of the `cadre` binary and the `loader` benchmark of definition files.

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Benchmarks of cadre: many sub-agents, little overhead.
#[derive(Debug, Parser)]
#[command(name = "cadre-bench", version)]
pub struct Cli {
    /// What to measure.
    #[command(subcommand)]
    pub command: Command,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// An orchestrator delegates N sub-agents against a local mock server; compares the
    /// wall time with a raw HTTP client doing the same requests.
    Fanout(FanoutArgs),
    /// Whole-process start-up time of `cadre --version` and `cadre agents list`.
    Coldstart(ColdstartArgs),
    /// Prompt caching: a parent with five background sub-agents working for twelve turns;
    /// prefix efficiency, bytes sent, breakpoints and the tokens a prompt cache would bill.
    Cache(CacheArgs),
    /// Frame times of the full-screen UI: scrolling a long transcript, streaming deltas.
    Tui(TuiArgs),
    /// Loading agent definition directories: many ordinary files, many hostile ones, and
    /// single worst cases (deep nesting, size limits, sparse files).
    Loader(LoaderArgs),
    /// `cadre serve` under a flood of hostile idle connections: how long an authenticated
    /// request takes while they churn.
    ServeChurn(ServeChurnArgs),
    /// The mock model server of `fanout`, run as its own process (used by `fanout`).
    #[command(hide = true)]
    MockServer(MockServerArgs),
}

/// Options of `tui`.
#[derive(Debug, Clone, Args)]
pub struct TuiArgs {
    /// Wrapped transcript lines to scroll through (at least).
    #[arg(long, default_value_t = 20_000)]
    pub lines: usize,
    /// Text deltas streamed per second.
    #[arg(long, default_value_t = 200)]
    pub deltas_per_sec: u32,
    /// Deltas streamed in all.
    #[arg(long, default_value_t = 4_000)]
    pub deltas: usize,
    /// Terminal width.
    #[arg(long, default_value_t = 120)]
    pub width: u16,
    /// Terminal height.
    #[arg(long, default_value_t = 40)]
    pub height: u16,
}

/// Options of the `mock-server` helper process.
#[derive(Debug, Clone, Args)]
pub struct MockServerArgs {
    /// Delegation style the replies script.
    #[arg(long, value_enum)]
    pub variant: Variant,
    /// Delay of every reply, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
    /// Extra delay of each reply, uniformly random up to this many milliseconds (the soak's
    /// jittered latency).
    #[arg(long, default_value_t = 0)]
    pub jitter_ms: u64,
}

/// How the parent delegates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// N foreground `task` calls in one reply; the parent waits for all of them.
    TaskFg,
    /// N background `task` calls; results are delivered to the parent as they finish.
    TaskBg,
    /// N `agent_spawn` calls with `timeout_seconds: 0`, then one `task_output` per task.
    SpawnBg,
}

impl Variant {
    /// All variants, in table order.
    pub const ALL: [Variant; 3] = [Variant::TaskFg, Variant::TaskBg, Variant::SpawnBg];

    /// The name used on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Variant::TaskFg => "task-fg",
            Variant::TaskBg => "task-bg",
            Variant::SpawnBg => "spawn-bg",
        }
    }

    /// Background variants deliver results after the parent's second turn.
    pub fn is_background(self) -> bool {
        self != Variant::TaskFg
    }
}

/// Which task store the scenario writes through.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// No store: tasks live in the runtime only.
    #[default]
    None,
    /// SQLite (WAL) in the scenario's temporary workspace.
    Sqlite,
    /// PostgreSQL: a throwaway local cluster.
    Postgres,
}

/// Options of `fanout`.
#[derive(Debug, Clone, Args)]
pub struct FanoutArgs {
    /// Delegation style.
    #[arg(long, value_enum, default_value_t = Variant::TaskFg)]
    pub variant: Variant,
    /// Number of sub-agents.
    #[arg(long, default_value_t = 100)]
    pub n: usize,
    /// Delay of every mock reply, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
    /// Ask for streamed (SSE) replies (`true`) or whole JSON bodies (`false`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub stream: bool,
    /// Persist sessions as JSONL files in a temporary directory (default: in memory).
    #[arg(long)]
    pub persist: bool,
    /// Write every task through a task store: `none` (default), `sqlite` (a fresh file per
    /// run) or `postgres` (a throwaway cluster started by the bench, one database per run).
    #[arg(long, value_enum, default_value_t = StoreKind::None)]
    pub store: StoreKind,
    /// Checkpoint every child's conversation in the task store at each turn boundary (what
    /// `on_orphan = "resume"` needs).
    #[arg(long)]
    pub checkpoints: bool,
    /// Scenario and floor runs to take the median of (default 5 for n <= 100, else 1).
    #[arg(long)]
    pub repeat: Option<usize>,
    /// Where to write the JSON result (default target/bench/fanout-<variant>-<n>.json).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Sub-agents running at once (the runtime's max_concurrent; the floor caps its
    /// request chains the same way). Default: N.
    #[arg(long)]
    pub max_concurrent: Option<usize>,
    /// Fresh HTTP clients (cold connection pools) for every run, as a new process would
    /// have; by default each side keeps one client warmed by an untimed run at full N.
    #[arg(long)]
    pub cold: bool,
    /// Skip the floor (for profiling the scenario alone).
    #[arg(long)]
    pub skip_floor: bool,
    /// Run the mock server inside the measured process (its CPU and memory are then counted
    /// in both sides and in peak RSS). By default it is a separate process, like a real
    /// provider.
    #[arg(long)]
    pub server_in_process: bool,
    /// Run the whole matrix (every variant and N) in child processes and write a table.
    #[arg(long)]
    pub sweep: bool,
    /// Values of N for `--sweep`.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 10, 100, 1000, 10000])]
    pub sweep_n: Vec<usize>,
    /// Variants for `--sweep`.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Variant::ALL)]
    pub sweep_variants: Vec<Variant>,
    /// Task stores for `--sweep` (`none`, `sqlite`, `postgres`); `--store` is ignored there.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [StoreKind::None])]
    pub sweep_stores: Vec<StoreKind>,
    /// `--sweep` cells with N above 1000 run at most this many sub-agents at once (the mock
    /// server's accept queue holds 1024 connections; more overflow it). `--max-concurrent`
    /// overrides it for every cell.
    #[arg(long, default_value_t = 256)]
    pub sweep_cap: usize,
    /// Where `--sweep` writes its markdown table (default target/bench/fanout-sweep.md).
    #[arg(long)]
    pub md: Option<PathBuf>,
}

impl FanoutArgs {
    /// The number of repetitions in force.
    pub fn repetitions(&self) -> usize {
        self.repeat
            .unwrap_or(if self.n <= 100 { 5 } else { 1 })
            .max(1)
    }

    /// The concurrency cap in force (at least 1).
    pub fn concurrency(&self) -> usize {
        self.max_concurrent.unwrap_or(self.n).max(1)
    }

    /// The JSON output path in force.
    pub fn json_path(&self) -> PathBuf {
        self.json
            .clone()
            .unwrap_or_else(|| cell_json_path(self.variant, self.n, self.store))
    }
}

impl StoreKind {
    /// The name used on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::None => "none",
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres => "postgres",
        }
    }
}

/// Where one fan-out cell writes its JSON by default.
pub fn cell_json_path(variant: Variant, n: usize, store: StoreKind) -> PathBuf {
    let store = match store {
        StoreKind::None => String::new(),
        other => format!("-{}", other.name()),
    };
    PathBuf::from(format!(
        "target/bench/fanout-{}-{n}{store}.json",
        variant.name()
    ))
}

/// Options of `cache`.
#[derive(Debug, Clone, Args)]
pub struct CacheArgs {
    /// Wire formats to run (`openai`, `anthropic`).
    #[arg(long, value_delimiter = ',', default_values_t = ["openai".to_string(), "anthropic".to_string()])]
    pub wire: Vec<String>,
    /// Streamed (`true`), whole-body (`false`) replies, or both.
    #[arg(long, value_delimiter = ',', default_values_t = [true, false])]
    pub stream: Vec<bool>,
    /// Where to write the JSON result (default target/bench/cache.json).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write every request body, as sent, to `DIR/<wire>-<stream>/NNN.json`.
    #[arg(long)]
    pub dump: Option<PathBuf>,
}

/// Options of `loader`.
#[derive(Debug, Clone, Args)]
pub struct LoaderArgs {
    /// Files in each of the many-file directories.
    #[arg(long, default_value_t = 10_000)]
    pub files: usize,
    /// Timed loads of each case (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Where to write the JSON result (default target/bench/loader.json).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Options of `serve-churn`.
#[derive(Debug, Clone, Args)]
pub struct ServeChurnArgs {
    /// The `cadre` binary to serve with (build it with `cargo build --release -p cadre`).
    #[arg(long)]
    pub cadre: PathBuf,
    /// Hostile connections kept open (each reopened as soon as the server closes it).
    #[arg(long, default_value_t = 600)]
    pub connections: usize,
    /// Authenticated requests timed (half on a fresh connection, half on a kept one).
    #[arg(long, default_value_t = 200)]
    pub requests: usize,
    /// Where to write the JSON result (default target/bench/serve-churn.json).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Options of `coldstart`.
#[derive(Debug, Clone, Args)]
pub struct ColdstartArgs {
    /// The `cadre` binary to time (build it with `cargo build --release -p cadre`).
    #[arg(long)]
    pub cadre: PathBuf,
    /// Timed runs per command (after 3 warm-up runs).
    #[arg(long, default_value_t = 50)]
    pub runs: usize,
    /// Agent definition files in the temporary workspace.
    #[arg(long, default_value_t = 50)]
    pub agents: usize,
    /// Also run `hyperfine` (when it is on PATH) and print its summary.
    #[arg(long)]
    pub hyperfine: bool,
    /// Where to write the JSON result (default target/bench/coldstart.json).
    #[arg(long)]
    pub json: Option<PathBuf>,
}
