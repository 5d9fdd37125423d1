//! `cadre-bench coldstart`: whole-process wall time of `cadre --version` and
//! `cadre agents list` in a temporary workspace holding many agent definition files,
//! timed with `std::process::Command` (and, optionally, `hyperfine`).

use crate::cli::ColdstartArgs;
use crate::stats::{Summary, ms, summarize};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const WARMUP: usize = 3;

/// Timings of one command.
#[derive(Debug, Serialize)]
struct Timed {
    command: String,
    runs: usize,
    summary: Summary,
}

/// The whole result.
#[derive(Debug, Serialize)]
struct ColdstartResult {
    cadre: PathBuf,
    agents: usize,
    commands: Vec<Timed>,
}

fn agent_file(i: usize) -> String {
    format!(
        "---\nname: agent-{i:02}\ndescription: |\n  Benchmark agent {i}. Reviews one module for bugs\n  and reports findings with file paths.\ntools:\n  - read_file\n  - grep\n  - glob\nmax_turns: 12\n---\n\nYou are benchmark agent {i}. Read the module you are given, look for bugs, and report\neach finding with its file path and line. Do not change any file.\n"
    )
}

/// A workspace with `count` agent files and an isolated configuration home.
fn workspace(count: usize) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let agents = dir.path().join(".cadre").join("agents");
    std::fs::create_dir_all(&agents)?;
    std::fs::create_dir_all(dir.path().join("home"))?;
    for i in 0..count {
        std::fs::write(agents.join(format!("agent-{i:02}.md")), agent_file(i))?;
    }
    Ok(dir)
}

fn command(cadre: &Path, ws: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(cadre);
    c.args(args)
        .current_dir(ws)
        .env("HOME", ws.join("home"))
        .env("XDG_CONFIG_HOME", ws.join("home"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

fn time(cadre: &Path, ws: &Path, args: &[&str], runs: usize) -> Result<Timed> {
    let mut samples = Vec::with_capacity(runs);
    for i in 0..WARMUP + runs {
        let started = Instant::now();
        let status = command(cadre, ws, args).status()?;
        let elapsed = started.elapsed();
        if !status.success() {
            bail!("cadre {} failed: {status}", args.join(" "));
        }
        if i >= WARMUP {
            samples.push(ms(elapsed));
        }
    }
    Ok(Timed {
        command: format!("cadre {}", args.join(" ")),
        runs,
        summary: summarize(&samples),
    })
}

fn check_listing(cadre: &Path, ws: &Path, count: usize) -> Result<()> {
    let out = command(cadre, ws, &["agents", "list"])
        .stdout(Stdio::piped())
        .output()
        .context("running cadre agents list")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let listed = (0..count)
        .filter(|i| text.contains(&format!("agent-{i:02}")))
        .count();
    if listed != count {
        bail!("cadre agents list shows {listed} of the {count} agents:\n{text}");
    }
    Ok(())
}

fn hyperfine(cadre: &Path, ws: &Path, runs: usize) -> Result<()> {
    let bin = cadre.display().to_string();
    let status = Command::new("hyperfine")
        .current_dir(ws)
        .env("HOME", ws.join("home"))
        .env("XDG_CONFIG_HOME", ws.join("home"))
        .args(["-N", "--warmup", "3", "--runs", &runs.to_string()])
        .arg(format!("{bin} --version"))
        .arg(format!("{bin} agents list"))
        .status()
        .context("running hyperfine (apt-get install -y hyperfine)")?;
    if !status.success() {
        bail!("hyperfine failed: {status}");
    }
    Ok(())
}

/// Run the cold-start benchmark.
pub fn run(args: &ColdstartArgs) -> Result<()> {
    let cadre = args
        .cadre
        .canonicalize()
        .with_context(|| format!("cadre binary {}", args.cadre.display()))?;
    let dir = workspace(args.agents)?;
    let ws = dir.path().canonicalize()?;
    check_listing(&cadre, &ws, args.agents)?;
    let runs = args.runs.max(1);
    let commands = vec![
        time(&cadre, &ws, &["--version"], runs)?,
        time(&cadre, &ws, &["agents", "list"], runs)?,
    ];
    println!(
        "coldstart {} ({} agent files, {runs} runs after {WARMUP} warm-up)",
        cadre.display(),
        args.agents
    );
    for t in &commands {
        let s = &t.summary;
        println!(
            "  {:<20} mean {:6.2} ms  median {:6.2} ms  p95 {:6.2} ms  min {:6.2} ms  max {:6.2} ms",
            t.command, s.mean_ms, s.median_ms, s.p95_ms, s.min_ms, s.max_ms
        );
    }
    let result = ColdstartResult {
        cadre: cadre.clone(),
        agents: args.agents,
        commands,
    };
    let path = args
        .json
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/bench/coldstart.json"));
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(&result)?)?;
    println!("  json {}", path.display());
    if args.hyperfine {
        hyperfine(&cadre, &ws, runs)?;
    }
    Ok(())
}
