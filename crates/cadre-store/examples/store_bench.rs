//! Store benchmark: task state transitions per second.
//!
//! `cargo run --release -p cadre-store --example store_bench -- --backend sqlite|postgres
//! [--tasks N] [--writers W] [--url URL] [--pg-setting name=value]...`
//!
//! Each of W concurrent writers takes N/W tasks through create (→ pending) → running →
//! completed, every step its own statement (the store's writer runs the statements queued
//! meanwhile as one transaction); the result is one JSON line, with how many transactions
//! the writes took. For PostgreSQL
//! without `--url`, a throwaway cluster (default durability settings, changed only by
//! `--pg-setting`) is started and stopped.

use cadre_store::testing::PgCluster;
use cadre_store::{NewTask, NodeId, TaskStore, Transition};
use std::sync::Arc;
use std::time::Instant;

struct Args {
    backend: String,
    tasks: usize,
    writers: usize,
    url: Option<String>,
    pg_settings: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        backend: "sqlite".into(),
        tasks: 10_000,
        writers: 4,
        url: None,
        pg_settings: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--backend" => a.backend = value()?,
            "--tasks" => a.tasks = value()?.parse().map_err(|e| format!("--tasks: {e}"))?,
            "--writers" => a.writers = value()?.parse().map_err(|e| format!("--writers: {e}"))?,
            "--url" => a.url = Some(value()?),
            "--pg-setting" => a.pg_settings.push(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.writers == 0 || a.tasks == 0 {
        return Err("--tasks and --writers must be positive".into());
    }
    Ok(a)
}

async fn run(store: Arc<dyn TaskStore>, tasks: usize, writers: usize) -> Result<f64, String> {
    let start = Instant::now();
    let mut jobs = Vec::new();
    for w in 0..writers {
        let store = store.clone();
        let n = tasks / writers + usize::from(w < tasks % writers);
        jobs.push(tokio::spawn(async move {
            let session = format!("bench-{w}");
            for i in 0..n {
                let id = store
                    .create(&NewTask::new("bench", &session, &format!("job {i}")))
                    .await
                    .map_err(|e| e.to_string())?
                    .id;
                store
                    .transition(&id, Transition::running())
                    .await
                    .map_err(|e| e.to_string())?;
                store
                    .transition(&id, Transition::completed("ok"))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        }));
    }
    for j in jobs {
        j.await.map_err(|e| e.to_string())??;
    }
    Ok(start.elapsed().as_secs_f64())
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args = parse_args()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut cluster = None;
    let url = match (args.backend.as_str(), &args.url) {
        (_, Some(u)) => u.clone(),
        ("sqlite", None) => format!("sqlite://{}", dir.path().join("bench.db").display()),
        ("postgres", None) => {
            let settings: Vec<&str> = args.pg_settings.iter().map(String::as_str).collect();
            let c = PgCluster::start(&settings)?;
            let url = c.create_database().await?;
            cluster = Some(c);
            url
        }
        (other, None) => return Err(format!("unknown backend {other}")),
    };
    let store = cadre_store::open(&url, NodeId::new("bench"))
        .await
        .map_err(|e| e.to_string())?;
    let backend = format!("{:?}", store.backend()).to_lowercase();
    let store = Arc::new(store);
    let secs = run(
        store.clone() as Arc<dyn TaskStore>,
        args.tasks,
        args.writers,
    )
    .await?;
    let batches = store.write_stats();
    let statements = args.tasks * 3;
    let line = serde_json::json!({
        "bench": "store_transitions",
        "backend": backend,
        "tasks": args.tasks,
        "writers": args.writers,
        "pg_settings": args.pg_settings,
        "statements": statements,
        "elapsed_s": (secs * 1000.0).round() / 1000.0,
        "transitions_per_s": (statements as f64 / secs).round(),
        "tasks_per_s": (args.tasks as f64 / secs).round(),
        "transactions": batches.batches,
        "writes_per_transaction": (batches.writes as f64 / batches.batches.max(1) as f64 * 10.0).round() / 10.0,
        "largest_transaction": batches.largest_batch,
    });
    println!("{line}");
    drop(cluster);
    Ok(())
}
