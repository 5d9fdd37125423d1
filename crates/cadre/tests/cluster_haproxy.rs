//! The deployment of `examples/deploy/` under faults, with real processes on loopback: a
//! throwaway PostgreSQL, HAProxy running `examples/deploy/haproxy.cfg` (only its `bind`
//! port and `server` addresses replaced), three `cadre serve` nodes and the fake model. 49
//! task-protocol submissions and 23 A2A `SendMessage` calls go through HAProxy while node 2
//! is killed with SIGKILL and node 3 is drained with SIGTERM and started again (a rolling
//! restart). Afterwards every accepted submission is terminal and correct, none is lost,
//! none ran twice (one first-turn request per task at the model), and every refusal the
//! client saw (HAProxy sends a node's refusal to another node, so usually none) is a 503
//! with `Retry-After`, counted. Prints p50/p99 submission latency and how long the killed node's tasks took to finish elsewhere.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use cadre_testkit::{MockReply, MockServer, OpenAiStream, RecordedRequest, poll_some};
use serde_json::{Value, json};
use serve_support::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "cluster-test-token";
const NODE_CONFIG: &str = "[serve]\ndefault_agent = \"worker\"\napprovals = \"approve\"\n\
grace_secs = 1\nallowed_hosts = [\"cadre.internal\", \"127.0.0.1\"]\n\n\
[store]\nheartbeat_secs = 1\nsweep_secs = 1\norphan_timeout_secs = 3\n\n\
[subagents]\non_orphan = \"resume\"\n";

/// HAProxy's binary, or `None` (loudly) when it is missing outside CI.
fn haproxy() -> Option<PathBuf> {
    let found = ["/usr/sbin/haproxy", "/usr/local/sbin/haproxy"]
        .iter()
        .map(PathBuf::from)
        .chain(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|d| d.join("haproxy")),
        )
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "haproxy missing in CI"
        );
        eprintln!("\n!!!!!!!! SKIPPED (haproxy not installed)\n");
    }
    found
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// `examples/deploy/haproxy.cfg` with its `bind` on `front` and its servers on `nodes`.
fn haproxy_config(front: u16, nodes: &[u16]) -> String {
    let text = std::fs::read_to_string(repo().join("examples/deploy/haproxy.cfg")).unwrap();
    let (mut binds, mut servers) = (0, 0);
    let out: Vec<String> = text
        .lines()
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["bind", _, rest @ ..] => {
                    binds += 1;
                    format!("    bind 127.0.0.1:{front} {}", rest.join(" "))
                }
                ["server", name, _, rest @ ..] => {
                    let port = nodes[servers];
                    servers += 1;
                    format!("    server {name} 127.0.0.1:{port} {}", rest.join(" "))
                }
                _ => line.to_string(),
            }
        })
        .collect();
    assert_eq!((binds, servers), (1, nodes.len()), "{text}");
    out.join("\n") + "\n"
}

/// A running HAProxy; killed when dropped.
struct Balancer(Child);

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The job a request is about: `job-N` in its user message.
fn job_of(r: &RecordedRequest) -> String {
    let text = r.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    let start = text.find("job-").unwrap_or(0);
    text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect()
}

/// Turns asked at the model, per job.
type Asked = Arc<Mutex<HashMap<String, usize>>>;

