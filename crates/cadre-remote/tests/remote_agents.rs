//! Remote agents through the delegation tools of a parent on node A, against a cadre server
//! on node B (both in this process): `agent_spawn` and `agent_send` continue one remote
//! conversation, `task` in the background with `task_output`, and a foreground `task` that
//! outlives its timeout moves to the background and is then stopped with `task_cancel`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_remote::RemoteClient;
use cadre_subagents::{AgentDefinition, Harness, RemoteProtocol, RemoteSpec, TaskStatus};
use cadre_tools::{RunContext, ToolContext, ToolOutput, ToolRegistry, Workspace};
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

struct NodeA {
    harness: Harness,
    tools: ToolRegistry,
    ctx: ToolContext,
}

impl NodeA {
    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        let t = self.tools.get(tool).unwrap();
        tokio::time::timeout(Duration::from_secs(30), t.call(args, &self.ctx))
            .await
            .unwrap()
            .unwrap()
    }
}

fn node_a(b: &Node, url: &str, protocol: RemoteProtocol) -> NodeA {
    let script = b.dir.path().join("script.toml");
    let client = Arc::new(RemoteClient::new().unwrap());
    let mut builder = Harness::builder()
        .model(format!("scripted:{}", script.display()))
        .workspace(b.dir.path())
        .without_agent_files()
        .user_agents_dir(None)
        .in_memory_sessions()
        .runtime_config(move |rc| {
            rc.remote = Some(client);
            rc.task_timeout = Some(Duration::from_secs(1));
        });
    for (name, agent) in [("far", "echo"), ("far-slow", "slow")] {
        let mut d = AgentDefinition::new(name, "Runs on node B.");
        d.remote = Some(RemoteSpec {
            url: format!("{url}#{agent}"),
            headers: Default::default(),
            protocol,
        });
        builder = builder.subagent(d);
    }
    let harness = builder.build().unwrap();
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
            events: Arc::new(cadre_types::NullSink),
            approvals: Arc::new(cadre_engine::NonInteractiveApprovals::new(false)),
        }),
    };
    NodeA {
        harness,
        tools,
        ctx,
    }
}

fn line<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no `{key}` in {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_and_send_continue_one_remote_conversation() {
    let b = node();
    let srv = serve(&b, options()).await;
    let a = node_a(&b, &srv.url(), RemoteProtocol::Auto);
    let out = a
        .call("agent_spawn", json!({"agent_id": "far", "task": "one"}))
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("echo: one"), "{}", out.content);
    let key = line(&out.content, "agent_key:").to_string();
    let out = a
        .call("agent_send", json!({"agent_key": key, "message": "two"}))
        .await;
    assert!(out.content.contains("again: two"), "{}", out.content);

    let out = a
        .call(
            "task",
            json!({"subagent_type": "far", "description": "bg", "prompt": "later", "background": true}),
        )
        .await;
    let id = out.content.split('"').nth(1).unwrap().to_string();
    let out = a.call("task_output", json!({"task_id": id})).await;
    assert!(out.content.contains("echo: later"), "{}", out.content);
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_task_moves_to_the_background_and_task_cancel_stops_it_remotely() {
    for protocol in [RemoteProtocol::A2a, RemoteProtocol::Tasks] {
        let b = node();
        let srv = serve(&b, options()).await;
        let a = node_a(&b, &srv.url(), protocol);
        let out = a
            .call(
                "task",
                json!({"subagent_type": "far-slow", "description": "slow", "prompt": "take long"}),
            )
            .await;
        assert!(
            out.content.contains("continues in the background"),
            "{}",
            out.content
        );
        let id = out.content.split('"').nth(1).unwrap().to_string();
        let out = a.call("task_cancel", json!({"task_id": id})).await;
        assert!(!out.is_error, "{}", out.content);
        let rt = a.harness.runtime().clone();
        assert!(
            eventually_async(10, || async {
                rt.task_record(&id).await.unwrap().status == TaskStatus::Cancelled
            })
            .await
        );
        let brt = b.harness.runtime().clone();
        let session = srv.session.clone();
        let stopped = || async {
            let tasks = brt.tasks_of(&session).await;
            tasks.len() == 1 && tasks[0].status == TaskStatus::Cancelled
        };
        assert!(
            eventually_async(10, stopped).await,
            "{protocol:?}: B's task was cancelled"
        );
        srv.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worktree_for_a_remote_agent_is_refused_by_both_surfaces() {
    let b = node();
    // Never reached: the refusal comes before anything is sent.
    let a = node_a(&b, "http://127.0.0.1:9", RemoteProtocol::Auto);
    for (tool, args) in [
        (
            "task",
            json!({"subagent_type": "far", "description": "wt", "prompt": "p", "isolation": "worktree"}),
        ),
        (
            "agent_spawn",
            json!({"agent_id": "far", "task": "p", "isolation": "worktree"}),
        ),
    ] {
        // A refusal reaches the model as an error either way: a failed call or an error output.
        let err = match a.tools.get(tool).unwrap().call(args, &a.ctx).await {
            Err(e) => e.to_string(),
            Ok(out) if out.is_error => out.content,
            Ok(out) => panic!("{tool} was not refused: {}", out.content),
        };
        assert!(
            err.contains("agent far runs remotely; isolation: worktree applies to local agents"),
            "{tool}: {err}"
        );
    }
    let listed = a.call("agent_list", json!({})).await;
    assert!(!listed.content.contains("far:"), "{}", listed.content);
}
