//! Context compaction against the mock OpenAI server: a long session under a small window
//! with background results arriving, a provider that answers "context too long" once, and
//! the resume of a compacted session. The mock records every request, so what was sent
//! before and after a compaction is asserted on the wire.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_engine::{CompactionPolicy, Session, TurnExtension};
use cadre_llm::openai::OpenAiProvider;
use cadre_llm::{ContextWindows, ProviderConfig, ResolvedModel};
use cadre_testkit::{MockReply, MockServer, OpenAiJson, RecordedRequest};
use cadre_tools::{Budget, BudgetLimits, RunContext, Spend, ToolRegistry};
use cadre_types::{EndState, Event, Message, Usage};
use common::*;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const WINDOW: u64 = 5_000;
const SPEC: &str = "mockai:gpt-mock";
/// Main-agent turns before the final answer.
const STEPS: usize = 14;

fn model(mock: &MockServer) -> ResolvedModel {
    let config = ProviderConfig {
        base_url: Some(mock.openai_base_url()),
        api_key_env: Some("CARGO_PKG_NAME".into()),
        stream: Some(false),
        max_attempts: Some(1),
        ..Default::default()
    };
    ResolvedModel {
        provider: Arc::new(OpenAiProvider::from_config("mockai", &config).unwrap()),
        model: "gpt-mock".into(),
        spec: SPEC.into(),
        price: None,
    }
}

fn policy(window: Option<u64>) -> CompactionPolicy {
    let mut windows = ContextWindows::new();
    if let Some(w) = window {
        windows = windows.with(SPEC, w);
    }
    CompactionPolicy {
        windows: Arc::new(windows),
        ..CompactionPolicy::default()
    }
}

fn is_summary_request(r: &RecordedRequest) -> bool {
    r.body.get("tools").is_none()
}

/// The `RESULT-n` tokens of a text, in order of first appearance.
fn results_in(text: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for part in text.split("RESULT-").skip(1) {
        let n: String = part.chars().take_while(char::is_ascii_digit).collect();
        let token = format!("RESULT-{n}");
        if !n.is_empty() && !seen.contains(&token) {
            seen.push(token);
        }
    }
    seen
}

/// A reply with usage as a provider would count it (about four bytes a token).
fn reply(r: &RecordedRequest, message: OpenAiJson) -> MockReply {
    let prompt = (r.raw.len() / 4) as u64;
    message.usage(prompt, 20, 0).into_reply()
}

/// The model of the long session: STEPS turns that each call `echo` with a sizeable
/// payload, then a final answer naming every background result it can see; a summary
/// request (no tools) is answered with a summary that keeps the results.
fn long_session_responder(turn: Arc<AtomicUsize>) -> cadre_testkit::Responder {
    Arc::new(move |r: &RecordedRequest| {
        let body = String::from_utf8_lossy(&r.raw).to_string();
        if is_summary_request(r) {
            let text = format!(
                "Goal: run the steps. Sub-agent tasks: {}.",
                results_in(&body).join(", ")
            );
            return reply(r, OpenAiJson::new().text(&text));
        }
        let n = turn.fetch_add(1, Ordering::SeqCst) + 1;
        if n > STEPS {
            let text = format!("final: {}", results_in(&body).join(" "));
            return reply(r, OpenAiJson::new().text(&text));
        }
        let payload = format!("step {n} ").repeat(90);
        let args = json!({ "text": payload }).to_string();
        reply(
            r,
            OpenAiJson::new()
                .text(&format!("doing step {n}"))
                .tool_call(&format!("call_{n}"), "echo", &args),
        )
    })
}

/// Background results arriving: one every third model call.
#[derive(Default)]
struct Arrivals {
    calls: AtomicUsize,
    delivered: AtomicUsize,
}

#[async_trait]
impl TurnExtension for Arrivals {
    async fn take_injections(&self, _run: &RunContext, _history: &[Message]) -> Vec<Message> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n % 3 != 2 {
            return Vec::new();
        }
        let k = self.delivered.fetch_add(1, Ordering::SeqCst) + 1;
        vec![Message::user(format!(
            "<background-task-results><task id=\"t{k}\">RESULT-{k}</task></background-task-results>"
        ))]
    }
}

