//! Adopting remote tasks after a restart: open remote records in the store are polled on the
//! remote until they end and their end is written to the store; a task the remote does not
//! know ends `failed` as lost. Also: the remote task id reaches `on_remote_id` while a run
//! goes on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::StatusCode;
use cadre_remote::{RemoteClient, adopt_remote_tasks};
use cadre_store::{NewTask, NodeId, TaskRecord, TaskStatus, TaskStore, Transition, Transport};
use cadre_subagents::{OnRemoteId, RemoteExecutor, RemoteProtocol, RemoteRequest, RemoteSpec};
use cadre_types::{EndState, NullSink};
use common::*;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

async fn store(dir: &tempfile::TempDir) -> Arc<dyn TaskStore> {
    let s = cadre_store::open_sqlite(&dir.path().join("cadre.db"), NodeId::new("node-a"))
        .await
        .unwrap();
    Arc::new(s)
}

/// A `running` remote record, as a process that died would have left it.
async fn running_remote(store: &dyn TaskStore, url: &str, remote_id: Option<&str>) -> String {
    let mut t = NewTask::new("far", "sess-parent", "hello");
    t.transport = Transport::Remote {
        url: url.to_string(),
    };
    t.remote_headers
        .insert("Authorization".into(), "Bearer ${PATH}".into());
    let id = t.id.clone();
    store.create(&t).await.unwrap();
    store.transition(&id, Transition::running()).await.unwrap();
    if let Some(r) = remote_id {
        assert!(store.set_remote_task_id(&id, r).await.unwrap());
    }
    id
}

