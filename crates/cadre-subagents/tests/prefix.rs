//! The prompt prefix only grows: over a 10-turn parent session whose background tasks
//! finish between turns, every parent request (as recorded by the testkit's mock server, on
//! both wire formats) starts with the whole previous request, and children of one
//! definition send the same system prompt and tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use cadre_engine::{ApprovalMode, NonInteractiveApprovals, PermissionPolicy};
use cadre_llm::{ProviderConfig, ProviderKind};
use cadre_subagents::{AgentDefinition, Harness, RunOptions, SubagentRuntime, WorkspaceMode};
use cadre_testkit::{
    AnthropicJson, AnthropicStream, Api, MockReply, MockServer, OpenAiJson, OpenAiStream,
    RecordedRequest,
};
use cadre_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use cadre_types::{EndState, ToolDefinition};
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::watch;

/// Background children the parent starts on its first turn.
const JOBS: usize = 3;

/// What the parent does on each turn (1-based): start the jobs, work, let job `k` finish.
fn parent_step(turn: usize) -> Option<(&'static str, Value)> {
    match turn {
        1 => None, // the task calls, built separately
        3 => Some(("release", json!({"job": 0}))),
        5 => Some(("release", json!({"job": 1}))),
        6 => Some(("release", json!({"job": 2}))),
        2 | 4 | 7 | 8 | 9 => Some(("echo", json!({"text": format!("work {turn}")}))),
        _ => Some(("", Value::Null)),
    }
}

/// Lets the children's `gate` calls through one job at a time.
struct Gates(watch::Sender<u32>);

/// `gate {job}` (children): waits until the parent released the job.
struct Gate(Arc<Gates>);
/// `release {job}` (parent): releases the job and waits until its task has ended.
struct Release(Arc<Gates>, Arc<OnceLock<Arc<SubagentRuntime>>>);
/// `echo {text}`.
struct Echo;

fn def(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: format!("The {name} test tool."),
        parameters: json!({"type": "object",
                           "properties": {"job": {"type": "integer"}, "text": {"type": "string"}}}),
    }
}

#[async_trait]
impl Tool for Gate {
    fn name(&self) -> &str {
        "gate"
    }
    fn definition(&self) -> ToolDefinition {
        def("gate")
    }
    fn is_read_only(&self) -> bool {
        true
    }
    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let bit = 1u32 << args["job"].as_u64().unwrap_or(0);
        let mut rx = self.0.0.subscribe();
        tokio::select! {
            _ = rx.wait_for(|m| m & bit != 0) => Ok(ToolOutput::ok("open")),
            _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }
}

#[async_trait]
impl Tool for Release {
    fn name(&self) -> &str {
        "release"
    }
    fn definition(&self) -> ToolDefinition {
        def("release")
    }
    fn is_read_only(&self) -> bool {
        true
    }
    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let job = args["job"].as_u64().unwrap_or(0);
        self.0.0.send_modify(|m| *m |= 1 << job);
        let runtime = self.1.get().unwrap();
        let task = runtime
            .tasks_of(&ctx.run.session_id)
            .await
            .into_iter()
            .find(|t| t.description == format!("job {job}"))
            .unwrap();
        let never = tokio_util::sync::CancellationToken::new();
        let ended = runtime
            .wait_for(&task.id, &never, Some(Duration::from_secs(30)))
            .await;
        assert!(
            matches!(ended, cadre_subagents::Waited::Done(_)),
            "the released job ends"
        );
        Ok(ToolOutput::ok(format!("job {job} finished")))
    }
}

#[async_trait]
impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn definition(&self) -> ToolDefinition {
        def("echo")
    }
    fn is_read_only(&self) -> bool {
        true
    }
    async fn call(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::ok(
            args["text"].as_str().unwrap_or("").to_string(),
        ))
    }
}

fn tool_names(req: &RecordedRequest) -> Vec<String> {
    let pointer = match req.api {
        Api::OpenAi => "/function/name",
        Api::Anthropic => "/name",
    };
    req.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer(pointer).and_then(Value::as_str).map(String::from))
        .collect()
}

fn is_parent(req: &RecordedRequest) -> bool {
    tool_names(req).iter().any(|n| n == "task")
}

