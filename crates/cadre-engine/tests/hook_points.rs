//! Hooks at the points of a run's life: an approval that skips the policy's ask (and only
//! that), the prompt's verdict and appended context, a hook that keeps the finished model
//! going, and one that stops the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_engine::{
    ApprovalMode, HookDecision, PermissionPolicy, PermissionRules, PromptVerdict, ToolCallInfo,
    ToolHook,
};
use cadre_tools::{RunContext, ToolRegistry};
use cadre_types::{EndState, Message};
use common::*;
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

fn ask_policy(deny: &[&str]) -> PermissionPolicy {
    let deny: Vec<String> = deny.iter().map(std::string::ToString::to_string).collect();
    PermissionPolicy {
        mode: ApprovalMode::Ask,
        rules: PermissionRules::parse(&[], &deny, &[]).unwrap(),
    }
}

const WRITE: &str = r#"
    [[turns]]
    tool_calls = [{ name = "write", args = { text = "a.txt" } }]
    [[turns]]
    text = "done"
"#;

struct Approver;

#[async_trait]
impl ToolHook for Approver {
    async fn before(&self, _call: &ToolCallInfo, _run: &RunContext) -> HookDecision {
        HookDecision::Approve(Some(json!({"text": "approved.txt"})))
    }
}

struct AskWrites;

#[async_trait]
impl ToolHook for AskWrites {
    async fn before(&self, _call: &ToolCallInfo, _run: &RunContext) -> HookDecision {
        HookDecision::Ask {
            reason: "a hook asks".into(),
            risk: cadre_types::RiskLevel::Medium,
        }
    }
}

async fn run_write(
    policy: PermissionPolicy,
    hooks: Vec<Arc<dyn ToolHook>>,
) -> (Vec<(String, bool)>, usize) {
    let (model, _rec) = scripted(WRITE);
    let mut b = builder(model)
        .tools(ToolRegistry::new().with(TestTool::mutating("write", Behaviour::Echo)))
        .permissions(policy);
    for h in hooks {
        b = b.hook(h);
    }
    let agent = b.build();
    let h = Harness::new();
    let mut session = h.session();
    h.run(&agent, &mut session, "go").await;
    (tool_results(session.messages()), h.approvals.count())
}

#[tokio::test]
async fn a_hook_approval_skips_only_the_policy_ask() {
    // Ask mode would ask for the write; the hook's approval (with its rewrite) answers it.
    let (r, asked) = run_write(ask_policy(&[]), vec![Arc::new(Approver)]).await;
    assert_eq!(r, vec![("echo:approved.txt".to_string(), false)]);
    assert_eq!(asked, 0);
    // Without the hook it asks.
    let (_, asked) = run_write(ask_policy(&[]), vec![]).await;
    assert_eq!(asked, 1);
    // A deny rule still denies.
    let (r, asked) = run_write(ask_policy(&["write"]), vec![Arc::new(Approver)]).await;
    assert!(r[0].1 && r[0].0.starts_with("denied"), "{r:?}");
    assert_eq!(asked, 0);
    // Another hook's ask still asks.
    let (_, asked) = run_write(
        ask_policy(&[]),
        vec![Arc::new(Approver), Arc::new(AskWrites)],
    )
    .await;
    assert_eq!(asked, 1);
}

/// Adds context to prompts, blocks one, keeps the model going once, then stops a run.
#[derive(Default)]
struct Life {
    stops: AtomicU32,
    seen_active: Mutex<Vec<bool>>,
    halt_next: Mutex<Option<String>>,
}

#[async_trait]
impl ToolHook for Life {
    async fn prompt_submitted(&self, prompt: &str, _run: &RunContext) -> PromptVerdict {
        if prompt.contains("forbidden") {
            PromptVerdict::Block("no forbidden prompts".into())
        } else {
            PromptVerdict::Proceed(vec![format!("context for {prompt}")])
        }
    }
    async fn stopping(&self, last: &str, active: bool, _run: &RunContext) -> Option<String> {
        self.seen_active.lock().unwrap().push(active);
        let n = self.stops.fetch_add(1, Ordering::SeqCst);
        (n == 0).then(|| format!("not yet: you said {last}"))
    }
    fn halt(&self, _run: &RunContext) -> Option<String> {
        self.halt_next.lock().unwrap().take()
    }
}

