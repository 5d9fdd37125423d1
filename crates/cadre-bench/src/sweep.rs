//! `cadre-bench fanout --sweep`: every variant × N, each in its own child process (so each
//! row's peak RSS is its own), collected into a markdown table.

use crate::cli::{FanoutArgs, StoreKind, Variant, cell_json_path};
use crate::fanout::FanoutResult;
use anyhow::{Context, Result, bail};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// Attempts per cell: at N = 10 000 a connection of the mock server is now and then reset
/// (accept-queue overflow), which fails the run; such a cell is run again.
const ATTEMPTS: usize = 3;

fn run_cell(
    args: &FanoutArgs,
    variant: Variant,
    n: usize,
    store: StoreKind,
) -> Result<(FanoutResult, usize)> {
    let mut last = None;
    for attempt in 1..=ATTEMPTS {
        match run_child(args, variant, n, store) {
            Ok(r) => return Ok((r, attempt)),
            Err(e) => {
                println!(
                    "  attempt {attempt} of {} n={n} failed: {e:#}",
                    variant.name()
                );
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no attempt ran")))
}

fn run_child(
    args: &FanoutArgs,
    variant: Variant,
    n: usize,
    store: StoreKind,
) -> Result<FanoutResult> {
    let exe = std::env::current_exe().context("locating cadre-bench")?;
    let json = cell_json_path(variant, n, store);
    let mut cmd = Command::new(exe);
    cmd.env("RUST_LIB_BACKTRACE", "0");
    cmd.args(["fanout", "--variant", variant.name()])
        .args(["--n", &n.to_string()])
        .args(["--store", store.name()])
        .args(["--latency-ms", &args.latency_ms.to_string()])
        .args(["--stream", &args.stream.to_string()])
        .arg("--json")
        .arg(&json);
    if args.checkpoints {
        cmd.arg("--checkpoints");
    }
    if args.persist {
        cmd.arg("--persist");
    }
    if args.cold {
        cmd.arg("--cold");
    }
    if args.server_in_process {
        cmd.arg("--server-in-process");
    }
    let cap = match args.max_concurrent {
        Some(m) => m,
        None if n > 1000 => args.sweep_cap,
        None => n,
    };
    cmd.args(["--max-concurrent", &cap.clamp(1, n.max(1)).to_string()]);
    // One run is too few for a stable median on a shared 2-core machine; 3 keep the sweep
    // well under 10 minutes.
    let repeat = args.repeat.or((n > 100).then_some(3));
    if let Some(k) = repeat {
        cmd.args(["--repeat", &k.to_string()]);
    }
    let status = cmd.status().context("running a fanout child process")?;
    if !status.success() {
        bail!("fanout {} n={n} failed ({status})", variant.name());
    }
    let text =
        std::fs::read_to_string(&json).with_context(|| format!("reading {}", json.display()))?;
    Ok(serde_json::from_str(&text)?)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The markdown table of a sweep.
pub fn table(results: &[FanoutResult]) -> String {
    let mut s = String::from(
        "| variant | store | N | max conc. | runs | floor ms | scenario ms | overhead / sub-agent ms (wall) | CPU overhead / sub-agent ms | peak RSS MiB (scenario / process) | requests / run | parent turns | delivered |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let floor = r
            .floor
            .map_or_else(|| "-".to_string(), |f| format!("{:.2}", f.median_ms));
        let over = r
            .overhead_per_subagent_ms
            .map_or_else(|| "-".to_string(), |o| format!("{o:.4}"));
        let cpu = r
            .cpu_overhead_per_subagent_ms
            .map_or_else(|| "-".to_string(), |o| format!("{o:.4}"));
        let reqs = r.scenario_requests.first().copied().unwrap_or(0);
        let turns = r.parent_turns.first().copied().unwrap_or(0);
        let refused = if r.parent_rejected_runs > 0 {
            " †"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {floor} | {:.2} | {over} | {cpu} | {:.1} / {:.1} | {reqs} | {turns} | {}/{}{refused} |",
            r.variant.name(),
            r.store.name(),
            r.n,
            r.max_concurrent,
            r.repeat,
            r.scenario.median_ms,
            mib(r.scenario_peak_rss_kib),
            mib(r.peak_rss_kib),
            r.delivered_min,
            r.n
        );
    }
    s
}

/// Run the matrix and write the table.
pub fn run(args: &FanoutArgs) -> Result<()> {
    let started = Instant::now();
    let mut results = Vec::new();
    let mut retried = 0;
    for &store in &args.sweep_stores {
        for &variant in &args.sweep_variants {
            for &n in &args.sweep_n {
                let t = Instant::now();
                let (r, attempts) = run_cell(args, variant, n, store)?;
                println!(
                    "  ({} store={} n={n} took {:.1} s, attempt {attempts})\n",
                    variant.name(),
                    store.name(),
                    t.elapsed().as_secs_f64()
                );
                retried += usize::from(attempts > 1);
                results.push(r);
            }
        }
    }
    let mut md = format!(
        "Fan-out sweep: stream={}, persist={}, latency={} ms, cold pools={}; medians; total {:.1} s\n\n",
        args.stream,
        args.persist,
        args.latency_ms,
        args.cold,
        started.elapsed().as_secs_f64()
    );
    md.push_str(&table(&results));
    if retried > 0 {
        md.push_str(&format!(
            "\n{retried} cell(s) needed a second attempt (a mock-server connection was reset).\n"
        ));
    }
    if results.iter().any(|r| r.parent_rejected_runs > 0) {
        md.push_str("\n† The mock server refused the parent's request after the fan-out (HTTP 413: axum's 2 MiB body limit in cadre-testkit). Every sub-agent completed and is timed; the parent's final turn is not, and results could not be delivered to it.\n");
    }
    let path = args
        .md
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/bench/fanout-sweep.md"));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, &md).with_context(|| format!("writing {}", path.display()))?;
    println!("{md}\nwritten to {}", path.display());
    Ok(())
}