/// Every tool message answers a call of the request, and every call is answered.
fn assert_pairs_intact(r: &RecordedRequest) {
    let msgs = r.body["messages"].as_array().unwrap();
    let mut open: HashSet<String> = HashSet::new();
    for m in msgs {
        match m["role"].as_str().unwrap() {
            "assistant" => {
                assert!(open.is_empty(), "calls without results before {m}");
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    open.insert(c["id"].as_str().unwrap().to_string());
                }
            }
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap();
                assert!(open.remove(id), "a result without its call: {id}");
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "calls without results: {open:?}");
}

/// Six earlier exchanges, each question followed by `filler_words` words.
fn push_exchanges(session: &mut Session, filler_words: usize) {
    for i in 0..6 {
        let question = match filler_words {
            0 => format!("question {i}"),
            n => format!("question {i} {}", "words ".repeat(n)),
        };
        session.push(Message::user(question)).unwrap();
        session
            .push(Message::assistant(format!("answer {i}")))
            .unwrap();
    }
}

/// The first notice of the run containing `text`.
fn notice_containing(h: &Harness, text: &str) -> Option<String> {
    h.events.events().into_iter().find_map(|e| match e {
        Event::Notice { message } if message.contains(text) => Some(message),
        _ => None,
    })
}

fn texts(r: &RecordedRequest) -> Vec<String> {
    r.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
async fn a_long_session_under_a_small_window_is_compacted_and_keeps_what_it_learned() {
    let mock = MockServer::start().await.unwrap();
    mock.set_responder(long_session_responder(Arc::new(AtomicUsize::new(0))));
    let arrivals = Arc::new(Arrivals::default());
    let agent = builder(model(&mock))
        .system_prompt("You are a test agent.")
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .extension(arrivals.clone())
        .compaction(policy(Some(WINDOW)))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "run all the steps").await;
    assert_eq!(out.state, EndState::Completed, "{}", out.output);

    let requests = mock.requests();
    let main: Vec<&RecordedRequest> = requests.iter().filter(|r| !is_summary_request(r)).collect();
    assert_eq!(main.len(), STEPS + 1);
    // No request exceeds the window (counted as the provider would, from the bytes sent).
    for r in &requests {
        assert!(
            (r.raw.len() as u64) / 4 <= WINDOW,
            "a request of {} bytes",
            r.raw.len()
        );
        assert_pairs_intact(r);
    }
    let compactions: Vec<(usize, u64, u64)> = h
        .events
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Compaction {
                replaced_messages,
                tokens_before,
                tokens_after,
                model,
            } => {
                assert_eq!(model, SPEC);
                Some((replaced_messages, tokens_before, tokens_after))
            }
            _ => None,
        })
        .collect();
    assert!(!compactions.is_empty(), "no compaction");
    for (replaced, before, after) in &compactions {
        assert!(*replaced > 0 && after < before, "{compactions:?}");
    }
    // Every result delivered, including those summarised away, reaches the final answer.
    let delivered = arrivals.delivered.load(Ordering::SeqCst);
    assert!(delivered >= 4, "{delivered}");
    let all: Vec<String> = (1..=delivered).map(|k| format!("RESULT-{k}")).collect();
    assert_eq!(out.output, format!("final: {}", all.join(" ")));

    // The requests around the first compaction: before it the prompt and step 1 were sent;
    // the summary request carries no tools, the summarisation prompt and the old turns; the
    // next request opens with the same system prompt, then the summary, and no longer
    // carries step 1.
    let first = requests.iter().position(is_summary_request).unwrap();
    let (before, summary, after) = (&requests[first - 1], &requests[first], &requests[first + 1]);
    assert!(texts(before).iter().any(|t| t == "run all the steps"));
    assert!(texts(before).iter().any(|t| t == "doing step 1"));
    let sys = summary.body["messages"][0]["content"].as_str().unwrap();
    assert!(sys.contains("Sub-agent tasks"), "{sys}");
    let asked = summary.body["messages"][1]["content"].as_str().unwrap();
    assert!(asked.contains("run all the steps") && asked.contains("[tool call call_1 echo("));
    assert_eq!(
        before.body["messages"][0], after.body["messages"][0],
        "the system prompt is untouched"
    );
    assert_eq!(before.body["tools"], after.body["tools"]);
    let after_texts = texts(after);
    assert!(
        after_texts[1].starts_with("<conversation-summary>"),
        "{after_texts:?}"
    );
    assert!(after_texts[1].contains("RESULT-1"), "{}", after_texts[1]);
    assert!(!after_texts.iter().any(|t| t == "doing step 1"));
    // The kept turns follow verbatim: the tail of the request before is in the one after.
    let last_before = before.body["messages"].as_array().unwrap().last().unwrap();
    assert!(
        after.body["messages"]
            .as_array()
            .unwrap()
            .contains(last_before)
    );

    // Resume: the reopened session sends the compacted history, not the original.
    let dir = session.path().unwrap().parent().unwrap().to_path_buf();
    let id = session.id().to_string();
    drop(session);
    let mut reopened = Session::open(&dir, &id).unwrap();
    assert!(
        reopened.messages()[0]
            .text()
            .starts_with("<conversation-summary>")
    );
    mock.clear_requests();
    mock.set_responder(Arc::new(|r: &RecordedRequest| {
        reply(r, OpenAiJson::new().text("resumed"))
    }));
    let out = h.run(&agent, &mut reopened, "and now?").await;
    assert_eq!(out.output, "resumed");
    let resumed = &mock.requests()[0];
    let sent = texts(resumed);
    assert!(sent[1].starts_with("<conversation-summary>"), "{sent:?}");
    assert!(
        !sent
            .iter()
            .any(|t| t == "run all the steps" || t == "doing step 1")
    );
    let transcript = std::fs::read_to_string(dir.join(format!("{id}.jsonl"))).unwrap();
    assert!(
        transcript.contains("doing step 1"),
        "the original turns stay on file"
    );
}

