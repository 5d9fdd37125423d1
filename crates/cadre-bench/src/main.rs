//! `cadre-bench`: measures what cadre exists for — many sub-agents, little overhead.
//!
//! * `fanout` — an orchestrator delegates N sub-agents (each makes one cheap tool call)
//!   against the testkit's mock OpenAI-compatible server on 127.0.0.1, through the real
//!   engine and sub-agent runtime; the same requests are also sent by a raw HTTP client
//!   (the floor). Reports wall times, overhead per sub-agent, requests served and peak RSS.
//! * `fanout --sweep` — the whole matrix of variants and N, one child process per cell.
//! * `cache` — prompt-cache friendliness of a parent with background sub-agents: prefix
//!   efficiency, bytes sent, `cache_control` breakpoints, estimated cached tokens.
//! * `coldstart` — whole-process start-up of `cadre --version` and `cadre agents list`.
//! * `tui` — frame times of the full-screen UI: a 20 000-line transcript scrolled, 200
//!   deltas/s streamed while keys are typed.
//! * `loader` — loading definition directories of ordinary and hostile files.
//! * `serve-churn` — authenticated requests to `cadre serve` while hostile idle connections
//!   churn through its connection slots.
//!
//! See BENCHMARKS.md at the repository root for the commands and the current figures, and
//! docs/benchmarks-history.md for every measurement taken.

mod allocator;
mod bodies;
mod cache;
mod cli;
mod coldstart;
mod fanout;
mod floor;
mod loader;
mod responder;
mod scenario;
mod serve_churn;
mod server;
mod stats;
mod sweep;
mod tui;
mod wiring;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    match &cli.command {
        cli::Command::Fanout(args) if args.sweep => sweep::run(args),
        cli::Command::Fanout(args) => fanout::main(args),
        cli::Command::Coldstart(args) => coldstart::run(args),
        cli::Command::Cache(args) => cache::run(args),
        cli::Command::Tui(args) => tui::run(args),
        cli::Command::Loader(args) => loader::run(args),
        cli::Command::ServeChurn(args) => serve_churn::run(args),
        cli::Command::MockServer(args) => {
            server::serve(args.variant, args.latency_ms, args.jitter_ms)
        }
    }
}
