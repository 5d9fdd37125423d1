//! Hooks, the permission policy and the approval channel decide which calls run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_engine::{
    ApprovalMode, HookDecision, PermissionPolicy, PermissionRules, ToolCallInfo, ToolHook,
};
use cadre_tools::{RunContext, ToolOutput, ToolRegistry};
use cadre_types::{ApprovalDecision, EndState, Event, Message};
use common::*;
use serde_json::json;
use std::sync::Arc;

fn policy(mode: ApprovalMode, allow: &[&str], deny: &[&str]) -> PermissionPolicy {
    let v = |x: &[&str]| {
        x.iter()
            .map(std::string::ToString::to_string)
            .collect::<Vec<_>>()
    };
    PermissionPolicy {
        mode,
        rules: PermissionRules::parse(&v(allow), &v(deny), &[]).unwrap(),
    }
}

const THREE_WRITES: &str = r#"
    [[turns]]
    tool_calls = [{ name = "write", args = { text = "a.txt" } }]
    [[turns]]
    tool_calls = [{ name = "write", args = { text = "b.txt" } }]
    [[turns]]
    tool_calls = [{ name = "read", args = { text = "b.txt" } }]
    [[turns]]
    text = "done"
"#;

fn tools() -> ToolRegistry {
    ToolRegistry::new()
        .with(TestTool::mutating("write", Behaviour::Echo))
        .with(TestTool::new("read", Behaviour::Echo))
}

#[tokio::test]
async fn ask_mode_asks_for_mutating_tools_and_remembers_session_approval() {
    let (model, _rec) = scripted(THREE_WRITES);
    let agent = builder(model)
        .tools(tools())
        .permissions(policy(ApprovalMode::Ask, &[], &[]))
        .build();
    let h = Harness::with_answer(ApprovalDecision::AllowSession);
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "go").await;
    assert_eq!(out.state, EndState::Completed);
    // Asked once for the first write; the second write was remembered; the read never asks.
    assert_eq!(h.approvals.count(), 1);
    let asked = h.approvals.asked.lock().unwrap()[0].clone();
    assert_eq!(asked.tool, "write");
    assert_eq!(asked.subject.as_deref(), Some("a.txt"));
    assert_eq!(asked.agent, "main");
    assert!(tool_results(session.messages()).iter().all(|(_, err)| !err));
    assert!(
        h.events
            .events()
            .iter()
            .any(|e| matches!(e, Event::ApprovalRequired { .. }))
    );
    // The approval survives a resume of the session.
    let reopened =
        cadre_engine::Session::open(&h.dir.path().join(".cadre/sessions"), session.id()).unwrap();
    assert!(reopened.approved_tools().lock().unwrap().contains("write"));
}

#[tokio::test]
async fn allow_once_asks_every_time_and_denial_reaches_the_model() {
    let (model, _rec) = scripted(THREE_WRITES);
    let agent = builder(model)
        .tools(tools())
        .permissions(policy(ApprovalMode::Ask, &[], &[]))
        .build();
    let h = Harness::with_answer(ApprovalDecision::Deny {
        feedback: Some("not on a Friday".into()),
    });
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "go").await;
    assert_eq!(out.state, EndState::Completed);
    assert_eq!(h.approvals.count(), 2);
    let r = tool_results(session.messages());
    assert_eq!(
        r[0],
        ("denied by the user: not on a Friday".to_string(), true)
    );
    assert!(r[1].1);
    assert_eq!(r[2], ("echo:b.txt".to_string(), false));
}

#[tokio::test]
async fn deny_rules_win_over_allow_rules() {
    let (model, _rec) = scripted(THREE_WRITES);
    let agent = builder(model)
        .tools(tools())
        .permissions(policy(ApprovalMode::Ask, &["write"], &["write(b.*)"]))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    h.run(&agent, &mut session, "go").await;
    let r = tool_results(session.messages());
    assert_eq!(r[0], ("echo:a.txt".to_string(), false));
    assert!(
        r[1].1
            && r[1]
                .0
                .contains("denied by the permission rule `write(b.*)`"),
        "{:?}",
        r[1]
    );
    assert_eq!(h.approvals.count(), 0);
}

