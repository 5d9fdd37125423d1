//! A remote agent's approval request reaches the caller's approval channel: `RemoteClient`
//! runs an agent of a cadre server that asks (`approvals = ask`); the request names the
//! remote agent and its tool, and the answer goes back on the same task — approved, the
//! remote tool runs; refused, the remote agent is told why. Streaming and polling alike.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use axum::Json;
use axum::routing::get;
use cadre_remote::{ApprovalPolicy, RemoteClient};
use cadre_subagents::{RemoteApprovals, RemoteExecutor, RemoteProtocol, RemoteRequest, RemoteSpec};
use cadre_tools::ApprovalHandler;
use cadre_types::{ApprovalDecision, ApprovalRequest, EndState, NullSink};
use common::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Answers every request with `decision` and keeps the requests.
struct Person {
    decision: ApprovalDecision,
    asked: Mutex<Vec<ApprovalRequest>>,
}

#[async_trait]
impl ApprovalHandler for Person {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalDecision {
        self.asked.lock().unwrap().push(request);
        self.decision.clone()
    }
}

fn person(decision: ApprovalDecision) -> Arc<Person> {
    Arc::new(Person {
        decision,
        asked: Mutex::new(Vec::new()),
    })
}

fn request(url: &str, approvals: Arc<Person>) -> RemoteRequest {
    RemoteRequest {
        agent: "far".into(),
        spec: RemoteSpec {
            url: format!("{url}#asker"),
            headers: BTreeMap::new(),
            protocol: RemoteProtocol::A2a,
        },
        prompt: "run it".into(),
        task_id: format!("task_{}", uuid::Uuid::new_v4()),
        session_id: "sub-local".into(),
        context_id: None,
        on_remote_id: None,
        approvals: RemoteApprovals(approvals),
    }
}

async fn run(url: &str, who: Arc<Person>) -> cadre_subagents::RemoteOutcome {
    let client = RemoteClient::new().unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        client.run(
            request(url, who),
            Arc::new(NullSink),
            CancellationToken::new(),
        ),
    )
    .await
    .unwrap()
}

fn asking() -> cadre_remote::ServeOptions {
    let mut o = options();
    o.approvals = Some(ApprovalPolicy::Ask);
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_from_the_caller_lets_the_remote_tool_run() {
    let n = node();
    let srv = serve(&n, asking()).await;
    let who = person(ApprovalDecision::AllowOnce);
    let out = run(&srv.url(), who.clone()).await;
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert!(
        out.output.starts_with("done:") && out.output.contains("ran"),
        "{out:?}"
    );
    assert!(n.dir.path().join("ran.txt").exists(), "the remote tool ran");
    let asked = who.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "asked once: {asked:?}");
    let r = &asked[0];
    assert_eq!(r.tool, "bash");
    assert_eq!(r.subject.as_deref(), Some("echo ran | tee ran.txt"));
    assert!(
        r.agent.starts_with("asker on ")
            && r.agent.contains(&srv.url())
            && r.agent.ends_with("(via far)"),
        "the remote agent is named: {}",
        r.agent
    );
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_told_to_the_remote_agent() {
    let n = node();
    let srv = serve(&n, asking()).await;
    for (decision, says) in [
        (
            ApprovalDecision::Deny {
                feedback: Some("not today".into()),
            },
            "denied by the user: not today",
        ),
        (
            ApprovalDecision::Refused {
                policy: "subagents.background_approvals = \"deny\"".into(),
                feedback: None,
            },
            "background_approvals",
        ),
    ] {
        let out = run(&srv.url(), person(decision)).await;
        assert_eq!(out.state, EndState::Completed, "{out:?}");
        assert!(out.output.contains(says), "{out:?}");
    }
    assert!(!n.dir.path().join("ran.txt").exists());
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_remote_is_answered_too() {
    let n = node();
    let model = n.harness.agent().config().model.spec.clone();
    let server = cadre_remote::Server::new(n.harness.runtime().clone(), &model, asking()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // A card in front of the same endpoint that does not stream: the client polls.
    let card = json!({"name": "poll", "capabilities": {"streaming": false}, "skills": [],
        "supportedInterfaces": [{"url": format!("http://{addr}/"), "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0"}]});
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || async move { Json(card) }),
        )
        .fallback_service(server.router());
    let task = tokio::spawn(async move { axum::serve(listener, app).await });
    let who = person(ApprovalDecision::AllowOnce);
    let out = run(&format!("http://{addr}"), who.clone()).await;
    assert_eq!(out.state, EndState::Completed, "{out:?}");
    assert!(out.output.contains("ran"), "{out:?}");
    assert_eq!(who.asked.lock().unwrap().len(), 1);
    task.abort();
}