#[tokio::test]
async fn prompts_get_context_after_them_and_a_stop_hook_keeps_the_model_going() {
    let (model, rec) = scripted(
        r#"
        [[turns]]
        text = "first"
        [[turns]]
        text = "second"
        "#,
    );
    let life = Arc::new(Life::default());
    let agent = builder(model).hook(life.clone()).build();
    let h = Harness::new();
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "the prompt").await;
    assert_eq!(out.state, EndState::Completed);
    assert_eq!(out.output, "second");
    let reqs = rec.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 2);
    // The prompt is unchanged; the context follows it.
    assert_eq!(reqs[0].messages[0], Message::user("the prompt"));
    assert_eq!(reqs[0].messages[1], Message::user("context for the prompt"));
    // The second request extends the first: the stop hook's reason is appended.
    assert_eq!(reqs[1].messages[..2], reqs[0].messages[..]);
    assert_eq!(
        reqs[1].messages[3],
        Message::user("not yet: you said first")
    );
    assert_eq!(*life.seen_active.lock().unwrap(), vec![false, true]);
}

#[tokio::test]
async fn a_blocked_prompt_is_not_sent_and_a_halt_stops_the_run() {
    let (model, rec) = scripted("[[turns]]\ntext = \"never\"\n");
    let life = Arc::new(Life::default());
    let agent = builder(model).hook(life.clone()).build();
    let h = Harness::new();
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "something forbidden").await;
    assert!(
        matches!(&out.state, EndState::Failed { error } if error.contains("no forbidden prompts")),
        "{:?}",
        out.state
    );
    assert!(session.messages().is_empty(), "the prompt is not kept");
    assert!(rec.requests.lock().unwrap().is_empty());

    *life.halt_next.lock().unwrap() = Some("enough".into());
    let out = h.run(&agent, &mut session, "fine").await;
    assert_eq!(out.state, EndState::Cancelled);
    assert!(rec.requests.lock().unwrap().is_empty(), "no model call");
}

/// Answers approvals as `PermissionRequest` hooks do: allow, refuse, or leave it.
struct Answers(Option<bool>);

#[async_trait]
impl ToolHook for Answers {
    async fn permission_request(
        &self,
        _request: &cadre_types::ApprovalRequest,
        _run: &RunContext,
    ) -> Option<cadre_types::ApprovalDecision> {
        self.0.map(|allow| {
            if allow {
                cadre_types::ApprovalDecision::AllowOnce
            } else {
                cadre_types::ApprovalDecision::Refused {
                    policy: "a test hook".into(),
                    feedback: Some("not this one".into()),
                }
            }
        })
    }
}

#[tokio::test]
async fn a_permission_request_answer_stands_for_the_user_and_a_refusal_wins() {
    let allow = || Arc::new(Answers(Some(true))) as Arc<dyn ToolHook>;
    let deny = || Arc::new(Answers(Some(false))) as Arc<dyn ToolHook>;
    let silent = || Arc::new(Answers(None)) as Arc<dyn ToolHook>;
    // An allow answers the question: the call runs and nobody is asked.
    let (r, asked) = run_write(ask_policy(&[]), vec![silent(), allow()]).await;
    assert_eq!(r, vec![("echo:a.txt".to_string(), false)]);
    assert_eq!(asked, 0);
    // A refusal from any hook beats another's allow; the model reads its reason.
    let (r, asked) = run_write(ask_policy(&[]), vec![allow(), deny()]).await;
    assert!(r[0].1 && r[0].0.contains("not this one"), "{r:?}");
    assert_eq!(asked, 0);
    // No answer leaves the question to the user.
    let (_, asked) = run_write(ask_policy(&[]), vec![silent()]).await;
    assert_eq!(asked, 1);
    // A deny rule is applied before: an allow cannot let the call through.
    let (r, asked) = run_write(ask_policy(&["write"]), vec![allow()]).await;
    assert!(r[0].1 && r[0].0.starts_with("denied"), "{r:?}");
    assert_eq!(asked, 0);
}
