//! Resuming a conversation another run left: the calls it had in flight are run again only
//! when their tool reads only or is idempotent (any other is answered as interrupted), and
//! its spend and turns count against the limits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_engine::{Limits, Resume};
use cadre_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, Workspace};
use cadre_types::{EndState, LimitKind, Message, ToolCall, ToolDefinition, Usage};
use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const WHY: &str = "the node running it was lost";

/// Counts its calls; reads only, is idempotent, or neither.
struct Counted {
    name: &'static str,
    read_only: bool,
    idempotent: bool,
    calls: AtomicUsize,
}

impl Counted {
    fn new(name: &'static str, read_only: bool, idempotent: bool) -> Arc<Self> {
        Arc::new(Self {
            name,
            read_only,
            idempotent,
            calls: AtomicUsize::new(0),
        })
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for Counted {
    fn name(&self) -> &str {
        self.name
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.into(),
            description: "counts".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    fn is_read_only(&self) -> bool {
        self.read_only
    }
    fn is_idempotent(&self) -> bool {
        self.idempotent
    }
    async fn call(
        &self,
        _args: serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::ok(format!("{} ran", self.name)))
    }
}

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: "{}".into(),
    }
}

fn reply(calls: Vec<ToolCall>) -> Message {
    Message::Assistant {
        content: String::new(),
        thinking: None,
        thinking_signature: None,
        tool_calls: calls,
    }
}

/// A conversation lost with its second reply's three calls in flight: the first reply's
/// call had its result.
fn lost_conversation() -> Vec<Message> {
    vec![
        Message::user("go"),
        reply(vec![call("c0", "read")]),
        Message::Tool {
            tool_call_id: "c0".into(),
            name: "read".into(),
            content: "read ran".into(),
            is_error: false,
            images: Vec::new(),
        },
        reply(vec![
            call("c1", "read"),
            call("c2", "put"),
            call("c3", "write"),
        ]),
    ]
}

fn results(session: &cadre_engine::Session) -> Vec<(String, String)> {
    session
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => Some((tool_call_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn calls_in_flight_rerun_only_when_safe_and_the_run_goes_on() {
    // The scripted model answers by the replies in the history: its third turn is next.
    let (model, rec) = scripted(
        "[[turns]]\ntext = \"one\"\n[[turns]]\ntext = \"two\"\n[[turns]]\ntext = \"done\"\n",
    );
    let (read, put, write) = (
        Counted::new("read", true, false),
        Counted::new("put", false, true),
        Counted::new("write", false, false),
    );
    let tools = ToolRegistry::new()
        .with(read.clone())
        .with(put.clone())
        .with(write.clone());
    let agent = builder(model)
        .tools(tools)
        .limits(Limits {
            max_turns: 3,
            ..Limits::default()
        })
        .build();
    let h = Harness::new();
    let mut session = h.session();
    for m in lost_conversation() {
        session.push(m).unwrap();
    }
    let resume = Resume {
        spent: Usage {
            input_tokens: 100,
            output_tokens: 10,
            ..Usage::default()
        },
        why: WHY.into(),
    };
    let run = h.run_context(&session);
    let ws = Arc::new(Workspace::new(h.dir.path()).unwrap());
    let observer = NoObserver;
    let out = agent
        .resume_observed(&mut session, &resume, run, ws, h.cancel.clone(), &observer)
        .await;

    assert_eq!(out.state, EndState::Completed, "{}", out.output);
    assert_eq!(out.output, "done");
    // The two replies recorded count as turns; one model call was made here.
    assert_eq!(out.turns, 3);
    assert_eq!(rec.requests.lock().unwrap().len(), 1);
    assert!(out.usage.input_tokens >= 100, "{:?}", out.usage);
    assert_eq!((read.calls(), put.calls(), write.calls()), (1, 1, 0));
    let interrupted = format!("interrupted: outcome unknown ({WHY})");
    assert_eq!(
        results(&session),
        [
            ("c0".to_string(), "read ran".to_string()),
            ("c1".to_string(), "read ran".to_string()),
            ("c2".to_string(), "put ran".to_string()),
            ("c3".to_string(), interrupted),
        ]
    );
    // The model was asked with every call answered, in call order.
    let sent = rec.requests.lock().unwrap()[0].messages.clone();
    assert_eq!(sent.len(), 7);
}

#[tokio::test]
async fn the_turn_limit_counts_the_turns_recorded_before() {
    let (model, rec) = scripted("[[turns]]\ntext = \"never asked\"\n");
    let agent = builder(model)
        .tools(ToolRegistry::new().with(Counted::new("read", true, false)))
        .limits(Limits {
            max_turns: 2,
            ..Limits::default()
        })
        .build();
    let h = Harness::new();
    let mut session = h.session();
    for m in lost_conversation() {
        session.push(m).unwrap();
    }
    let run = h.run_context(&session);
    let ws = Arc::new(Workspace::new(h.dir.path()).unwrap());
    let resume = Resume {
        spent: Usage::default(),
        why: WHY.into(),
    };
    let out = agent
        .resume_observed(
            &mut session,
            &resume,
            run,
            ws,
            h.cancel.clone(),
            &NoObserver,
        )
        .await;
    assert_eq!(
        out.state,
        EndState::LimitReached {
            limit: LimitKind::MaxTurns
        }
    );
    assert!(rec.requests.lock().unwrap().is_empty());
}

/// Sees nothing.
struct NoObserver;

#[async_trait]
impl cadre_engine::TurnObserver for NoObserver {
    async fn turn_boundary(
        &self,
        _run: &cadre_tools::RunContext,
        _boundary: cadre_engine::TurnBoundary<'_>,
    ) {
    }
}