fn first_user_text(body: &Value) -> String {
    let messages = body["messages"].as_array().unwrap();
    let first = &messages.iter().find(|m| m["role"] == "user").unwrap()["content"];
    match first {
        Value::String(s) => s.clone(),
        other => other[0]["text"].as_str().unwrap_or("").to_string(),
    }
}

fn reply(api: Api, stream: bool, calls: &[(String, &str, Value)], text: &str) -> MockReply {
    match (api, stream) {
        (Api::OpenAi, true) => {
            let mut s = OpenAiStream::new().role();
            for (i, (id, name, args)) in calls.iter().enumerate() {
                s = s.tool_call(i, id, name, &args.to_string());
            }
            if calls.is_empty() {
                s = s.text(text);
            }
            s.finish(if calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            })
            .usage(10, 5, 0)
            .done()
            .into_reply()
        }
        (Api::OpenAi, false) => {
            let mut j = OpenAiJson::new();
            for (id, name, args) in calls {
                j = j.tool_call(id, name, &args.to_string());
            }
            if calls.is_empty() {
                j = j.text(text);
            }
            j.usage(10, 5, 0).into_reply()
        }
        (Api::Anthropic, true) => {
            let mut s = AnthropicStream::new().start(10, 0);
            for (id, name, args) in calls {
                s = s.tool_use(id, name, &[&args.to_string()]);
            }
            if calls.is_empty() {
                s = s.text(&[text]);
            }
            s.stop(
                if calls.is_empty() {
                    "end_turn"
                } else {
                    "tool_use"
                },
                5,
            )
            .into_reply()
        }
        (Api::Anthropic, false) => {
            let mut j = AnthropicJson::new();
            for (id, name, args) in calls {
                j = j.tool_use(id, name, args.clone());
            }
            if calls.is_empty() {
                j = j.text(text);
            }
            j.usage(10, 5, 0).into_reply()
        }
    }
}

/// Decides each reply from the request body.
fn respond(req: &RecordedRequest) -> MockReply {
    let stream = req.wants_stream();
    let turns = req.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count();
    if is_parent(req) {
        let turn = turns + 1;
        if turn == 1 {
            let calls: Vec<_> = (0..JOBS)
                .map(|i| {
                    let args = json!({"subagent_type": "worker", "description": format!("job {i}"),
                                      "prompt": format!("Job {i}"), "background": true});
                    (format!("call_1_{i}"), "task", args)
                })
                .collect();
            return reply(req.api, stream, &calls, "");
        }
        return match parent_step(turn) {
            Some((name, args)) if !name.is_empty() => {
                reply(req.api, stream, &[(format!("call_{turn}"), name, args)], "")
            }
            _ => reply(req.api, stream, &[], "all done"),
        };
    }
    let job: u64 = first_user_text(&req.body)
        .trim_start_matches("Job ")
        .parse()
        .unwrap_or(0);
    if turns == 0 {
        let calls = [("call_g".to_string(), "gate", json!({"job": job}))];
        return reply(req.api, stream, &calls, "");
    }
    reply(req.api, stream, &[], &format!("result of job {job}"))
}

/// The previous request as the next one must repeat it: without its rolling `cache_control`
/// marker (the last one) and the closing brackets of its message list.
fn open_end(body: &[u8]) -> &[u8] {
    const MARK: &[u8] = br#","cache_control":{"type":"ephemeral"}"#;
    let text = std::str::from_utf8(body).unwrap();
    let head = match body.windows(MARK.len()).rposition(|w| w == MARK) {
        // The rolling breakpoint sits in the last message; earlier ones stay.
        Some(at) if text[at..].matches("\"role\"").count() == 0 => &text[..at],
        _ => text,
    };
    head.trim_end_matches([']', '}']).as_bytes()
}