/// Each job reads the notes, then answers after a while (so kills and drains find work
/// in flight); the first turns and the second turns asked, per job.
async fn model() -> (MockServer, Asked, Asked) {
    let firsts = Arc::new(Mutex::new(HashMap::new()));
    let seconds = Arc::new(Mutex::new(HashMap::new()));
    let (seen, seen_second) = (firsts.clone(), seconds.clone());
    let mock = MockServer::start_with(Arc::new(move |r: &RecordedRequest| {
        let job = job_of(r);
        if first_turn(r) {
            *seen.lock().unwrap().entry(job).or_insert(0) += 1;
            return OpenAiStream::new()
                .role()
                .tool_call(0, "call_1", "read_file", r#"{"path": "notes.txt"}"#)
                .finish("tool_calls")
                .usage(30, 10, 0)
                .done()
                .into_reply();
        }
        *seen_second.lock().unwrap().entry(job.clone()).or_insert(0) += 1;
        let notes = if r.body.to_string().contains("the notes say 42") {
            "42"
        } else {
            "nothing"
        };
        let reply: MockReply = OpenAiStream::new()
            .role()
            .text(&format!("done {job}, the notes say {notes}"))
            .finish("stop")
            .usage(40, 5, 0)
            .done()
            .into_reply();
        reply.delayed(Duration::from_millis(800))
    }))
    .await
    .unwrap();
    (mock, firsts, seconds)
}

fn node(ws: &Path, db: &str, mock: &MockServer, port: u16) -> Served {
    let base = mock.openai_base_url();
    Served::start_at(
        ws,
        "openai:mock-model",
        &[
            ("OPENAI_BASE_URL", base.as_str()),
            ("OPENAI_API_KEY", "test-key"),
            ("CADRE_STORE_URL", db),
            ("CADRE_SERVE_TOKEN", TOKEN),
        ],
        &format!("127.0.0.1:{port}"),
    )
}

async fn until_ready(url: &str) {
    if !ready_within(url, Duration::from_secs(20)).await {
        let last = match reqwest::get(format!("{url}/readyz")).await {
            Ok(r) => format!("{} {}", r.status(), r.text().await.unwrap_or_default()),
            Err(e) => e.to_string(),
        };
        panic!("{url} never ready: {last}");
    }
}

/// Whether `url/readyz` answers 200 within `within`.
async fn ready_within(url: &str, within: Duration) -> bool {
    poll_some(within, || async {
        let r = reqwest::get(format!("{url}/readyz")).await.ok()?;
        (r.status() == 200).then_some(())
    })
    .await
    .is_some()
}

/// One submission through the balancer: (job, A2A task id if any, status, latency).
/// Job, A2A task id, status, latency, whether a refusal carried `Retry-After`.
type Outcome = (String, Option<String>, u16, Duration, bool);

async fn submit(front: String, job: String, a2a: bool) -> Outcome {
    let client = reqwest::Client::new();
    let input = format!("{job}: what do the notes say?");
    let t0 = Instant::now();
    let request = if a2a {
        client
            .post(format!("{front}/"))
            .header("A2A-Version", "1.0")
            .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                "message": {"messageId": format!("msg-{job}"), "role": "ROLE_USER",
                            "parts": [{"text": input}]},
                "configuration": {"returnImmediately": true}}}))
    } else {
        client
            .post(format!("{front}/tasks"))
            .json(&json!({"task_id": job, "input": input}))
    };
    let r = request.bearer_auth(TOKEN).send().await.unwrap();
    let status = r.status().as_u16();
    let retry_after = r.headers().contains_key("retry-after");
    let v: Value = r.json().await.unwrap_or(Value::Null);
    let took = t0.elapsed();
    let id = v["result"]["task"]["id"].as_str().map(str::to_string);
    let ok = if a2a {
        id.is_some()
    } else {
        v["task_id"] == job
    };
    // An answer without the task counts as a refusal, whatever its status.
    let status = if ok || status != 200 { status } else { 0 };
    (job, id, status, took, retry_after)
}

/// Submit `jobs` (A2A for the `a2a` ones) at once through the balancer.
async fn phase(front: &str, jobs: std::ops::Range<usize>, a2a: &[usize]) -> Vec<Outcome> {
    let mut set = tokio::task::JoinSet::new();
    for n in jobs {
        set.spawn(submit(
            front.to_string(),
            format!("job-{n}"),
            a2a.contains(&n),
        ));
    }
    let mut out = Vec::new();
    while let Some(o) = set.join_next().await {
        out.push(o.unwrap());
    }
    out
}

/// The job's record through the balancer once terminal, or `None`.
async fn finished(front: &str, job: &str, a2a: Option<&str>) -> Option<Value> {
    let client = reqwest::Client::new();
    let v: Value = match a2a {
        Some(id) => {
            let call =
                json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}});
            let r = client
                .post(format!("{front}/"))
                .header("A2A-Version", "1.0");
            let v: Value = r
                .json(&call)
                .bearer_auth(TOKEN)
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let state = v["result"]["status"]["state"].as_str()?.to_string();
            let terminal = ["COMPLETED", "FAILED", "CANCELED", "REJECTED"];
            if !terminal.iter().any(|t| state.ends_with(t)) {
                return None;
            }
            v
        }
        None => {
            let r = client
                .get(format!("{front}/tasks/{job}"))
                .bearer_auth(TOKEN);
            let v: Value = r.send().await.ok()?.json().await.ok()?;
            v.get("complete")?;
            v
        }
    };
    Some(v)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
