//! `RemoteClient` against a cadre server on a loopback port: protocol discovery, A2A
//! streaming with deltas, A2A v0.3 polling, the task protocol, conversations, cancellation
//! reaching the remote task, and failures worded clearly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::Json;
use axum::routing::get;
use cadre_remote::RemoteClient;
use cadre_subagents::{
    RemoteExecutor, RemoteOutcome, RemoteProtocol, RemoteRequest, RemoteSpec, TaskStatus,
};
use cadre_types::{EndState, Event, EventEnvelope, EventSink};
use common::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Collect(Mutex<Vec<EventEnvelope>>);
impl EventSink for Collect {
    fn emit(&self, e: EventEnvelope) {
        self.0.lock().unwrap().push(e);
    }
}
impl Collect {
    fn deltas(&self) -> String {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match &e.event {
                Event::TextDelta { text } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }
}

fn request(url: &str, protocol: RemoteProtocol, prompt: &str) -> RemoteRequest {
    RemoteRequest {
        agent: "far".into(),
        spec: RemoteSpec {
            url: url.into(),
            headers: BTreeMap::new(),
            protocol,
        },
        prompt: prompt.into(),
        task_id: format!("task_{}", uuid::Uuid::new_v4()),
        session_id: "sub-local".into(),
        context_id: None,
        on_remote_id: None,
        approvals: cadre_subagents::RemoteApprovals(std::sync::Arc::new(
            cadre_engine::NonInteractiveApprovals::new(false),
        )),
    }
}

async fn run(client: &RemoteClient, req: RemoteRequest) -> (RemoteOutcome, Arc<Collect>) {
    let events = Arc::new(Collect::default());
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        client.run(req, events.clone(), CancellationToken::new()),
    )
    .await
    .unwrap();
    (out, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_discovers_a2a_streams_deltas_and_continues_the_context() {
    let n = node();
    let srv = serve(&n, options()).await;
    let client = RemoteClient::new().unwrap();
    let (out, events) = run(&client, request(&srv.url(), RemoteProtocol::Auto, "hi")).await;
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert_eq!(out.output, "echo: hi");
    assert!(
        events.deltas().contains("echo: hi"),
        "{:?}",
        events.0.lock().unwrap()
    );
    let env = events.0.lock().unwrap()[0].clone();
    assert_eq!(env.session_id, "sub-local");
    assert_eq!(env.agent, "far");
    assert!(env.task_id.unwrap().starts_with("task_"));
    let remote = out.remote_task_id.clone().unwrap();
    assert_eq!(
        n.harness
            .runtime()
            .task_record(&remote)
            .await
            .unwrap()
            .status,
        TaskStatus::Completed
    );

    let mut again = request(&srv.url(), RemoteProtocol::Auto, "more");
    again.context_id = out.context_id.clone();
    let (out2, _) = run(&client, again).await;
    assert_eq!(out2.output, "again: more");
    assert_eq!(out2.context_id, out.context_id);

    // A url fragment picks the remote agent; a failing agent's error comes back.
    let (out, _) = run(
        &client,
        request(&format!("{}#chatty", srv.url()), RemoteProtocol::A2a, "?"),
    )
    .await;
    assert_eq!(out.output, "The answer is 42.");
    let (out, _) = run(
        &client,
        request(&format!("{}#broken", srv.url()), RemoteProtocol::A2a, "?"),
    )
    .await;
    match out.state {
        EndState::Failed { error } => assert!(error.contains("the model exploded"), "{error}"),
        other => panic!("{other:?}"),
    }
    let (out, _) = run(
        &client,
        request(&format!("{}#ghost", srv.url()), RemoteProtocol::Auto, "?"),
    )
    .await;
    match out.state {
        EndState::Failed { error } => assert!(error.contains("unknown agent `ghost`"), "{error}"),
        other => panic!("{other:?}"),
    }
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_protocol_runs_and_reports_failures() {
    let n = node();
    let srv = serve(&n, options()).await;
    let client = RemoteClient::new().unwrap();
    let req = request(&srv.url(), RemoteProtocol::Tasks, "via tasks");
    let local_id = req.task_id.clone();
    let (out, _) = run(&client, req).await;
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert_eq!(out.output, "echo: via tasks");
    assert_eq!(out.remote_task_id.as_deref(), Some(local_id.as_str()));
    let (out, _) = run(
        &client,
        request(&format!("{}#broken", srv.url()), RemoteProtocol::Tasks, "x"),
    )
    .await;
    assert!(
        matches!(&out.state, EndState::Failed { error } if error.contains("the model exploded")),
        "{out:?}"
    );
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v03_card_without_streaming_is_polled() {
    let n = node();
    let model = n.harness.agent().config().model.spec.clone();
    let server = cadre_remote::Server::new(n.harness.runtime().clone(), &model, options()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // An old-style card in front of the same endpoint: v0.3, no streaming.
    let card = json!({"name": "old", "url": format!("http://{addr}/a2a"), "protocolVersion": "0.3.0",
        "capabilities": {"streaming": false}, "skills": []});
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || async move { Json(card) }),
        )
        .fallback_service(server.router());
    let task = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = RemoteClient::new().unwrap();
    let (out, _) = run(
        &client,
        request(&format!("http://{addr}"), RemoteProtocol::Auto, "poll me"),
    )
    .await;
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert_eq!(out.output, "echo: poll me");
    assert!(out.context_id.is_some());
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_run_cancels_the_remote_task() {
    let n = node();
    let srv = serve(&n, options()).await;
    let client = Arc::new(RemoteClient::new().unwrap());
    for protocol in [RemoteProtocol::A2a, RemoteProtocol::Tasks] {
        let cancel = CancellationToken::new();
        let req = request(&format!("{}#slow", srv.url()), protocol, "long job");
        let handle = tokio::spawn({
            let client = client.clone();
            let cancel = cancel.clone();
            async move { client.run(req, Arc::new(Collect::default()), cancel).await }
        });
        let rt = n.harness.runtime().clone();
        let session = srv.session.clone();
        let running = || async {
            rt.tasks_of(&session)
                .await
                .iter()
                .any(|t| t.status == TaskStatus::Running)
        };
        assert!(
            eventually_async(10, running).await,
            "{protocol:?}: the remote task started"
        );
        cancel.cancel();
        let out = tokio::time::timeout(Duration::from_secs(10), handle)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(out.state, EndState::Cancelled, "{protocol:?}");
        let rt = n.harness.runtime().clone();
        let session = srv.session.clone();
        let stopped = || async {
            rt.tasks_of(&session)
                .await
                .iter()
                .all(|t| t.status == TaskStatus::Cancelled)
        };
        assert!(
            eventually_async(5, stopped).await,
            "{protocol:?}: the remote task was cancelled"
        );
    }
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_say_what_went_wrong() {
    let client = RemoteClient::new().unwrap();
    // Nothing listens on a port just released.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for protocol in [
        RemoteProtocol::Auto,
        RemoteProtocol::Tasks,
        RemoteProtocol::A2a,
    ] {
        let (out, _) = run(
            &client,
            request(&format!("http://127.0.0.1:{port}"), protocol, "x"),
        )
        .await;
        match out.state {
            EndState::Failed { error } => {
                assert!(error.contains("cannot reach remote agent"), "{error}");
                assert!(error.to_lowercase().contains("refused"), "{error}");
            }
            other => panic!("{protocol:?}: {other:?}"),
        }
    }
    let n = node();
    let mut opts = options();
    opts.token = Some("right-token".into());
    let srv = serve(&n, opts).await;
    for protocol in [RemoteProtocol::Auto, RemoteProtocol::Tasks] {
        let mut req = request(&srv.url(), protocol, "x");
        req.spec
            .headers
            .insert("Authorization".into(), "Bearer wrong".into());
        let (out, _) = run(&client, req).await;
        assert!(
            matches!(&out.state, EndState::Failed { error } if error.contains("refused the credentials") && error.contains("HTTP 401")),
            "{out:?}"
        );
    }
    // Headers are expanded from the environment when sent.
    let mut req = request(&srv.url(), RemoteProtocol::Auto, "with auth");
    req.spec.headers.insert(
        "Authorization".into(),
        "Bearer ${CADRE_TEST_UNSET_TOKEN_VAR}".into(),
    );
    let (out, _) = run(&client, req).await;
    assert!(
        matches!(&out.state, EndState::Failed { error } if error.contains("CADRE_TEST_UNSET_TOKEN_VAR is not set")),
        "{out:?}"
    );
    srv.stop().await.unwrap();
}

/// A remote that redirects to another host is not followed there: the agent file's headers
/// (and the prompt, which a 307 would send again) stay with the host they were meant for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_host_is_not_followed() {
    use cadre_testkit::{WebPage, WebServer};
    let elsewhere = WebServer::start().await.unwrap();
    let front = WebServer::start().await.unwrap();
    for path in ["/.well-known/agent-card.json", "/tasks"] {
        front.page(path, WebPage::redirect(&elsewhere.url(path)).status(307));
    }
    let client = RemoteClient::new().unwrap();
    for protocol in [RemoteProtocol::Auto, RemoteProtocol::Tasks] {
        let mut req = request(&front.url(""), protocol, "the secret plan");
        req.spec
            .headers
            .insert("X-Api-Key".into(), "key-for-front-only".into());
        let (out, _) = run(&client, req).await;
        assert!(
            matches!(&out.state, EndState::Failed { error } if error.contains("307")),
            "{protocol:?}: {out:?}"
        );
    }
    assert!(
        elsewhere.requests().is_empty(),
        "the other host was sent {:?}",
        elsewhere.requests()
    );
    assert!(
        front
            .requests()
            .iter()
            .all(|r| r.header("x-api-key") == Some("key-for-front-only"))
    );
}
