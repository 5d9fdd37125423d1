//! `cadre serve` behind a load balancer: `/healthz` and `/readyz` (unauthenticated),
//! readiness that follows the store (a throwaway PostgreSQL stopped and started again) and
//! the drain on SIGTERM, quick `503` + `Retry-After` refusals while the store is down or the
//! node drains, and a drained node's durable task handed to another node at once (long
//! before the orphan timeout), finished there exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use cadre_testkit::{MockServer, RecordedRequest, eventually, eventually_some, poll_some};
use serde_json::{Value, json};
use serve_support::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const TOKEN: &str = "drain-test-token";

fn workspace_with(store: &str) -> tempfile::TempDir {
    workspace(&[
        ("notes.txt", "the notes say 42\n"),
        (
            ".cadre/agents/worker.md",
            "---\nname: worker\ndescription: Works.\nworkspace: {mode: shared}\n---\nYou work.\n",
        ),
        (
            ".cadre/config.toml",
            &format!(
                "[serve]\ndefault_agent = \"worker\"\napprovals = \"approve\"\ngrace_secs = 1\n\n\
                 [store]\n{store}\n\n[subagents]\non_orphan = \"resume\"\n"
            ),
        ),
    ])
}

fn start(ws: &std::path::Path, db: &str, mock: &MockServer) -> Served {
    let base = mock.openai_base_url();
    Served::start(
        ws,
        "openai:mock-model",
        &[
            ("OPENAI_BASE_URL", base.as_str()),
            ("OPENAI_API_KEY", "test-key"),
            ("CADRE_STORE_URL", db),
            ("CADRE_SERVE_TOKEN", TOKEN),
        ],
    )
}