#[tokio::test]
async fn read_only_mode_refuses_mutating_tools_without_asking() {
    let (model, _rec) = scripted(THREE_WRITES);
    let agent = builder(model)
        .tools(tools())
        .permissions(policy(ApprovalMode::ReadOnly, &["write"], &[]))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    h.run(&agent, &mut session, "go").await;
    let r = tool_results(session.messages());
    assert!(r[0].1 && r[0].0.contains("read-only"), "{:?}", r[0]);
    assert!(r[1].1);
    assert_eq!(r[2], ("echo:b.txt".to_string(), false));
    assert_eq!(h.approvals.count(), 0);
}

struct Guard;

#[async_trait]
impl ToolHook for Guard {
    async fn before(&self, call: &ToolCallInfo, _run: &RunContext) -> HookDecision {
        if call.tool != "write" {
            return HookDecision::Allow;
        }
        match call.args["text"].as_str() {
            Some("a.txt") => HookDecision::ModifyArgs(json!({"text": "rewritten.txt"})),
            Some("b.txt") => HookDecision::Deny("b.txt is protected".into()),
            _ => HookDecision::Allow,
        }
    }
    async fn after(
        &self,
        call: &ToolCallInfo,
        output: &ToolOutput,
        _run: &RunContext,
    ) -> Option<ToolOutput> {
        // It sees the arguments the tool ran with.
        let text = call.args["text"].as_str().unwrap_or("none");
        (call.tool == "read")
            .then(|| ToolOutput::ok(format!("{} [checked {text}]", output.content)))
    }
}

struct AskAlways;

#[async_trait]
impl ToolHook for AskAlways {
    async fn before(&self, call: &ToolCallInfo, _run: &RunContext) -> HookDecision {
        if call.tool == "read" {
            HookDecision::Ask {
                reason: "reads are audited".into(),
                risk: cadre_types::RiskLevel::High,
            }
        } else {
            HookDecision::Allow
        }
    }
}

#[tokio::test]
async fn hooks_rewrite_args_deny_ask_and_rewrite_results() {
    let (model, _rec) = scripted(THREE_WRITES);
    let agent = builder(model)
        .tools(tools())
        .hook(Arc::new(Guard))
        .hook(Arc::new(AskAlways))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    h.run(&agent, &mut session, "go").await;
    let r = tool_results(session.messages());
    assert_eq!(r[0], ("echo:rewritten.txt".to_string(), false));
    assert_eq!(r[1], ("blocked: b.txt is protected".to_string(), true));
    assert_eq!(r[2], ("echo:b.txt [checked b.txt]".to_string(), false));
    // Auto-approve mode still honours a hook's ask.
    let asked = h.approvals.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].reason, "reads are audited");
    assert_eq!(asked[0].risk, cadre_types::RiskLevel::High);
}

#[tokio::test]
async fn resumed_session_continues_with_its_history() {
    let (model, rec) = scripted(
        r#"
        [[turns]]
        text = "first answer"
        [[turns]]
        text = "second answer"
        "#,
    );
    let agent = builder(model).build();
    let h = Harness::new();
    let mut session = h.session();
    h.run(&agent, &mut session, "first question").await;
    let before = session.messages().to_vec();
    let id = session.id().to_string();
    drop(session);
    let mut resumed =
        cadre_engine::Session::open(&h.dir.path().join(".cadre/sessions"), &id).unwrap();
    assert_eq!(resumed.messages(), before.as_slice());
    let out = h.run(&agent, &mut resumed, "second question").await;
    assert_eq!(out.output, "second answer");
    let reqs = rec.requests.lock().unwrap();
    let last = &reqs[1].messages;
    assert_eq!(last.len(), 3);
    assert_eq!(last[0], Message::user("first question"));
    assert_eq!(last[1], Message::assistant("first answer"));
}