async fn three_nodes_behind_haproxy_lose_nothing_through_a_kill_and_a_rolling_restart() {
    let Some(haproxy) = haproxy() else { return };
    let Some(db) = database().await else { return };
    let started = Instant::now();
    let (mock, firsts, seconds) = model().await;
    let files = [
        ("notes.txt", "the notes say 42\n"),
        (
            ".cadre/agents/worker.md",
            "---\nname: worker\ndescription: Works.\nworkspace: {mode: shared}\n---\nYou work.\n",
        ),
        (".cadre/config.toml", NODE_CONFIG),
    ];
    let wss: Vec<_> = (0..3).map(|_| workspace(&files)).collect();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes: Vec<Served> = (0..3)
        .map(|i| node(wss[i].path(), &db, &mock, ports[i]))
        .collect();
    for n in &nodes {
        until_ready(&n.url).await;
    }
    let front_port = free_port();
    let cfg = wss[0].path().join("haproxy.cfg");
    std::fs::write(&cfg, haproxy_config(front_port, &ports)).unwrap();
    // Its log (one line a request, and every server going down or up) is shown on failure.
    let log = wss[0].path().join("haproxy.log");
    let _balancer = Balancer(
        Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let front = format!("http://127.0.0.1:{front_port}");
    let balancer_log = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        ready_within(&front, Duration::from_secs(20)).await,
        "HAProxy never ready:\n{}",
        balancer_log()
    );

    let mut outcomes = phase(&front, 0..20, &[1, 7, 13, 19]).await;
    // Node 2 is lost with its tasks in flight: killed once every job so far is in its
    // second turn, which it starts only after its first is recorded, so that none of
    // them may ask its first turn again. (A kill between an answer and its record loses
    // that answer with the node, and it is asked again: that window is not what this
    // counts.)
    let accepted: Vec<String> = (outcomes.iter().filter(|o| o.2 == 200))
        .map(|o| o.0.clone())
        .collect();
    let in_second = poll_some(Duration::from_secs(30), || async {
        let seconds = seconds.lock().unwrap();
        accepted
            .iter()
            .all(|job| seconds.contains_key(job))
            .then_some(())
    })
    .await;
    assert!(
        in_second.is_some(),
        "not all in their second turn: {seconds:?}"
    );
    nodes[1].kill();
    let killed_at = Instant::now();
    outcomes.extend(phase(&front, 20..40, &[21, 27, 33, 39]).await);
    // Rolling restart of node 3: drained while submissions keep coming, then started again
    // on its port.
    nodes[2].signal("TERM");
    outcomes.extend(phase(&front, 40..50, &[]).await);
    assert!(
        nodes[2].wait_exit(Duration::from_secs(20)),
        "{}",
        nodes[2].stderr()
    );
    nodes[2] = node(wss[2].path(), &db, &mock, ports[2]);
    until_ready(&nodes[2].url).await;
    outcomes.extend(phase(&front, 50..60, &[51, 55, 59]).await);
    outcomes.extend(phase(&front, 60..72, &(60..72).collect::<Vec<_>>()).await);

    // The client saw no refusal.
    assert_eq!(outcomes.len(), 72);
    // A refusal the client sees is a 503 with Retry-After, never anything else; counted.
    // (HAProxy's retries send a node's refusal elsewhere; what is left is the moment no
    // node is in rotation, answered by HAProxy itself, with the Retry-After its config adds.)
    let refused: Vec<Outcome> = outcomes.iter().filter(|o| o.2 != 200).cloned().collect();
    assert!(
        refused.iter().all(|o| o.2 == 503 && o.4),
        "refused otherwise than 503 + Retry-After: {refused:?}\n{}",
        balancer_log()
    );
    outcomes.retain(|o| o.2 == 200);

    // Every accepted submission ends, correct; the killed node's are finished elsewhere.
    // Each job's end is noted when it is first seen, so its time is when it finished.
    let seen: Mutex<HashMap<String, (Value, Duration)>> = Mutex::new(HashMap::new());
    let pending = || {
        let seen = seen.lock().unwrap();
        outcomes
            .iter()
            .filter(|o| !seen.contains_key(&o.0))
            .collect::<Vec<_>>()
    };
    let all_ended = poll_some(Duration::from_secs(60), || async {
        for (job, a2a, ..) in pending() {
            if let Some(v) = finished(&front, job, a2a.as_deref()).await {
                seen.lock()
                    .unwrap()
                    .insert(job.clone(), (v, killed_at.elapsed()));
            }
        }
        pending().is_empty().then_some(())
    })
    .await;
    assert!(
        all_ended.is_some(),
        "not finished within 60 s: {:?}\n{}\n{}",
        pending(),
        nodes[0].stderr(),
        nodes[2].stderr()
    );
    let done = seen.into_inner().unwrap();
    let mut resumed = Vec::new();
    for (job, (v, at)) in &done {
        let text = v.to_string();
        assert!(
            text.contains(&format!("done {job}, the notes say 42")),
            "{job}: {v}"
        );
        if v.get("a2a").is_none() && v["status"].is_string() {
            assert_eq!(v["status"], "success", "{job}: {v}");
            if v["resumed"]["times"].as_u64().unwrap_or(0) > 0 {
                resumed.push(*at);
            }
        } else {
            assert!(
                v["result"]["status"]["state"]
                    .as_str()
                    .unwrap()
                    .ends_with("COMPLETED"),
                "{job}: {v}"
            );
        }
    }
    // None ran twice: each job's first turn was asked once.
    let firsts = firsts.lock().unwrap().clone();
    for (job, ..) in &outcomes {
        assert_eq!(firsts.get(job), Some(&1), "{job}: first turns {firsts:?}");
    }

    let mut latencies: Vec<Duration> = outcomes.iter().map(|o| o.3).collect();
    latencies.sort();
    resumed.sort();
    eprintln!(
        "cluster: {} submissions accepted ({} A2A), {} refused (503 + Retry-After), 0 lost, 0 twice; latency p50 {:?} p99 {:?}; \
         {} tasks resumed on another node, finished {:?}..{:?} after the SIGKILL; whole run {:?}",
        outcomes.len(),
        outcomes.iter().filter(|o| o.1.is_some()).count(),
        refused.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        resumed.len(),
        resumed.first(),
        resumed.last(),
        started.elapsed()
    );
}
