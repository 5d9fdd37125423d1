//! A remote child's usage over A2A counts like a local child's: the tokens the served task
//! reports in `metadata.usage` reach the caller's task record and its budget, whether the
//! remote streams (`SendStreamingMessage`) or is polled (`SendMessage` + `GetTask`), and
//! however the end and its usage race. Both nodes run in this process on the scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::Json;
use axum::routing::get;
use cadre_remote::RemoteClient;
use cadre_subagents::{AgentDefinition, Harness, RemoteProtocol, RemoteSpec, TaskStatus};
use cadre_tools::{Budget, BudgetLimits, RunContext, ToolContext, ToolRegistry, Workspace};
use cadre_types::LimitKind;
use common::{Node, Running, serve};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `spender` spends 4 500 + 500 tokens in one turn. The short delay makes its end come after
/// the stream's first snapshot (which then still says 0 tokens), as with any real model.
const SPENDER: &str = r#"
[[scripts]]
agent = "spender"
[[scripts.turns]]
delay_ms = 15
text = "spent"
usage = { input_tokens = 4500, output_tokens = 500 }
"#;

fn served_node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SPENDER).unwrap();
    let mut d = AgentDefinition::new("spender", "Spends tokens.");
    d.prompt = "You are spender.".into();
    d.workspace.mode = cadre_subagents::WorkspaceMode::Shared;
    let harness = Harness::builder()
        .model(format!("scripted:{}", script.display()))
        .workspace(dir.path())
        .without_agent_files()
        .user_agents_dir(None)
        .in_memory_sessions()
        .runtime_config(|rc| rc.max_concurrent = 256)
        .subagent(d)
        .build()
        .unwrap();
    Node { dir, harness }
}

/// A card server in front of node B that says it does not stream: a client reading it
/// sends `SendMessage` and polls, to B's own endpoint (the card names it).
async fn non_streaming_card(b: &Running) -> String {
    let card: Value = reqwest::get(format!("{}/.well-known/agent-card.json", b.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut card = card;
    card["capabilities"]["streaming"] = json!(false);
    let app = axum::Router::new().route(
        "/.well-known/agent-card.json",
        get(move || {
            let card = card.clone();
            async move { Json(card) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

struct Caller {
    harness: Harness,
    tools: ToolRegistry,
    dir: tempfile::TempDir,
}

fn caller(url: &str) -> Caller {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SPENDER).unwrap();
    let client = Arc::new(RemoteClient::new().unwrap());
    let mut d = AgentDefinition::new("far", "Runs on node B.");
    d.remote = Some(RemoteSpec {
        url: format!("{url}#spender"),
        headers: Default::default(),
        protocol: RemoteProtocol::A2a,
    });
    let harness = Harness::builder()
        .model(format!("scripted:{}", script.display()))
        .workspace(dir.path())
        .without_agent_files()
        .user_agents_dir(None)
        .in_memory_sessions()
        .runtime_config(move |rc| rc.remote = Some(client))
        .subagent(d)
        .build()
        .unwrap();
    let tools = harness.runtime().delegation_tools();
    Caller {
        harness,
        tools,
        dir,
    }
}

impl Caller {
    /// One foreground `task` for `far` in a fresh parent session whose run may spend
    /// `max_tokens`; returns that parent's budget and its session id.
    async fn delegate(&self, i: usize, max_tokens: u64) -> (Budget, String) {
        let budget = Budget::unlimited().child(BudgetLimits {
            max_tokens: Some(max_tokens),
            ..BudgetLimits::default()
        });
        let session = format!("s-parent-{i}");
        let ctx = ToolContext {
            hidden: Default::default(),
            call_id: format!("c{i}"),
            tools: Arc::new(self.harness.agent().config().tools.clone()),
            workspace: Arc::new(Workspace::new(self.dir.path()).unwrap()),
            cancel: CancellationToken::new(),
            run: Arc::new(RunContext {
                session_id: session.clone(),
                agent: "main".into(),
                model: self.harness.agent().config().model.spec.clone(),
                task_id: None,
                user_id: None,
                parent_session_id: None,
                depth: 0,
                tool_grant: cadre_tools::ToolGrant::unrestricted(),
                budget: budget.clone(),
                trace_id: "trace".into(),
                events: Arc::new(cadre_types::NullSink),
                approvals: Arc::new(cadre_engine::NonInteractiveApprovals::new(false)),
            }),
        };
        let task = self.tools.get("task").unwrap();
        let args = json!({"subagent_type": "far", "description": "spend", "prompt": "spend"});
        let out = tokio::time::timeout(Duration::from_secs(30), task.call(args, &ctx))
            .await
            .expect("the remote task ended in time")
            .unwrap();
        assert!(out.content.contains("spent"), "{}", out.content);
        (budget, session)
    }
}

/// The issue's scenario, 50 times over each way of sending: every time the remote's 5 000
/// tokens are in the task record and in the parent's budget, which they exhaust.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_remote_usage_reaches_the_task_record_and_the_budget_every_time() {
    let b = served_node();
    let opts = cadre_remote::ServeOptions {
        default_agent: Some("spender".into()),
        ..cadre_remote::ServeOptions::default()
    };
    let srv = serve(&b, opts).await;
    let polled = non_streaming_card(&srv).await;
    for (mode, url) in [("streamed", srv.url()), ("polled", polled)] {
        let a = caller(&url);
        for i in 0..50 {
            let (budget, session) = a.delegate(i, 1000).await;
            let tasks = a.harness.runtime().tasks_of(&session).await;
            assert_eq!(tasks.len(), 1, "{mode} run {i}");
            let record = &tasks[0];
            assert_eq!(record.status, TaskStatus::Completed, "{mode} run {i}");
            assert_eq!(
                (record.usage.input_tokens, record.usage.output_tokens),
                (4500, 500),
                "{mode} run {i}: the task record"
            );
            assert_eq!(
                record.usage.cost_usd(),
                None,
                "{mode} run {i}: an unpriced remote model is cost unknown, not $0"
            );
            assert_eq!(
                budget.spent().usage.total(),
                5000,
                "{mode} run {i}: the parent's budget"
            );
            assert_eq!(
                budget.exceeded(),
                Some(LimitKind::Tokens),
                "{mode} run {i}: max_tokens = 1000 is exhausted"
            );
        }
    }
    srv.stop().await.unwrap();
}
