//! The run context reaches children: user id, parent session, depth and trace id; and the
//! configured surface decides which delegation tools exist.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_subagents::ToolSurface;
use cadre_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use cadre_types::ToolDefinition;
use common::*;
use serde_json::json;
use std::sync::{Arc, Mutex};

/// (user id, parent session, depth, trace id, session id) as each call saw them.
type Seen = (Option<String>, Option<String>, u32, String, String);

struct Probe(Arc<Mutex<Vec<Seen>>>);

#[async_trait]
impl Tool for Probe {
    fn name(&self) -> &str {
        "probe"
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "probe".into(),
            description: "records its run context".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    fn is_read_only(&self) -> bool {
        true
    }
    async fn call(
        &self,
        _a: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let r = &ctx.run;
        self.0.lock().unwrap().push((
            r.user_id.clone(),
            r.parent_session_id.clone(),
            r.depth,
            r.trace_id.clone(),
            r.session_id.clone(),
        ));
        Ok(ToolOutput::ok("ok"))
    }
}

#[tokio::test]
async fn user_parent_session_depth_and_trace_reach_the_child() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let probe = Arc::new(Probe(seen.clone()));
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "worker", prompt = "probe" } }]
        [[scripts.turns]]
        text = "done"
        [[scripts]]
        agent = "worker"
        [[scripts.turns]]
        tool_calls = [{ name = "probe" }]
        [[scripts.turns]]
        text = "probed"
        "#,
        Options {
            defs: vec![worker("worker")],
            tweak: Box::new(move |c| c.base_tools = ToolRegistry::new().with(probe)),
            ..Default::default()
        },
    );
    let (_out, s) = f.run("go").await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let (user, parent, depth, trace, child_session) = &seen[0];
    assert_eq!(user.as_deref(), Some("tester"));
    assert_eq!(parent.as_deref(), Some(s.id()));
    assert_eq!(*depth, 1);
    assert_eq!(trace, "trace-1");
    assert!(child_session.starts_with("sub-"));
}

#[test]
fn the_surface_setting_decides_the_delegation_tools() {
    for (surface, want) in [
        (ToolSurface::Task, vec!["task"]),
        (
            ToolSurface::Lifecycle,
            vec![
                "agent_spawn",
                "agent_send",
                "agent_list",
                "agent_close",
                "task_output",
                "task_cancel",
                "task_list",
            ],
        ),
        (
            ToolSurface::Both,
            vec![
                "task",
                "agent_spawn",
                "agent_send",
                "agent_list",
                "agent_close",
                "task_output",
                "task_cancel",
                "task_list",
            ],
        ),
    ] {
        let f = fixture(
            "",
            Options {
                defs: vec![worker("worker")],
                tweak: Box::new(move |c| c.surface = surface),
                ..Default::default()
            },
        );
        assert_eq!(f.runtime.delegation_tools().names(), want, "{surface:?}");
    }
}