async fn session_of_ten_turns(kind: ProviderKind, stream: bool) -> (Vec<RecordedRequest>, String) {
    let server = MockServer::start_with(Arc::new(respond)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base_url = match kind {
        ProviderKind::Anthropic => server.base_url(),
        _ => server.openai_base_url(),
    };
    let gates = Arc::new(Gates(watch::channel(0).0));
    let runtime_slot = Arc::new(OnceLock::new());
    let tools = ToolRegistry::new()
        .with(Arc::new(Echo))
        .with(Arc::new(Gate(gates.clone())))
        .with(Arc::new(Release(gates, runtime_slot.clone())));
    let mut worker = AgentDefinition::new("worker", "Waits for its gate, then reports.");
    worker.prompt = "You are a worker.".into();
    worker.workspace.mode = WorkspaceMode::Shared;
    worker.tools = Some(vec!["gate".into()]);
    let harness = Harness::builder()
        .model("mock:m")
        .workspace(dir.path())
        .provider(
            "mock",
            ProviderConfig {
                kind: Some(kind),
                base_url: Some(base_url),
                stream: Some(stream),
                max_attempts: Some(1),
                // The mock is not OpenAI's API: ask for `prompt_cache_key` explicitly.
                cache: Some(cadre_llm::CacheMode::On),
                ..Default::default()
            },
        )
        .tools(tools)
        .subagent(worker)
        .without_agent_files()
        .in_memory_sessions()
        .permissions(PermissionPolicy {
            mode: ApprovalMode::AutoApprove,
            ..Default::default()
        })
        .build()
        .unwrap();
    runtime_slot.set(harness.runtime().clone()).ok().unwrap();
    let mut session = harness.new_session().unwrap();
    let out = harness
        .run_in(
            &mut session,
            "Start the jobs and keep working.",
            RunOptions {
                approvals: Arc::new(NonInteractiveApprovals::new(true)),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(out.state, EndState::Completed, "{}", out.output);
    assert_eq!(out.turns, 10);
    harness.runtime().shutdown();
    (server.requests(), session.id().to_string())
}

async fn check_prefix(kind: ProviderKind, stream: bool) {
    let (requests, session) = session_of_ten_turns(kind, stream).await;
    let parent: Vec<&RecordedRequest> = requests.iter().filter(|r| is_parent(r)).collect();
    assert_eq!(parent.len(), 10);
    for r in &requests {
        let text = std::str::from_utf8(&r.raw).unwrap();
        let key = r.body.get("prompt_cache_key");
        match r.api {
            // Tools, system prompt, latest message; never more than the API's 4.
            Api::Anthropic => {
                assert_eq!(text.matches("cache_control").count(), 3, "{text}");
                assert!(key.is_none());
            }
            // The session for the parent, the definition for its children.
            Api::OpenAi => {
                assert!(!text.contains("cache_control"));
                let want = if is_parent(r) {
                    session.as_str()
                } else {
                    "worker"
                };
                assert_eq!(key, Some(&json!(want)));
            }
        }
    }
    // Results were delivered and the status changed between turns.
    let last = String::from_utf8_lossy(&parent[9].raw).to_string();
    assert_eq!(
        last.matches("<background-task-results>").count(),
        JOBS,
        "{last}"
    );
    assert!(last.matches("<background-tasks>").count() >= 2, "{last}");
    for (i, pair) in parent.windows(2).enumerate() {
        let (prev, next) = (&pair[0].raw, &pair[1].raw);
        let keep = open_end(prev);
        assert!(
            prev.len() - keep.len() < 64,
            "request {i}: only the end of the message list may differ"
        );
        let shared = keep
            .iter()
            .zip(next.iter())
            .take_while(|(a, b)| a == b)
            .count();
        assert!(
            next.starts_with(keep),
            "request {} does not extend request {i}: they differ at byte {shared} of {}:\n{}\n---\n{}",
            i + 1,
            keep.len(),
            String::from_utf8_lossy(
                &keep[shared.saturating_sub(80)..(shared + 80).min(keep.len())]
            ),
            String::from_utf8_lossy(
                &next[shared.saturating_sub(80)..(shared + 80).min(next.len())]
            ),
        );
    }
    // Children of one definition open with the same system prompt and tools.
    let firsts: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| !is_parent(r))
        .filter(|r| {
            !r.body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == "assistant")
        })
        .collect();
    assert_eq!(firsts.len(), JOBS);
    let head = |r: &RecordedRequest| {
        let system = match r.api {
            Api::OpenAi => r.body["messages"][0].clone(),
            Api::Anthropic => r.body["system"].clone(),
        };
        (system, r.body["tools"].clone())
    };
    for r in &firsts[1..] {
        assert_eq!(head(r), head(firsts[0]));
    }
}

#[tokio::test]
async fn parent_requests_extend_each_other_on_openai() {
    check_prefix(ProviderKind::Openai, true).await;
}

#[tokio::test]
async fn parent_requests_extend_each_other_on_anthropic() {
    check_prefix(ProviderKind::Anthropic, false).await;
}
