//! `cadre-bench serve-churn`: a real `cadre serve` process with a token, flooded by
//! `--connections` hostile connections from loopback (a third send nothing, a third start a
//! request head and never finish it, a third make an unauthenticated request and stay),
//! each reopened as soon as the server closes it. Meanwhile `--requests` authenticated
//! `ListTasks` calls are timed, half on a fresh connection (a client's first request) and
//! half on a kept-alive one. The target: every one answered in under 100 ms.

use crate::cli::ServeChurnArgs;
use crate::stats::{Summary, ms, summarize};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "bench-token";

/// The results.
#[derive(Debug, Serialize)]
struct Report {
    connections: usize,
    /// Hostile connections opened during the timed requests (the churn's pace).
    reopened_while_timed: usize,
    fresh: Summary,
    kept: Summary,
    all: Summary,
    /// 99th percentile over every timed request.
    p99_ms: f64,
}

/// The served process, killed when dropped.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `cadre serve` in `ws` and return it with the address it listens on.
fn start(cadre: &PathBuf, ws: &std::path::Path) -> Result<(Served, SocketAddr)> {
    let script = ws.join("script.toml");
    std::fs::write(
        &script,
        "[[scripts]]\nagent = \"main\"\n[[scripts.turns]]\ntext = \"ok\"\n",
    )?;
    let mut child = Command::new(cadre)
        .arg("--workspace")
        .arg(ws)
        .args(["--model", &format!("scripted:{}", script.display())])
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("CADRE_SERVE_TOKEN", TOKEN)
        .env("HOME", ws.join("home"))
        .env("XDG_CONFIG_HOME", ws.join("home/.config"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", cadre.display()))?;
    let stderr = child.stderr.take().context("no stderr")?;
    let served = Served(child);
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let Some(line) = lines.next() else {
            bail!("cadre serve exited before it listened");
        };
        let line = line?;
        if let Some((_, rest)) = line.split_once("listening on http://") {
            let addr = rest.split('/').next().unwrap_or_default();
            break addr.parse::<SocketAddr>()?;
        }
    };
    // Keep reading its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok((served, addr))
}

/// One authenticated `ListTasks` through `client`; its time.
async fn timed(client: &reqwest::Client, addr: SocketAddr) -> Result<Duration> {
    let started = Instant::now();
    let resp = client
        .post(format!("http://{addr}/"))
        .bearer_auth(TOKEN)
        .header("A2A-Version", "1.0")
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
        .send()
        .await?;
    let status = resp.status();
    resp.bytes().await?;
    if !status.is_success() {
        bail!("ListTasks answered {status}");
    }
    Ok(started.elapsed())
}

/// Run the measurement and print (and save) the report.
pub fn run(args: &ServeChurnArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("home/.config"))?;
    let (_served, addr) = start(&args.cadre, dir.path())?;
    // The flood runs on a runtime of its own thread, as another process's would.
    let opened = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let flood = {
        let (opened, stop, n) = (opened.clone(), stop.clone(), args.connections);
        std::thread::spawn(move || -> Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let mut set = tokio::task::JoinSet::new();
                for i in 0..n {
                    set.spawn(cadre_testkit::hostile_connection(
                        addr,
                        i,
                        opened.clone(),
                        stop.clone(),
                    ));
                }
                while set.join_next().await.is_some() {}
            });
            Ok(())
        })
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let report = rt.block_on(async {
        // Wait until the flood holds every slot and connections are being shed and reopened.
        let deadline = Instant::now() + Duration::from_secs(60);
        while opened.load(Ordering::Relaxed) < 2 * args.connections {
            if Instant::now() > deadline {
                bail!("the churn never got going");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let before = opened.load(Ordering::Relaxed);
        let kept = reqwest::Client::new();
        let (mut fresh_ms, mut kept_ms) = (Vec::new(), Vec::new());
        for round in 0..args.requests {
            if round % 2 == 0 {
                let fresh = reqwest::Client::builder()
                    .pool_max_idle_per_host(0)
                    .build()?;
                fresh_ms.push(ms(timed(&fresh, addr).await?));
            } else {
                kept_ms.push(ms(timed(&kept, addr).await?));
            }
        }
        let all: Vec<f64> = fresh_ms.iter().chain(&kept_ms).copied().collect();
        let mut sorted = all.clone();
        sorted.sort_by(f64::total_cmp);
        let p99 = sorted
            .get(((sorted.len() * 99).div_ceil(100)).saturating_sub(1))
            .copied()
            .unwrap_or_default();
        Ok(Report {
            connections: args.connections,
            reopened_while_timed: opened.load(Ordering::Relaxed) - before,
            fresh: summarize(&fresh_ms),
            kept: summarize(&kept_ms),
            all: summarize(&all),
            p99_ms: p99,
        })
    });
    stop.cancel();
    let _ = flood.join();
    let report = report?;
    println!(
        "serve-churn: {} hostile connections, {} reopened while timing",
        report.connections, report.reopened_while_timed
    );
    for (name, s) in [
        ("fresh", &report.fresh),
        ("kept", &report.kept),
        ("all", &report.all),
    ] {
        println!(
            "  {name:5} median {:.2} ms  p95 {:.2} ms  max {:.2} ms",
            s.median_ms, s.p95_ms, s.max_ms
        );
    }
    println!("  p99 {:.2} ms (target < 100 ms)", report.p99_ms);
    let path = args
        .json
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/bench/serve-churn.json"));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
    println!("  json {}", path.display());
    Ok(())
}
