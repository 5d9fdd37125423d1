//! Several OS processes on one database: this test binary re-runs itself in a worker mode
//! (`CADRE_STORE_WORKER`) selected by the `worker_entry` test.

use crate::common::{Fixture, Kind, attack, create_batch, drive, verify_wins};
use crate::sql_backends;
use cadre_store::{NodeId, TaskStatus, TaskStore, Transition};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const PER_PROCESS: usize = 500;

/// Entry point of the worker processes; does nothing in a normal test run.
#[test]
fn worker_entry() {
    let Ok(mode) = std::env::var("CADRE_STORE_WORKER") else {
        return;
    };
    let env = |k: &str| std::env::var(k).unwrap();
    // libtest has printed "test ... " without a newline; start our lines on a fresh one.
    say("");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = cadre_store::open(&env("CADRE_STORE_URL"), NodeId::new(env("CADRE_NODE")))
            .await
            .unwrap();
        match mode.as_str() {
            "race" => race_worker(&store, &env("CADRE_NODE"), &env("CADRE_OTHER")).await,
            "crash" => loop {
                let id = create_batch(&store, "s-crash", 1).await.remove(0);
                store.transition(&id, Transition::running()).await.unwrap();
                say(&format!("COMMITTED {id}"));
            },
            // Many writers at once, so their writes share transactions; a line per task
            // once its end is committed, and one when a batch held more than one write.
            "crash-batched" => {
                let store = std::sync::Arc::new(store);
                for _ in 0..32 {
                    let store = store.clone();
                    tokio::spawn(async move {
                        loop {
                            let id = create_batch(store.as_ref(), "s-crash", 1).await.remove(0);
                            store.transition(&id, Transition::running()).await.unwrap();
                            store
                                .transition(&id, Transition::completed("done"))
                                .await
                                .unwrap();
                            say(&format!("COMMITTED {id}"));
                        }
                    });
                }
                loop {
                    let largest = store.write_stats().largest_batch;
                    if largest > 1 {
                        say(&format!("SHARED {largest}"));
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                std::future::pending::<()>().await;
            }
            "hold" => {
                let id = create_batch(&store, "s-hold", 1).await.remove(0);
                store.transition(&id, Transition::running()).await.unwrap();
                say(&format!("HELD {id}"));
                // Held until the parent kills this process.
                std::future::pending::<()>().await;
            }
            other => panic!("unknown worker mode {other}"),
        }
    });
}

/// One line to the parent, flushed at once.
fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

async fn race_worker(store: &dyn TaskStore, me: &str, other: &str) {
    let mine = create_batch(store, &format!("s-{me}"), PER_PROCESS).await;
    let theirs = cadre_testkit::eventually_some(
        "the other worker's tasks",
        Duration::from_secs(60),
        || async {
            let t = store.list_by_session(&format!("s-{other}")).await.unwrap();
            (t.len() == PER_PROCESS).then(|| t.into_iter().map(|r| r.id).collect::<Vec<_>>())
        },
    )
    .await;
    let (a, b) = tokio::join!(drive(store, &mine), attack(store, &theirs));
    for (id, st) in a.into_iter().chain(b) {
        say(&format!("WON {id} {st}"));
    }
    say("DONE");
}

/// A worker process, killed when dropped.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_worker(mode: &str, url: &str, node: &str, other: &str) -> Worker {
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(exe)
        .args([
            "--exact",
            "processes::worker_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CADRE_STORE_WORKER", mode)
        .env("CADRE_STORE_URL", url)
        .env("CADRE_NODE", node)
        .env("CADRE_OTHER", other)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    Worker(child)
}

/// Lines with `prefix` from the worker's stdout, read until `stop` says so or EOF.
async fn read_lines(
    w: &mut Worker,
    prefix: &'static str,
    stop: impl Fn(&[String]) -> bool + Send + 'static,
) -> (Vec<String>, BufReader<std::process::ChildStdout>) {
    let out = w.0.stdout.take().unwrap();
    tokio::task::spawn_blocking(move || {
        let mut r = BufReader::new(out);
        let mut got = Vec::new();
        let mut line = String::new();
        while !stop(&got) {
            line.clear();
            if r.read_line(&mut line).unwrap() == 0 {
                break;
            }
            let line = line.trim_end();
            if prefix.is_empty() {
                got.push(line.to_string());
            } else if let Some((_, rest)) = line.split_once(prefix) {
                got.push(rest.to_string());
            }
        }
        (got, r)
    })
    .await
    .unwrap()
}