async fn terminal(store: &dyn TaskStore, id: &str) -> TaskRecord {
    store
        .wait_terminal(id, Duration::from_secs(8))
        .await
        .unwrap()
        .expect("the adopted task ended in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopted_a2a_task_completes_in_the_store() {
    let n = node();
    let srv = serve(&n, options()).await;
    let url = srv.url();
    let params =
        json!({"message": message("adopt me"), "configuration": {"returnImmediately": true}});
    let (_, v) = rpc(&url, "SendMessage", params).await;
    let remote = v["result"]["task"]["id"].as_str().unwrap().to_string();

    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let id = running_remote(&*store, &url, Some(&remote)).await;
    let local = running_remote(&*store, &url, None).await;
    store
        .transition(&local, Transition::completed("x"))
        .await
        .unwrap();

    let client = Arc::new(RemoteClient::new().unwrap());
    let adopted = adopt_remote_tasks(store.clone(), client).await;
    assert_eq!(adopted, vec![id.clone()]);
    let r = terminal(&*store, &id).await;
    assert_eq!(r.status, TaskStatus::Completed, "{r:?}");
    assert_eq!(r.result.as_deref(), Some("echo: adopt me"));
    assert_eq!(r.end_state.as_deref(), Some("completed"));
    assert_eq!(r.remote_task_id.as_deref(), Some(remote.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopted_task_unknown_to_the_remote_fails_as_lost() {
    let n = node();
    let srv = serve(&n, options()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let id = running_remote(&*store, &srv.url(), Some("task_nobody_knows")).await;

    let client = Arc::new(RemoteClient::new().unwrap());
    assert_eq!(
        adopt_remote_tasks(store.clone(), client).await,
        vec![id.clone()]
    );
    let r = terminal(&*store, &id).await;
    assert_eq!(r.status, TaskStatus::Failed, "{r:?}");
    let error = r.error.unwrap();
    assert!(error.starts_with("remote task lost: "), "{error}");
    assert!(error.contains("task_nobody_knows"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopted_task_protocol_task_unknown_fails_as_lost() {
    // No agent card: the task protocol; every task is unknown.
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen2 = seen.clone();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let seen = seen2.clone();
        async move {
            let auth = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            seen.lock()
                .unwrap()
                .push(format!("{} {auth}", req.uri().path()));
            (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"error": "no such task"})),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let id = running_remote(&*store, &url, None).await;
    let client = Arc::new(RemoteClient::new().unwrap());
    assert_eq!(
        adopt_remote_tasks(store.clone(), client).await,
        vec![id.clone()]
    );
    let r = terminal(&*store, &id).await;
    assert_eq!(r.status, TaskStatus::Failed, "{r:?}");
    let error = r.error.unwrap();
    assert!(error.starts_with("remote task lost: "), "{error}");
    assert!(error.contains("no such task"), "{error}");
    // Our own id was polled, with the header reference expanded.
    let seen = seen.lock().unwrap().clone();
    // (PATH is set in any test environment.)
    let path = std::env::var("PATH").unwrap();
    let wait = format!("/tasks/{id}/wait Bearer {path}");
    assert!(seen.contains(&wait), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_id_reaches_the_callback() {
    let n = node();
    let srv = serve(&n, options()).await;
    let client = RemoteClient::new().unwrap();
    for protocol in [RemoteProtocol::A2a, RemoteProtocol::Tasks] {
        let ids = Arc::new(Mutex::new(Vec::<String>::new()));
        let ids2 = ids.clone();
        let req = RemoteRequest {
            agent: "far".into(),
            spec: RemoteSpec {
                url: srv.url(),
                headers: Default::default(),
                protocol,
            },
            prompt: "hi".into(),
            task_id: format!("task_{}", uuid::Uuid::new_v4()),
            session_id: "sub-x".into(),
            context_id: None,
            on_remote_id: Some(OnRemoteId::new(move |id| {
                ids2.lock().unwrap().push(id.to_string())
            })),
            approvals: cadre_subagents::RemoteApprovals(Arc::new(
                cadre_engine::NonInteractiveApprovals::new(false),
            )),
        };
        let out = tokio::time::timeout(
            Duration::from_secs(10),
            client.run(req, Arc::new(NullSink), CancellationToken::new()),
        )
        .await
        .unwrap();
        assert_eq!(out.state, EndState::Completed, "{protocol:?}: {out:?}");
        let ids = ids.lock().unwrap().clone();
        assert_eq!(ids.len(), 1, "{protocol:?}: {ids:?}");
        assert_eq!(Some(&ids[0]), out.remote_task_id.as_ref(), "{protocol:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_remote_task_has_its_remote_id_in_the_store() {
    use cadre_subagents::{AgentDefinition, Harness};
    use cadre_tools::{RunContext, ToolContext, Workspace};
    for protocol in [RemoteProtocol::A2a, RemoteProtocol::Tasks] {
        let b = node();
        let srv = serve(&b, options()).await;
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        let script = b.dir.path().join("script.toml");
        let client = Arc::new(RemoteClient::new().unwrap());
        let mut d = AgentDefinition::new("far-slow", "Runs on node B.");
        d.remote = Some(RemoteSpec {
            url: format!("{}#slow", srv.url()),
            headers: Default::default(),
            protocol,
        });
        let harness = Harness::builder()
            .model(format!("scripted:{}", script.display()))
            .workspace(b.dir.path())
            .without_agent_files()
            .user_agents_dir(None)
            .in_memory_sessions()
            .store(store.clone())
            .runtime_config(move |rc| rc.remote = Some(client))
            .subagent(d)
            .build()
            .unwrap();
        let tools = harness.runtime().delegation_tools();
        let ctx = ToolContext {
            hidden: Default::default(),
            call_id: "c1".into(),
            tools: Arc::new(harness.agent().config().tools.clone()),
            workspace: Arc::new(Workspace::new(b.dir.path()).unwrap()),
            cancel: CancellationToken::new(),
            run: Arc::new(RunContext {
                session_id: "s-parent-a".into(),
                agent: "main".into(),
                model: harness.agent().config().model.spec.clone(),
                task_id: None,
                user_id: None,
                parent_session_id: None,
                depth: 0,
                tool_grant: cadre_tools::ToolGrant::unrestricted(),
                budget: cadre_tools::Budget::unlimited(),
                trace_id: "trace".into(),
                events: Arc::new(NullSink),
                approvals: Arc::new(cadre_engine::NonInteractiveApprovals::new(false)),
            }),
        };
        let args = json!({"subagent_type": "far-slow", "description": "slow",
            "prompt": "take long", "background": true});
        let out = tools.get("task").unwrap().call(args, &ctx).await.unwrap();
        let id = out.content.split('"').nth(1).unwrap().to_string();
        let what = format!("{protocol:?}: the remote id to be recorded");
        let r = cadre_testkit::eventually_some(&what, Duration::from_secs(5), || async {
            let r = store.get(&id).await.unwrap().unwrap();
            r.remote_task_id.is_some().then_some(r)
        })
        .await;
        assert_eq!(r.status, TaskStatus::Running, "{protocol:?}");
        let remote = r.remote_task_id.unwrap();
        if protocol == RemoteProtocol::Tasks {
            assert_eq!(remote, id);
        }
        let cancel = tools.get("task_cancel").unwrap();
        let out = cancel.call(json!({"task_id": id}), &ctx).await.unwrap();
        assert!(!out.is_error, "{}", out.content);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_of_an_adopted_task_reaches_the_remote() {
    // A task-protocol remote whose task runs until it is cancelled.
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (seen2, stopped2) = (seen.clone(), stopped.clone());
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let (seen, stopped) = (seen2.clone(), stopped2.clone());
        async move {
            let path = req.uri().path().to_string();
            seen.lock()
                .unwrap()
                .push(format!("{} {path}", req.method()));
            let status = if req.method() == axum::http::Method::POST && path.ends_with("/cancel") {
                stopped.store(true, std::sync::atomic::Ordering::SeqCst);
                "cancelled"
            } else if path.ends_with("/wait") {
                if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    "cancelled"
                } else {
                    "running"
                }
            } else {
                return (
                    StatusCode::NOT_FOUND,
                    axum::Json(json!({"error": "not here"})),
                );
            };
            (StatusCode::OK, axum::Json(json!({"status": status})))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let id = running_remote(&*store, &url, None).await;
    let client = Arc::new(RemoteClient::new().unwrap());
    assert_eq!(
        adopt_remote_tasks(store.clone(), client).await,
        vec![id.clone()]
    );
    // The cancel is requested in the store, as task_cancel or cadre serve on any node does.
    assert_eq!(
        store.request_cancel(&id).await.unwrap(),
        TaskStatus::Running
    );
    let r = terminal(&*store, &id).await;
    assert_eq!(r.status, TaskStatus::Cancelled, "{r:?}");
    let cancel = format!("POST /tasks/{id}/cancel");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter().filter(|s| **s == cancel).count(),
        1,
        "the remote saw the cancel once: {seen:?}"
    );
}
