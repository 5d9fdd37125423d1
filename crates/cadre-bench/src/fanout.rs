//! `cadre-bench fanout`: one measurement of one variant and N. Starts the mock server
//! (recording off), warms up, runs the scenario and the floor K times each (interleaved),
//! checks the server's request counter after every run, and reports medians, overhead per
//! sub-agent and peak RSS. Writes the result as JSON.

use crate::bodies::{self, FloorBodies};
use crate::cli::{FanoutArgs, StoreKind, Variant};
use crate::floor;
use crate::scenario::{self, ScenarioOptions, ScenarioRun};
use crate::server::BenchServer;
use crate::stats::{self, Summary, ms, status_kib, summarize};
use crate::wiring::{self, StoreCounts};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The result of one `fanout` run, as written to JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FanoutResult {
    /// Delegation style.
    pub variant: Variant,
    /// Sub-agents.
    pub n: usize,
    /// Streamed replies.
    pub stream: bool,
    /// JSONL sessions.
    pub persist: bool,
    /// The task store written through.
    #[serde(default)]
    pub store: StoreKind,
    /// Children's conversations checkpointed in the store at every turn boundary.
    #[serde(default)]
    pub checkpoints: bool,
    /// Mock reply delay.
    pub latency_ms: u64,
    /// Fresh HTTP clients (cold connection pools) for every run.
    #[serde(default)]
    pub cold: bool,
    /// Sub-agents running at once (runtime max_concurrent; floor chains).
    #[serde(default)]
    pub max_concurrent: usize,
    /// Repetitions.
    pub repeat: usize,
    /// Floor timings (raw HTTP client).
    pub floor: Option<Summary>,
    /// Scenario timings (engine + runtime).
    pub scenario: Summary,
    /// Every floor sample, ms.
    pub floor_samples_ms: Vec<f64>,
    /// Every scenario sample, ms.
    pub scenario_samples_ms: Vec<f64>,
    /// (median scenario − median floor) / N, ms.
    pub overhead_per_subagent_ms: Option<f64>,
    /// CPU time (user + system, all threads) per floor run, ms.
    #[serde(default)]
    pub floor_cpu_ms: Vec<f64>,
    /// CPU time (user + system, all threads) per scenario run, ms.
    #[serde(default)]
    pub scenario_cpu_ms: Vec<f64>,
    /// (median scenario CPU − median floor CPU) / N, ms.
    #[serde(default)]
    pub cpu_overhead_per_subagent_ms: Option<f64>,
    /// CPU time per scenario run over its timed part only (the window of its wall time:
    /// without opening the store, the wiring and the clean-up), ms.
    #[serde(default)]
    pub scenario_timed_cpu_ms: Vec<f64>,
    /// (median timed scenario CPU − median floor CPU) / N, ms: the CPU counterpart of
    /// `overhead_per_subagent_ms`.
    #[serde(default)]
    pub timed_cpu_overhead_per_subagent_ms: Option<f64>,
    /// Store writes per sub-agent over the timed part, the most of any scenario run
    /// (counted by the store; none without one).
    #[serde(default)]
    pub store_writes_per_subagent: Option<f64>,
    /// Reads of a task by id per sub-agent over the timed part, the most of any run.
    #[serde(default)]
    pub task_reads_per_subagent: Option<f64>,
    /// Commits of the store's writer (one per batch of writes) per sub-agent over the timed
    /// part, the most of any run: how well group commit groups.
    #[serde(default)]
    pub store_commits_per_subagent: Option<f64>,
    /// Median wiring time outside the timed part, ms.
    pub setup_median_ms: f64,
    /// Requests one scenario run needs (parent turns + 2 N), checked against the server.
    pub scenario_requests: Vec<usize>,
    /// Requests one floor run sends, checked against the server.
    pub floor_requests: usize,
    /// Parent model turns per scenario run.
    pub parent_turns: Vec<u32>,
    /// Fewest completed results that reached the parent in a scenario run.
    pub delivered_min: usize,
    /// Scenario runs whose final parent request the mock server refused (HTTP 413, its
    /// 2 MiB request body limit); their sub-agents all completed.
    pub parent_rejected_runs: usize,
    /// RSS after the server started, before any run, KiB.
    pub baseline_rss_kib: u64,
    /// Peak RSS after the warm-up and the first timed scenario run (before the floor
    /// ran), KiB.
    pub scenario_peak_rss_kib: u64,
    /// RSS after the warm-up, just before the first timed scenario run, KiB.
    #[serde(default)]
    pub rss_before_run_kib: u64,
    /// RSS in the first timed scenario run once every result was delivered (its runtime
    /// and parent session still alive), KiB.
    #[serde(default)]
    pub rss_after_delivery_kib: u64,
    /// RSS in the first timed scenario run once its parent session was dropped too (its
    /// runtime and store still alive), KiB.
    #[serde(default)]
    pub rss_after_session_kib: u64,
    /// The first timed run's parent conversation after delivery, as JSON bytes.
    #[serde(default)]
    pub conversation_bytes: usize,
    /// RSS after the first timed scenario run returned (its runtime dropped), KiB.
    #[serde(default)]
    pub rss_after_run_kib: u64,
    /// The live heap (bytes allocated and not freed, KiB) at the four readings above,
    /// before the run, after its delivery, without its session and after it; only from a
    /// build with the `live-heap` feature.
    #[serde(default)]
    pub live_heap_kib: Option<[u64; 4]>,
    /// Peak RSS of the whole process at the end (VmHWM), KiB.
    pub peak_rss_kib: u64,
    /// The mock server ran in the measured process (its CPU and memory counted in ours).
    #[serde(default)]
    pub server_in_process: bool,
    /// Peak RSS of the mock server's own process, KiB (`None` when it ran in ours).
    #[serde(default)]
    pub server_peak_rss_kib: Option<u64>,
    /// `/proc/loadavg` when the measurement started and ended (other work on the machine).
    #[serde(default)]
    pub loadavg: (String, String),
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The most of a store count over the runs, per sub-agent; `None` without a store.
fn most_per(runs: &[ScenarioRun], n: f64, count: impl Fn(&StoreCounts) -> u64) -> Option<f64> {
    runs.iter()
        .filter_map(|r| r.store_counts.as_ref().map(&count))
        .max()
        .map(|c| c as f64 / n)
}

async fn scenario_checked(
    server: &BenchServer,
    opts: &ScenarioOptions,
) -> Result<(scenario::ScenarioRun, usize, Duration)> {
    let before = server.request_count().await?;
    let cpu = stats::cpu_time();
    let run = scenario::run_once(opts).await?;
    let cpu = stats::cpu_time().saturating_sub(cpu);
    let served = server.request_count().await? - before;
    // A turn whose request the server refused (413) never reached its counter.
    let expected = run.parent_turns as usize + 2 * opts.n - usize::from(run.parent_rejected);
    if served != expected {
        bail!(
            "scenario: the server served {served} requests, expected {expected} ({} parent turns + 2×{})",
            run.parent_turns,
            opts.n
        );
    }
    Ok((run, served, cpu))
}

async fn floor_checked(
    server: &BenchServer,
    args: &FanoutArgs,
    client: &reqwest::Client,
    bodies: &Arc<FloorBodies>,
) -> Result<(Duration, Duration)> {
    let (variant, n) = (args.variant, args.n);
    let url = format!("{}/chat/completions", server.openai_base_url());
    let before = server.request_count().await?;
    let cpu = stats::cpu_time();
    let (t, refused) =
        floor::run_once(client, variant, n, args.concurrency(), &url, bodies.clone()).await?;
    let cpu = stats::cpu_time().saturating_sub(cpu);
    let served = server.request_count().await? - before;
    let expected = floor::requests(variant, n) - refused;
    if served != expected {
        bail!("floor: the server served {served} requests, expected {expected}");
    }
    Ok((t, cpu))
}

/// Measure one variant and N. Pools are warm by default: one provider registry (one HTTP
/// client) for every scenario run and one client for every floor run, each warmed by an
/// untimed run at full N; `--cold` builds fresh ones for every run instead.
#[expect(
    clippy::too_many_lines,
    reason = "one measurement, its warm-up and its samples in order; split, the timed part would be harder to see"
)]
pub async fn measure(args: &FanoutArgs) -> Result<FanoutResult> {
    let latency = Duration::from_millis(args.latency_ms);
    let server = BenchServer::start(args.variant, latency, args.server_in_process).await?;
    let base_url = server.openai_base_url();
    let baseline_rss_kib = status_kib("VmRSS").unwrap_or(0);
    let load_start = loadavg();
    let shared = wiring::providers(&base_url, args.stream)?;
    let opts = || -> Result<ScenarioOptions> {
        Ok(ScenarioOptions {
            n: args.n,
            max_concurrent: args.concurrency(),
            providers: if args.cold {
                wiring::providers(&base_url, args.stream)?
            } else {
                shared.clone()
            },
            persist: args.persist,
            store: args.store,
            checkpoints: args.checkpoints,
        })
    };

    // Warm-up (untimed): code paths, allocator, and the connection pool. Then the first
    // timed scenario run, so the scenario's peak RSS is read before the floor ever ran.
    let k = args.repetitions();
    let mut runs = Vec::with_capacity(k);
    let mut scenario_requests = Vec::with_capacity(k);
    scenario_checked(&server, &opts()?).await?;
    let mut scenario_cpu = Vec::with_capacity(k);
    let mut floor_cpu = Vec::with_capacity(k);
    let rss_before_run_kib = status_kib("VmRSS").unwrap_or(0);
    let live_before_run_kib = crate::allocator::live_heap_kib();
    let (run, served, cpu) = scenario_checked(&server, &opts()?).await?;
    let rss_after_run_kib = status_kib("VmRSS").unwrap_or(0);
    let live_heap_kib = match (
        live_before_run_kib,
        run.live_after_delivery_kib,
        run.live_after_session_kib,
        crate::allocator::live_heap_kib(),
    ) {
        (Some(a), Some(b), Some(c), Some(d)) => Some([a, b, c, d]),
        _ => None,
    };
    let rss_after_delivery_kib = run.rss_after_delivery_kib;
    let (rss_after_session_kib, conversation_bytes) =
        (run.rss_after_session_kib, run.conversation_bytes);
    scenario_requests.push(served);
    scenario_cpu.push(ms(cpu));
    runs.push(run);
    let scenario_peak_rss_kib = status_kib("VmHWM").unwrap_or(0);

    // The floor's bodies and its warm-up, then the remaining runs interleaved (scenario,
    // floor, scenario, ...) so that load from elsewhere hits both sides alike.
    let mut floor_samples = Vec::new();
    let floor_setup = if args.skip_floor {
        None
    } else {
        let dir = tempfile::tempdir()?;
        let ws = dir.path().canonicalize()?;
        let throwaway = wiring::providers(&base_url, args.stream)?;
        let bodies = Arc::new(bodies::build(
            args.variant,
            args.n,
            args.stream,
            &ws,
            throwaway,
        )?);
        let client = floor::client()?;
        floor_checked(&server, args, &client, &bodies).await?;
        Some((client, bodies))
    };
    for i in 0..k {
        if i > 0 {
            let (run, served, cpu) = scenario_checked(&server, &opts()?).await?;
            scenario_requests.push(served);
            scenario_cpu.push(ms(cpu));
            runs.push(run);
        }
        if let Some((shared, bodies)) = &floor_setup {
            let client = if args.cold {
                floor::client()?
            } else {
                shared.clone()
            };
            let (t, cpu) = floor_checked(&server, args, &client, bodies).await?;
            floor_samples.push(ms(t));
            floor_cpu.push(ms(cpu));
        }
    }
    drop(shared);
    let scenario_samples: Vec<f64> = runs.iter().map(|r| ms(r.elapsed)).collect();
    let setups: Vec<f64> = runs.iter().map(|r| ms(r.setup)).collect();
    let timed_cpu: Vec<f64> = runs.iter().map(|r| ms(r.timed_cpu)).collect();
    let scenario = summarize(&scenario_samples);
    let floor = (!floor_samples.is_empty()).then(|| summarize(&floor_samples));
    let n = args.n.max(1) as f64;
    Ok(FanoutResult {
        variant: args.variant,
        n: args.n,
        stream: args.stream,
        persist: args.persist,
        store: args.store,
        checkpoints: args.checkpoints,
        latency_ms: args.latency_ms,
        cold: args.cold,
        max_concurrent: args.concurrency(),
        repeat: k,
        overhead_per_subagent_ms: floor.map(|f| (scenario.median_ms - f.median_ms) / n),
        floor,
        scenario,
        cpu_overhead_per_subagent_ms: (!floor_cpu.is_empty())
            .then(|| (summarize(&scenario_cpu).median_ms - summarize(&floor_cpu).median_ms) / n),
        timed_cpu_overhead_per_subagent_ms: (!floor_cpu.is_empty())
            .then(|| (summarize(&timed_cpu).median_ms - summarize(&floor_cpu).median_ms) / n),
        scenario_timed_cpu_ms: timed_cpu,
        floor_cpu_ms: floor_cpu,
        scenario_cpu_ms: scenario_cpu,
        floor_samples_ms: floor_samples,
        scenario_samples_ms: scenario_samples,
        store_writes_per_subagent: most_per(&runs, n, |c| c.writes),
        task_reads_per_subagent: most_per(&runs, n, |c| c.task_reads),
        store_commits_per_subagent: most_per(&runs, n, |c| c.commits),
        setup_median_ms: summarize(&setups).median_ms,
        scenario_requests,
        floor_requests: floor::requests(args.variant, args.n),
        parent_turns: runs.iter().map(|r| r.parent_turns).collect(),
        delivered_min: runs.iter().map(|r| r.delivered).min().unwrap_or(0),
        parent_rejected_runs: runs.iter().filter(|r| r.parent_rejected).count(),
        baseline_rss_kib,
        scenario_peak_rss_kib,
        rss_before_run_kib,
        rss_after_delivery_kib,
        rss_after_session_kib,
        conversation_bytes,
        rss_after_run_kib,
        live_heap_kib,
        peak_rss_kib: status_kib("VmHWM").unwrap_or(0),
        server_in_process: args.server_in_process,
        server_peak_rss_kib: server.peak_rss_kib().await?,
        loadavg: (load_start, loadavg()),
    })
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Print a result for people.
pub fn print(r: &FanoutResult) {
    println!(
        "fanout {} n={} max_concurrent={} stream={} persist={} store={} cold={} latency={}ms repeat={}",
        r.variant.name(),
        r.n,
        r.max_concurrent,
        r.stream,
        r.persist,
        r.store.name(),
        r.cold,
        r.latency_ms,
        r.repeat
    );
    if let Some(f) = &r.floor {
        println!(
            "  floor     median {:9.2} ms  (min {:.2}, max {:.2})",
            f.median_ms, f.min_ms, f.max_ms
        );
    }
    let s = &r.scenario;
    println!(
        "  scenario  median {:9.2} ms  (min {:.2}, max {:.2}; setup {:.2} ms untimed)",
        s.median_ms, s.min_ms, s.max_ms, r.setup_median_ms
    );
    if let Some(o) = r.overhead_per_subagent_ms {
        println!("  overhead  {o:.4} ms per sub-agent (wall)");
    }
    if let Some(o) = r.cpu_overhead_per_subagent_ms {
        let med = |v: &[f64]| summarize(v).median_ms;
        println!(
            "  cpu       floor {:.2} ms, scenario {:.2} ms: {:.4} ms per sub-agent",
            med(&r.floor_cpu_ms),
            med(&r.scenario_cpu_ms),
            o
        );
    }
    if let Some(o) = r.timed_cpu_overhead_per_subagent_ms {
        println!(
            "  cpu timed scenario {:.2} ms (the wall time's window, without opening the store): {o:.4} ms per sub-agent",
            summarize(&r.scenario_timed_cpu_ms).median_ms
        );
    }
    if let (Some(w), Some(r), Some(c)) = (
        r.store_writes_per_subagent,
        r.task_reads_per_subagent,
        r.store_commits_per_subagent,
    ) {
        println!(
            "  store     {w:.2} writes in {c:.2} commits, {r:.2} reads of a task per sub-agent (most of a run)"
        );
    }
    println!(
        "  requests  scenario {:?} per run (checked), floor {} per run (checked)",
        r.scenario_requests, r.floor_requests
    );
    println!(
        "  parent turns {:?}; completed results delivered to the parent: {} of {}",
        r.parent_turns, r.delivered_min, r.n
    );
    if r.parent_rejected_runs > 0 {
        println!(
            "  NOTE      in {} run(s) the mock server refused the parent's request after the fan-out (HTTP 413, body over 2 MiB): all sub-agents completed, the parent's last turn did not",
            r.parent_rejected_runs
        );
    }
    println!("  load      {} → {}", r.loadavg.0, r.loadavg.1);
    println!(
        "  RSS       baseline {:.1} MiB, peak after scenario {:.1} MiB, process peak {:.1} MiB ({})",
        mib(r.baseline_rss_kib),
        mib(r.scenario_peak_rss_kib),
        mib(r.peak_rss_kib),
        match r.server_peak_rss_kib {
            Some(k) => format!("mock server: own process, peak {:.1} MiB", mib(k)),
            None => "mock server included".to_string(),
        }
    );
    println!(
        "  RSS       before a timed run {:.1} MiB, after its delivery {:.1} MiB (its parent's \
         conversation: {:.1} MiB of JSON), without that session {:.1} MiB, after it {:.1} MiB",
        mib(r.rss_before_run_kib),
        mib(r.rss_after_delivery_kib),
        r.conversation_bytes as f64 / (1024.0 * 1024.0),
        mib(r.rss_after_session_kib),
        mib(r.rss_after_run_kib),
    );
    if let Some([before, delivered, session, after]) = r.live_heap_kib {
        println!(
            "  live heap before a timed run {:.1} MiB, after its delivery {:.1} MiB, without \
             that session {:.1} MiB, after it {:.1} MiB",
            mib(before),
            mib(delivered),
            mib(session),
            mib(after),
        );
    }
}

/// `fanout` without `--sweep`: measure, print, write JSON.
pub fn main(args: &FanoutArgs) -> Result<()> {
    let rt = stats::bench_runtime()?;
    let result = rt.block_on(measure(args))?;
    print(&result);
    let path = args.json_path();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(&result)?)
        .with_context(|| format!("writing {}", path.display()))?;
    println!("  json      {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: FanoutArgs,
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_variant_runs_end_to_end_and_counts_match() {
        for variant in Variant::ALL {
            // In process: a unit test's executable has no `mock-server` subcommand (the
            // separate server process is covered by tests/fanout_cli.rs).
            let mut args =
                Wrap::parse_from(["x", "--n", "3", "--repeat", "1", "--server-in-process"]).args;
            args.variant = variant;
            let r = measure(&args).await.unwrap();
            assert_eq!(
                r.delivered_min, 3,
                "{variant:?}: every result reaches the parent"
            );
            assert_eq!(r.floor_requests, floor::requests(variant, 3));
            assert_eq!(
                r.scenario_requests[0],
                r.parent_turns[0] as usize + 6,
                "{variant:?}"
            );
            assert!(r.overhead_per_subagent_ms.is_some());
            assert_eq!(r.store_writes_per_subagent, None, "no store, no counts");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_store_counts_what_each_variant_writes_and_reads() {
        // The store's own counters over the timed part: every variant creates each task and
        // stores its end (spawn-bg stores its live child in the same write as its first
        // task); a parent turn that delivers finished tasks adds one write marking them,
        // which N = 4 does not amortise. (Which writes and reads each path makes is tested
        // in cadre-subagents; here, that the benchmark reports them.)
        for (variant, least) in [
            (Variant::TaskFg, 2.0),
            (Variant::TaskBg, 2.0),
            (Variant::SpawnBg, 2.0),
        ] {
            let mut args = Wrap::parse_from([
                "x",
                "--n",
                "4",
                "--repeat",
                "1",
                "--server-in-process",
                "--store",
                "sqlite",
            ])
            .args;
            args.variant = variant;
            let r = measure(&args).await.unwrap();
            let writes = r.store_writes_per_subagent.unwrap();
            assert!(
                (least..=least + 2.0).contains(&writes),
                "{variant:?}: {writes} writes per sub-agent"
            );
            let commits = r.store_commits_per_subagent.unwrap();
            assert!(
                commits > 0.0 && commits <= writes,
                "{variant:?}: {commits} commits for {writes} writes per sub-agent"
            );
            let reads = r.task_reads_per_subagent.unwrap();
            assert!(reads <= 1.0, "{variant:?}: {reads} reads per sub-agent");
        }
    }
}