async fn two_processes_race(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    // All three processes start on a database that does not exist yet.
    let mut wa = spawn_worker("race", &fx.url, "node-a", "node-b");
    let mut wb = spawn_worker("race", &fx.url, "node-b", "node-a");
    let parent = fx.open_sql("parent").await;
    let (ra, rb) = tokio::join!(
        read_lines(&mut wa, "", |_| false),
        read_lines(&mut wb, "", |_| false)
    );
    let lines: Vec<String> = ra.0.into_iter().chain(rb.0).collect();
    assert_eq!(
        lines.iter().filter(|l| *l == "DONE").count(),
        2,
        "{lines:?}"
    );
    let wins: Vec<(String, TaskStatus)> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("WON "))
        .map(|l| {
            let (id, st) = l.split_once(' ').unwrap();
            (id.to_string(), TaskStatus::parse(st).unwrap())
        })
        .collect();
    let mut all = Vec::new();
    for s in ["s-node-a", "s-node-b"] {
        all.extend(
            parent
                .list_by_session(s)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.id),
        );
    }
    assert_eq!(all.len(), 2 * PER_PROCESS);
    verify_wins(&parent, &all, &wins).await;
    assert_eq!(parent.integrity_check().await.unwrap(), "ok");
}

async fn killed_writer_leaves_intact_db(kind: Kind) {
    killed_writer_loses_nothing_it_reported(kind, "crash", TaskStatus::Running).await;
}

/// The same with writes of many tasks sharing transactions (group commit): every write a
/// caller was told is done survives the kill.
async fn killed_group_committing_writer_loses_nothing_reported(kind: Kind) {
    killed_writer_loses_nothing_it_reported(kind, "crash-batched", TaskStatus::Completed).await;
}

/// A worker in `mode` says `COMMITTED <id>` once the task's write returned; kill it with
/// SIGKILL mid-write and check every such task is stored with `status`.
async fn killed_writer_loses_nothing_it_reported(kind: Kind, mode: &str, status: TaskStatus) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    drop(fx.open_sql("parent").await);
    let mut w = spawn_worker(mode, &fx.url, "node-crash", "-");
    let batched = mode == "crash-batched";
    let (lines, rest) = read_lines(&mut w, "", move |g| {
        let committed = g.iter().filter(|l| l.starts_with("COMMITTED ")).count();
        committed >= 300 && (!batched || g.iter().any(|l| l.starts_with("SHARED ")))
    })
    .await;
    w.0.kill().unwrap(); // SIGKILL, mid-write
    w.0.wait().unwrap();
    assert!(
        !batched || lines.iter().any(|l| l.starts_with("SHARED ")),
        "the worker's writes never shared a transaction"
    );
    // Lines already printed before the kill are committed too.
    let tail =
        tokio::task::spawn_blocking(move || rest.lines().map_while(Result::ok).collect::<Vec<_>>())
            .await
            .unwrap();
    let committed: Vec<String> = lines
        .iter()
        .chain(&tail)
        .filter_map(|l| l.strip_prefix("COMMITTED ").map(str::to_string))
        .collect();
    assert!(committed.len() >= 300, "{} tasks reported", committed.len());
    let store = fx.open_sql("parent").await;
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
    for id in &committed {
        let rec = store
            .get(id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{id} lost"));
        assert_eq!(rec.status, status, "{id}");
    }
    // The dead process's running tasks are recovered by the next start of its node.
    let failed = store
        .recover_node(&NodeId::new("node-crash"))
        .await
        .unwrap();
    if status == TaskStatus::Running {
        assert!(committed.iter().all(|id| failed.contains(id)));
    }
}

async fn recovery_spares_live_sibling(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let me = fx.open_sql("node-shared").await;
    let mut w = spawn_worker("hold", &fx.url, "node-shared", "-");
    let (held, _rest) = read_lines(&mut w, "HELD ", |g| !g.is_empty()).await;
    let id = held[0].clone();
    assert!(me.recover_node(me.node_id()).await.unwrap().is_empty());
    assert_eq!(
        me.get(&id).await.unwrap().unwrap().status,
        TaskStatus::Running
    );
    drop(w); // kills the sibling
    assert_eq!(me.recover_node(me.node_id()).await.unwrap(), vec![id]);
}

sql_backends!(
    two_processes_race,
    killed_writer_leaves_intact_db,
    killed_group_committing_writer_loses_nothing_reported,
    recovery_spares_live_sibling
);
