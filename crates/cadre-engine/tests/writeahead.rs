//! Write-ahead of a run's turns: a reply is in the session file before any of its calls runs
//! and before a finished run waits for outstanding work, each call's start is written before
//! its tool runs, and a run that takes up a reopened session settles the calls left without
//! results — a call that never started runs, an extension answers for work it owns, a
//! read-only call runs again, any other is reported `interrupted: outcome unknown`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_engine::{Session, Settled, TurnExtension};
use cadre_tools::{RunContext, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use cadre_types::{Message, ToolCall, ToolDefinition};
use common::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Counts its calls and, when given a session file, answers with what the file held when
/// it ran.
struct Probe {
    name: &'static str,
    read_only: bool,
    calls: AtomicUsize,
    file: Mutex<Option<PathBuf>>,
}

impl Probe {
    fn new(name: &'static str, read_only: bool) -> Arc<Self> {
        Arc::new(Self {
            name,
            read_only,
            calls: AtomicUsize::new(0),
            file: Mutex::new(None),
        })
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for Probe {
    fn name(&self) -> &str {
        self.name
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.into(),
            description: "probe".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    fn is_read_only(&self) -> bool {
        self.read_only
    }
    async fn call(
        &self,
        _args: serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let file = self.file.lock().unwrap().clone();
        Ok(ToolOutput::ok(match file {
            Some(f) => std::fs::read_to_string(f).unwrap(),
            None => format!("{} ran", self.name),
        }))
    }
}

/// Settles the calls to `delegate`, and sees what the session file holds when the run
/// waits for outstanding work.
#[derive(Default)]
struct Owner {
    asked: Mutex<Vec<String>>,
    file: Mutex<Option<PathBuf>>,
    at_wait: Mutex<Option<String>>,
}

#[async_trait]
impl TurnExtension for Owner {
    async fn settle_call(
        &self,
        _run: &RunContext,
        call: &ToolCall,
        _cancel: &CancellationToken,
    ) -> Option<Settled> {
        self.asked.lock().unwrap().push(call.id.clone());
        match call.name.as_str() {
            "delegate" => Some(Settled::Known(ToolOutput::ok("the child's end"))),
            "message" => Some(Settled::OutcomeUnknown),
            _ => None,
        }
    }

    async fn wait_outstanding(
        &self,
        _run: &RunContext,
        _cancel: &CancellationToken,
        _round: u32,
    ) -> bool {
        let file = self.file.lock().unwrap().clone();
        *self.at_wait.lock().unwrap() = file.map(|f| std::fs::read_to_string(f).unwrap());
        false
    }
}

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: "{}".into(),
    }
}

#[tokio::test]
async fn a_reply_and_its_calls_start_are_on_disk_before_the_tool_runs_and_the_final_reply_before_the_wait()
 {
    let (model, _rec) = scripted(
        "[[turns]]\ntool_calls = [{ id = \"w1\", name = \"write\" }]\n\
         [[turns]]\ntext = \"the final answer\"\n",
    );
    let write = Probe::new("write", false);
    let owner = Arc::new(Owner::default());
    let agent = builder(model)
        .tools(ToolRegistry::new().with(write.clone()))
        .extension(owner.clone())
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let path = session.path().unwrap().to_path_buf();
    *write.file.lock().unwrap() = Some(path.clone());
    *owner.file.lock().unwrap() = Some(path.clone());
    let out = h.run(&agent, &mut session, "go").await;
    assert_eq!(out.output, "the final answer");

    let seen = match &session.messages()[2] {
        Message::Tool { content, .. } => content.clone(),
        other => panic!("{other:?}"),
    };
    let lines: Vec<serde_json::Value> = seen
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.len() - 1;
    assert_eq!(
        lines[last - 1]["message"]["tool_calls"][0]["id"],
        "w1",
        "{seen}"
    );
    assert_eq!(lines[last]["kind"], "call_started", "{seen}");
    assert_eq!(lines[last]["call_id"], "w1", "{seen}");

    let at_wait = owner.at_wait.lock().unwrap().clone().unwrap();
    assert!(at_wait.contains("the final answer"), "{at_wait}");
}

/// A session file whose last reply asked for `calls`, of which those in `started` had
/// started, when its process was lost; reopened.
fn lost_session(h: &Harness, calls: Vec<ToolCall>, started: &[&str]) -> Session {
    let mut s = h.session();
    s.push(Message::user("go")).unwrap();
    s.push(Message::Assistant {
        content: String::new(),
        thinking: None,
        thinking_signature: None,
        tool_calls: calls,
    })
    .unwrap();
    s.flush().unwrap();
    let (path, id) = (s.path().unwrap().to_path_buf(), s.id().to_string());
    drop(s);
    let mut text = std::fs::read_to_string(&path).unwrap();
    for id in started {
        text.push_str(&format!(
            "{{\"kind\":\"call_started\",\"call_id\":\"{id}\"}}\n"
        ));
    }
    std::fs::write(&path, text).unwrap();
    Session::open(path.parent().unwrap(), &id).unwrap()
}

#[tokio::test]
async fn a_reopened_session_settles_the_calls_its_lost_run_left_before_the_new_prompt() {
    let (model, rec) = scripted("[[turns]]\ntext = \"one\"\n[[turns]]\ntext = \"two\"\n");
    let (write, read, delegate, message) = (
        Probe::new("write", false),
        Probe::new("read", true),
        // Read-only like `task`: only the extension keeps it from starting a second child.
        Probe::new("delegate", true),
        // Read-only like `agent_send`, yet it may have acted: the extension says so.
        Probe::new("message", true),
    );
    let owner = Arc::new(Owner::default());
    let agent = builder(model)
        .tools(
            ToolRegistry::new()
                .with(write.clone())
                .with(read.clone())
                .with(delegate.clone())
                .with(message.clone()),
        )
        .extension(owner.clone())
        .build();
    let h = Harness::new();
    let calls = vec![
        call("c1", "write"),
        call("c2", "write"),
        call("c3", "delegate"),
        call("c4", "read"),
        call("c5", "message"),
    ];
    let mut session = lost_session(&h, calls, &["c1", "c3", "c4", "c5"]);
    assert!(session.call_started("c1") && !session.call_started("c2"));
    let out = h.run(&agent, &mut session, "next").await;
    assert_eq!(out.output, "two", "{out:?}");

    // c2 never started: it runs now; c1 may have acted: not run again.
    assert_eq!(
        (
            write.calls(),
            read.calls(),
            delegate.calls(),
            message.calls()
        ),
        (1, 1, 0, 0)
    );
    assert_eq!(*owner.asked.lock().unwrap(), ["c1", "c3", "c4", "c5"]);
    let sent = rec.requests.lock().unwrap()[0].messages.clone();
    let tail: Vec<(String, String)> = sent[2..]
        .iter()
        .map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => (tool_call_id.clone(), content.clone()),
            Message::User { content } => ("user".into(), content.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    let lost = "interrupted: outcome unknown (the cadre process running it was lost)";
    assert_eq!(
        tail,
        [
            pair("c1", lost),
            pair("c2", "write ran"),
            pair("c3", "the child's end"),
            pair("c4", "read ran"),
            pair("c5", lost),
            pair("user", "next"),
        ]
    );
    // Settled once: the results are in the file, so a later resume asks nothing.
    let again = Session::open(session.path().unwrap().parent().unwrap(), session.id()).unwrap();
    assert_eq!(again.messages().len(), session.messages().len());
}