/// `GET /readyz` without a token: (status, body).
async fn readyz(node: &str) -> (u16, Value) {
    let r = reqwest::get(format!("{node}/readyz")).await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Poll `/readyz` until its status is `want`; how long that took (bounded by `within`).
async fn ready_becomes(node: &str, want: u16, within: Duration) -> (Duration, Value) {
    let t0 = Instant::now();
    let body = eventually_some(&format!("/readyz to answer {want}"), within, || async {
        let (status, body) = readyz(node).await;
        (status == want).then_some(body)
    })
    .await;
    (t0.elapsed(), body)
}

fn authed(rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    rb.header("Authorization", format!("Bearer {TOKEN}"))
}

/// A submission on the task protocol: (status, Retry-After, body).
async fn submit(node: &str, input: &str) -> (u16, Option<String>, Value) {
    let r = authed(reqwest::Client::new().post(format!("{node}/tasks")))
        .json(&json!({"input": input}))
        .send()
        .await
        .unwrap();
    answered(r).await
}

/// A blocking A2A `SendMessage`: (status, Retry-After, body).
async fn send_message(node: &str, text: &str) -> (u16, Option<String>, Value) {
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {
        "message": {"messageId": uuid_like(text), "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"returnImmediately": true}}});
    let r = authed(reqwest::Client::new().post(format!("{node}/")))
        .header("A2A-Version", "1.0")
        .json(&call)
        .send()
        .await
        .unwrap();
    answered(r).await
}

fn uuid_like(text: &str) -> String {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    format!("m-{}-{}", SEQ.fetch_add(1, Ordering::SeqCst), text.len())
}

async fn answered(r: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_store_and_a_store_down_is_a_quick_503_every_time() {
    if !postgres_installed() {
        return;
    }
    // A cluster of its own: this test stops and starts it.
    let pg = cadre_store::testing::PgCluster::start(&["fsync=off"]).unwrap();
    let db = pg.create_database().await.unwrap();
    let mock = MockServer::start_with(Arc::new(|_: &RecordedRequest| answer("done")))
        .await
        .unwrap();
    let ws = workspace_with("connect_timeout_secs = 2");
    let node = start(ws.path(), &db, &mock);

    // Unauthenticated and cheap; the rest still wants the token.
    let alive = reqwest::get(format!("{}/healthz", node.url)).await.unwrap();
    assert_eq!(alive.status(), 200);
    ready_becomes(&node.url, 200, Duration::from_secs(10)).await;
    let anon = reqwest::Client::new()
        .post(format!("{}/tasks", node.url))
        .json(&json!({"input": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anon.status(), 401);
    // A Host naming another server is refused on the probes too.
    let foreign = reqwest::Client::new()
        .get(format!("{}/readyz", node.url))
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);

    pg.pause().unwrap();
    let (took, body) = ready_becomes(&node.url, 503, Duration::from_secs(5)).await;
    assert!(
        took < Duration::from_secs(1),
        "not ready only after {took:?}"
    );
    assert_eq!(body["ready"], false, "{body}");
    assert_eq!(body["reason"], "store unreachable", "{body}");

    // Every submission is refused quickly, with a status a load balancer retries on and
    // Retry-After; none is accepted.
    let bound = Duration::from_secs(2) + Duration::from_millis(500);
    for i in 0..20 {
        let t0 = Instant::now();
        let (status, retry, body) = if i % 4 == 3 {
            send_message(&node.url, &format!("a2a {i}")).await
        } else {
            submit(&node.url, &format!("task {i}")).await
        };
        let took = t0.elapsed();
        assert_eq!(status, 503, "submission {i}: {body}");
        assert!(
            retry.is_some(),
            "submission {i} without Retry-After: {body}"
        );
        assert!(took < bound, "submission {i} answered after {took:?}");
    }
    assert_eq!(mock.requests().len(), 0, "work was started without a store");

    pg.resume().unwrap();
    let (took, _) = ready_becomes(&node.url, 200, Duration::from_secs(5)).await;
    assert!(
        took < Duration::from_secs(1),
        "ready again only after {took:?}"
    );
    let (status, _, body) = submit(&node.url, "after the outage").await;
    assert_eq!(status, 200, "{body}\n{}", node.stderr());
}

/// A model whose first turn reads the notes, whose first second turn (the draining node's)
/// does not answer in the test's time, and whose next one does; and the second turns.
async fn slow_second_turn_model() -> (MockServer, Arc<AtomicUsize>) {
    let second_turns = Arc::new(AtomicUsize::new(0));
    let seen = second_turns.clone();
    let mock = MockServer::start_with(Arc::new(move |r: &RecordedRequest| {
        if first_turn(r) {
            return call("read_file", json!({"path": "notes.txt"}));
        }
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            return answer("never said").delayed(Duration::from_secs(600));
        }
        answer("the answer is 42")
    }))
    .await
    .unwrap();
    (mock, second_turns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_node_refuses_new_work_and_hands_its_durable_task_to_another_node() {
    let Some(db) = database().await else { return };
    let (mock, second_turns) = slow_second_turn_model().await;
    // Adoption after the orphan timeout would take 30 s; a handed-over task is taken at the
    // next look (every second).
    let liveness = "heartbeat_secs = 1\nsweep_secs = 1\norphan_timeout_secs = 30";
    let (a_ws, b_ws) = (workspace_with(liveness), workspace_with(liveness));
    let mut a = start(a_ws.path(), &db, &mock);
    let b = start(b_ws.path(), &db, &mock);
    ready_becomes(&a.url, 200, Duration::from_secs(10)).await;

    let (status, _, v) = submit(&a.url, "what do the notes say?").await;
    assert_eq!(status, 200, "{v}");
    let id = v["task_id"].as_str().unwrap().to_string();
    eventually(
        "the task's second turn",
        Duration::from_secs(30),
        || async { second_turns.load(Ordering::SeqCst) > 0 },
    )
    .await;

    a.signal("TERM");
    let drained_at = Instant::now();
    let (took, body) = ready_becomes(&a.url, 503, Duration::from_secs(5)).await;
    assert!(
        took < Duration::from_secs(1),
        "not ready only after {took:?}"
    );
    assert_eq!(body["reason"], "draining", "{body}");
    let (status, retry, body) = submit(&a.url, "too late").await;
    assert_eq!((status, retry.is_some()), (503, true), "{body}");
    let (status, retry, body) = send_message(&a.url, "too late too").await;
    assert_eq!((status, retry.is_some()), (503, true), "{body}");
    assert!(a.wait_exit(Duration::from_secs(20)), "{}", a.stderr());

    // B adopts it at once and finishes it from its checkpoint.
    let look = || async {
        let v: Value = authed(reqwest::Client::new().get(format!("{}/tasks/{id}", b.url)))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v.get("complete").is_some().then_some(v)
    };
    let Some(rec) = poll_some(Duration::from_secs(20), look).await else {
        panic!("not adopted within 20 s\n{}\n{}", a.stderr(), b.stderr());
    };
    let adopted_after = drained_at.elapsed();
    assert_eq!(rec["status"], "success", "{rec}\n{}", b.stderr());
    assert!(rec["result"].as_str().unwrap().contains("42"), "{rec}");
    assert_eq!(rec["resumed"]["times"], 1, "{rec}");
    assert!(
        adopted_after < Duration::from_secs(15),
        "finished only {adopted_after:?} after the drain"
    );
    let firsts = mock.requests().iter().filter(|r| first_turn(r)).count();
    assert_eq!(firsts, 1, "the task's first turn was asked again");
    assert_eq!(second_turns.load(Ordering::SeqCst), 2);
    eprintln!("handed over and finished {adopted_after:?} after SIGTERM");
}