#[tokio::test]
async fn context_too_long_from_the_provider_compacts_once_and_retries() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(MockReply::openai_error(
        400,
        "This model's maximum context length is 8192 tokens.",
        Some("context_length_exceeded"),
    ));
    mock.set_responder(Arc::new(|r: &RecordedRequest| {
        let text = if is_summary_request(r) {
            "Earlier: the user asked about three topics."
        } else {
            "answered after compaction"
        };
        reply(r, OpenAiJson::new().text(text))
    }));
    // No window is known for this model: no automatic compaction, only the reaction.
    let agent = builder(model(&mock))
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .compaction(policy(None))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    push_exchanges(&mut session, 0);
    let out = h.run(&agent, &mut session, "one more").await;
    assert_eq!(out.state, EndState::Completed, "{}", out.output);
    assert_eq!(out.output, "answered after compaction");
    let requests = mock.requests();
    let kinds: Vec<bool> = requests.iter().map(is_summary_request).collect();
    assert_eq!(kinds, [false, true, false], "refused call, summary, retry");
    assert!(texts(&requests[0]).iter().any(|t| t == "question 0"));
    let retried = texts(&requests[2]);
    // No system prompt here: the summary opens the messages.
    assert!(retried[0].contains("three topics"), "{retried:?}");
    assert!(!retried.iter().any(|t| t == "question 0"));
    assert_eq!(retried.last().unwrap(), "one more");
    let events = h.events.events();
    let compactions = events
        .iter()
        .filter(|e| matches!(e, Event::Compaction { .. }))
        .count();
    assert_eq!(compactions, 1);
    assert!(events.iter().any(|e| matches!(e,
        Event::Notice { message } if message.contains("context window of mockai:gpt-mock is unknown"))));
}

#[tokio::test]
async fn a_failed_summary_is_said_and_a_second_refusal_fails_the_run_with_the_reason() {
    let mock = MockServer::start().await.unwrap();
    let refuse = || {
        MockReply::openai_error(
            400,
            "maximum context length exceeded",
            Some("context_length_exceeded"),
        )
    };
    mock.push_openai(refuse());
    mock.push_openai(MockReply::openai_error(500, "summariser down", None));
    let agent = builder(model(&mock)).compaction(policy(None)).build();
    let h = Harness::new();
    let mut session = h.session();
    push_exchanges(&mut session, 0);
    let out = h.run(&agent, &mut session, "one more").await;
    match &out.state {
        EndState::Failed { error } => {
            assert!(error.contains("context too long"), "{error}");
            assert!(
                error.contains("compacting the conversation failed"),
                "{error}"
            );
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(mock.request_count(), 2);
    // Nothing was lost: the history is whole.
    assert_eq!(session.messages().len(), 13);
}

#[tokio::test]
async fn a_forced_compaction_follows_the_users_instructions() {
    let mock = MockServer::start().await.unwrap();
    mock.set_responder(Arc::new(|r: &RecordedRequest| {
        reply(r, OpenAiJson::new().text("kept: the API decisions"))
    }));
    let agent = builder(model(&mock)).build();
    let h = Harness::new();
    let mut session = h.session();
    push_exchanges(&mut session, 0);
    let run = h.run_context(&session);
    let report = agent
        .compact(
            &mut session,
            Some("keep the API decisions"),
            run,
            h.cancel.clone(),
        )
        .await
        .unwrap();
    // Four turns kept (eight messages), the four older ones summarised.
    assert_eq!(report.replaced_messages, 4);
    assert_eq!(session.messages().len(), 9);
    let sent: Value = mock.requests()[0].body.clone();
    assert!(sent.get("tools").is_none());
    let system = sent["messages"][0]["content"].as_str().unwrap();
    assert!(system.ends_with("keep the API decisions"), "{system}");
}

#[tokio::test]
async fn a_forced_compaction_asks_for_no_summary_once_the_budget_is_used_up() {
    let mock = MockServer::start().await.unwrap();
    mock.set_responder(Arc::new(|r: &RecordedRequest| {
        reply(r, OpenAiJson::new().text("a summary"))
    }));
    let agent = builder(model(&mock)).build();
    let h = Harness::new();
    let mut session = h.session();
    push_exchanges(&mut session, 0);
    let budget = Budget::unlimited().child(BudgetLimits {
        max_tokens: Some(100),
        ..BudgetLimits::default()
    });
    budget.charge(Spend::tokens(Usage {
        input_tokens: 100,
        ..Usage::default()
    }));
    let run = Arc::new(RunContext {
        budget,
        ..(*h.run_context(&session)).clone()
    });
    let result = agent
        .compact(&mut session, None, run, h.cancel.clone())
        .await;
    assert_eq!(mock.request_count(), 0, "the summary was asked for");
    let error = result.unwrap_err().to_string();
    assert!(error.contains("token budget is used up"), "{error}");
    assert_eq!(session.messages().len(), 12);
}

#[tokio::test]
async fn an_unknown_window_is_said_once_per_model_not_at_every_run_or_child() {
    let mock = MockServer::start().await.unwrap();
    mock.set_responder(Arc::new(|r: &RecordedRequest| {
        reply(r, OpenAiJson::new().text("ok"))
    }));
    let agent = builder(model(&mock)).compaction(policy(None)).build();
    let h = Harness::new();
    let mut session = h.session();
    let said = || {
        h.events
            .events()
            .iter()
            .filter(|e| matches!(e, Event::Notice { message } if message.contains("is unknown")))
            .count()
    };
    // Each prompt of an interactive session is a run of the same agent: said at the first.
    for prompt in ["one", "two", "three"] {
        let out = h.run(&agent, &mut session, prompt).await;
        assert_eq!(out.state, EndState::Completed);
    }
    assert_eq!(said(), 1);
    // Switching to another model without a window (`/model`): said again, for it.
    let other = || ResolvedModel {
        spec: "mockai:other".into(),
        ..model(&mock)
    };
    let switched = agent.with_model(other());
    h.run(&switched, &mut session, "four").await;
    assert_eq!(said(), 2);
    // Children share the policy: a child on a model already named says nothing, and
    // children on a new one say it once between them, not at every child run.
    let child_run = |session: &Session| {
        Arc::new(RunContext {
            depth: 1,
            ..(*h.run_context(session)).clone()
        })
    };
    let ws = Arc::new(cadre_tools::Workspace::new(h.dir.path()).unwrap());
    for spec in ["mockai:gpt-mock", "mockai:third", "mockai:third"] {
        let child = agent.with_model(ResolvedModel {
            spec: spec.into(),
            ..model(&mock)
        });
        let mut s = h.session();
        let run = child_run(&s);
        child
            .run(
                &mut s,
                Some("job".into()),
                run,
                ws.clone(),
                h.cancel.clone(),
            )
            .await;
    }
    assert_eq!(said(), 3);
    assert!(h.events.events().iter().any(
        |e| matches!(e, Event::Notice { message } if message.contains("mockai:third is unknown"))
    ));
}

#[tokio::test]
async fn a_failed_summary_before_a_call_is_said_and_the_run_goes_on_uncompacted() {
    let mock = MockServer::start().await.unwrap();
    mock.set_responder(Arc::new(|r: &RecordedRequest| {
        if is_summary_request(r) {
            MockReply::openai_error(500, "summariser down", None)
        } else {
            reply(r, OpenAiJson::new().text("answered uncompacted"))
        }
    }));
    let agent = builder(model(&mock))
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .compaction(policy(Some(1_000)))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    push_exchanges(&mut session, 150);
    let out = h.run(&agent, &mut session, "one more").await;
    assert_eq!(out.state, EndState::Completed, "{}", out.output);
    assert_eq!(out.output, "answered uncompacted");
    let kinds: Vec<bool> = mock.requests().iter().map(is_summary_request).collect();
    assert_eq!(
        kinds,
        [true, false],
        "the summary was tried, then the call went out"
    );
    let notice = notice_containing(&h, "not compacted").expect("the failure is said");
    assert!(notice.contains("the summary call failed"), "{notice}");
    assert!(notice.contains("goes on uncompacted"), "{notice}");
    assert!(
        !h.events
            .events()
            .iter()
            .any(|e| matches!(e, Event::Compaction { .. }))
    );
    // Nothing was removed: the whole history went out, and stays.
    assert!(
        texts(&mock.requests()[1])
            .iter()
            .any(|t| t.starts_with("question 0"))
    );
    assert_eq!(session.messages().len(), 14);
}

#[tokio::test]
async fn a_failed_summary_is_not_retried_at_every_turn() {
    let mock = MockServer::start().await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    mock.set_responder(Arc::new(move |r: &RecordedRequest| {
        if is_summary_request(r) {
            return MockReply::openai_error(500, "summariser down", None);
        }
        let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
        if n > 4 {
            return reply(r, OpenAiJson::new().text("done"));
        }
        let args = json!({ "text": format!("s{n}") }).to_string();
        reply(
            r,
            OpenAiJson::new().tool_call(&format!("call_{n}"), "echo", &args),
        )
    }));
    let agent = builder(model(&mock))
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .compaction(policy(Some(4_000)))
        .build();
    let h = Harness::new();
    let mut session = h.session();
    push_exchanges(&mut session, 400);
    let out = h.run(&agent, &mut session, "one more").await;
    assert_eq!(out.state, EndState::Completed, "{}", out.output);
    let kinds: Vec<bool> = mock.requests().iter().map(is_summary_request).collect();
    // Five model calls, each a little longer; the summary was tried before the first only.
    assert_eq!(
        kinds,
        [true, false, false, false, false, false],
        "{kinds:?}"
    );
    let notice = notice_containing(&h, "not compacted").expect("the failure is said");
    assert!(notice.contains("tried again above"), "{notice}");
}

/// Refuses every compaction, and remembers how it was asked.
#[derive(Default)]
struct NoCompaction {
    asked: std::sync::Mutex<Vec<(bool, Option<String>)>>,
}

#[async_trait]
impl cadre_engine::ToolHook for NoCompaction {
    async fn pre_compact(
        &self,
        manual: bool,
        instructions: Option<&str>,
        _run: &RunContext,
    ) -> Option<String> {
        self.asked
            .lock()
            .unwrap()
            .push((manual, instructions.map(str::to_string)));
        Some("keep it all".into())
    }
}

#[tokio::test]
async fn a_hook_that_blocks_an_automatic_compaction_keeps_the_history_and_says_why() {
    let mock = MockServer::start().await.unwrap();
    mock.set_responder(Arc::new(|r: &RecordedRequest| {
        reply(r, OpenAiJson::new().text("answered uncompacted"))
    }));
    let hook = Arc::new(NoCompaction::default());
    let agent = builder(model(&mock))
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .compaction(policy(Some(1_000)))
        .hook(hook.clone())
        .build();
    let h = Harness::new();
    let mut session = h.session();
    push_exchanges(&mut session, 150);
    let out = h.run(&agent, &mut session, "one more").await;
    assert_eq!(out.state, EndState::Completed, "{}", out.output);
    // No summary was asked for: the hook said no before it.
    assert!(!mock.requests().iter().any(is_summary_request));
    assert_eq!(*hook.asked.lock().unwrap(), vec![(false, None)]);
    let notice = notice_containing(&h, "not compacted").expect("the block is said");
    assert!(
        notice.contains("PreCompact hook blocked it: keep it all"),
        "{notice}"
    );
    assert_eq!(session.messages().len(), 14);
}
