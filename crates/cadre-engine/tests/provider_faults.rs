//! The provider fault suite: the engine against the testkit's mock servers serving every
//! fault of a model provider — 429/5xx bursts, a reply with text and two tool calls cut at
//! every SSE boundary, stalls before the headers, after them and mid-stream, malformed
//! JSON, duplicate and empty tool-call ids, an unknown tool and an endless stream. Every case
//! ends within a deadline in a retry that succeeds or a clear error, and a tool never runs
//! from a partial call: each tool that ran got its whole arguments, and nothing is lost (the
//! session holds one answer per call).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::{Agent, RunOutcome, Session};
use cadre_llm::anthropic::AnthropicProvider;
use cadre_llm::openai::OpenAiProvider;
use cadre_llm::{ProviderConfig, ResolvedModel, RetryPolicy};
use cadre_testkit::{AnthropicStream, MockReply, MockServer, OpenAiStream};
use cadre_tools::ToolRegistry;
use cadre_types::{EndState, LimitKind, Message};
use common::*;
use std::sync::Arc;
use std::time::Duration;

/// No case may take longer than this (the idle timeout is 1 s, retries pause 5 ms).
const DEADLINE: Duration = Duration::from_secs(60);
/// The final answer of every reply that ends a run.
const ANSWER: &str = "both tools answered";

fn config(base_url: String, attempts: u32) -> ProviderConfig {
    ProviderConfig {
        base_url: Some(base_url),
        max_attempts: Some(attempts),
        idle_timeout_secs: Some(1),
        ..Default::default()
    }
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy::default().with_base_delay(Duration::from_millis(5))
}

fn openai(mock: &MockServer, attempts: u32) -> ResolvedModel {
    let provider = OpenAiProvider::from_config("mockai", &config(mock.openai_base_url(), attempts))
        .unwrap()
        .with_retry_policy(fast_retries());
    ResolvedModel {
        provider: Arc::new(provider),
        model: "gpt-mock".into(),
        spec: "mockai:gpt-mock".into(),
        price: None,
    }
}

fn anthropic(mock: &MockServer, attempts: u32) -> ResolvedModel {
    let provider = AnthropicProvider::from_config("anthropic", &config(mock.base_url(), attempts))
        .unwrap()
        .with_retry_policy(fast_retries());
    ResolvedModel {
        provider: Arc::new(provider),
        model: "claude-mock".into(),
        spec: "anthropic:claude-mock".into(),
        price: None,
    }
}

/// An agent with the `echo` tool, its reply capped at 64 KiB.
fn agent(model: ResolvedModel) -> Agent {
    builder(model)
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .max_reply_bytes(64 * 1024)
        .build()
}

/// Run `agent` once, failing the test when the run does not end by [`DEADLINE`].
async fn run(agent: &Agent) -> (RunOutcome, Session) {
    let h = Harness::new();
    let mut session = h.session();
    let out = tokio::time::timeout(DEADLINE, h.run(agent, &mut session, "use the tools"))
        .await
        .expect("the run did not end within the deadline");
    (out, session)
}

/// The tool answers in the session, as (call id, content, is_error).
fn tool_answers(session: &Session) -> Vec<(String, String, bool)> {
    session
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => Some((tool_call_id.clone(), content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

/// Every recorded tool call has exactly one answer, and the echo tool ran only with whole
/// arguments (`alpha` or `beta`).
fn assert_nothing_partial_or_lost(session: &Session) {
    let calls: Vec<String> = session
        .messages()
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => {
                tool_calls.iter().map(|c| c.id.clone()).collect()
            }
            _ => Vec::new(),
        })
        .collect();
    let answers = tool_answers(session);
    let answered: Vec<&String> = answers.iter().map(|(id, _, _)| id).collect();
    assert_eq!(
        answered,
        calls.iter().collect::<Vec<_>>(),
        "each call answered once"
    );
    for (_, content, is_error) in &answers {
        if !is_error {
            assert!(
                content == "echo:alpha" || content == "echo:beta",
                "a tool ran with partial arguments: {content}"
            );
        }
    }
}

/// The OpenAI reply of the suite: text, then two tool calls whose arguments arrive in
/// pieces, then the finish and usage chunks.
fn two_calls_openai() -> OpenAiStream {
    OpenAiStream::new()
        .role()
        .text("Calling ")
        .text("two tools.")
        .tool_call_start(0, "call_a", "echo")
        .tool_call_args(0, "{\"text\":")
        .tool_call_args(0, "\"alpha\"}")
        .tool_call_start(1, "call_b", "echo")
        .tool_call_args(1, "{\"text\":")
        .tool_call_args(1, "\"beta\"}")
        .finish("tool_calls")
        .usage(10, 5, 0)
        .done()
}

fn final_openai() -> MockReply {
    OpenAiStream::new()
        .text(ANSWER)
        .finish("stop")
        .done()
        .into_reply()
}

/// What a run that got the whole two-call reply and then the final one looks like.
fn assert_both_tools_ran(out: &RunOutcome, session: &Session) {
    assert_eq!(out.state, EndState::Completed, "{}", out.output);
    assert_eq!(out.output, ANSWER);
    let answers: Vec<String> = tool_answers(session)
        .into_iter()
        .map(|(_, c, _)| c)
        .collect();
    assert_eq!(answers, vec!["echo:alpha", "echo:beta"]);
    assert_nothing_partial_or_lost(session);
}

#[tokio::test]
async fn bursts_of_429_and_5xx_are_retried_and_a_longer_burst_fails_naming_the_status() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(MockReply::openai_error(429, "slow down", None));
    mock.push_openai(MockReply::openai_error(503, "overloaded", None));
    mock.push_openai(MockReply::openai_error(500, "oops", None));
    mock.push_openai(two_calls_openai().into_reply());
    mock.push_openai(final_openai());
    let (out, session) = run(&agent(openai(&mock, 4))).await;
    assert_both_tools_ran(&out, &session);
    assert_eq!(mock.requests().len(), 5);

    let mock = MockServer::start().await.unwrap();
    for _ in 0..4 {
        mock.push_openai(MockReply::openai_error(503, "still overloaded", None));
    }
    let (out, session) = run(&agent(openai(&mock, 4))).await;
    let EndState::Failed { error } = &out.state else {
        panic!("{:?}", out.state)
    };
    assert!(error.contains("503"), "{error}");
    assert!(error.contains("still overloaded"), "{error}");
    assert_eq!(mock.requests().len(), 4, "max_attempts bounds the burst");
    assert!(tool_answers(&session).is_empty());
}

#[tokio::test]
async fn a_reply_cut_at_any_sse_boundary_is_retried_or_fails_and_never_runs_a_partial_call() {
    let frames = two_calls_openai().frames().len();
    // The first frame that carries tool-call content: role, two text chunks, then calls.
    let first_call_frame = 3;
    let mut retried = 0;
    let mut failed = 0;
    for cut in 0..frames - 1 {
        let mock = MockServer::start().await.unwrap();
        mock.push_openai(two_calls_openai().into_reply().cut_after(cut));
        mock.push_openai(two_calls_openai().into_reply());
        mock.push_openai(final_openai());
        let (out, session) = run(&agent(openai(&mock, 4))).await;
        assert_nothing_partial_or_lost(&session);
        if cut <= first_call_frame {
            // Nothing of a tool call had arrived: asked again, and the new reply runs.
            assert_both_tools_ran(&out, &session);
            assert_eq!(mock.requests().len(), 3, "cut after {cut} frames");
            retried += 1;
        } else {
            match &out.state {
                // The calls were whole when the stream broke (only the usage or [DONE]
                // frames were lost): they ran, and so did the next reply's.
                EndState::Completed => {
                    assert_eq!(out.output, ANSWER);
                    let answers: Vec<String> = tool_answers(&session)
                        .into_iter()
                        .map(|(_, c, _)| c)
                        .collect();
                    assert_eq!(answers, ["echo:alpha", "echo:beta"].repeat(2), "cut {cut}");
                }
                EndState::Failed { error } => {
                    assert!(
                        tool_answers(&session).is_empty(),
                        "cut after {cut}: a tool ran from a broken reply"
                    );
                    assert!(!error.is_empty());
                    assert_eq!(mock.requests().len(), 1, "never retried after a call began");
                    failed += 1;
                }
                other => panic!("cut after {cut} frames: {other:?}"),
            }
        }
    }
    assert_eq!(retried, first_call_frame + 1);
    assert!(failed > 0);

    // The same on the Anthropic wire: a cut inside the second tool_use block.
    let reply = || {
        AnthropicStream::new()
            .start(10, 0)
            .text(&["Calling ", "two tools."])
            .tool_use("toolu_a", "echo", &["{\"text\":", "\"alpha\"}"])
            .tool_use("toolu_b", "echo", &["{\"text\":", "\"beta\"}"])
            .stop("tool_use", 5)
    };
    let frames = reply().frames().len();
    for cut in 0..frames - 1 {
        let mock = MockServer::start().await.unwrap();
        mock.push_anthropic(reply().into_reply().cut_after(cut));
        mock.push_anthropic(reply().into_reply());
        mock.push_anthropic(
            AnthropicStream::new()
                .start(10, 0)
                .text(&[ANSWER])
                .stop("end_turn", 2)
                .into_reply(),
        );
        let (out, session) = run(&agent(anthropic(&mock, 4))).await;
        assert_nothing_partial_or_lost(&session);
        match &out.state {
            EndState::Completed => assert_eq!(out.output, ANSWER, "cut {cut}"),
            EndState::Failed { .. } => assert!(tool_answers(&session).is_empty()),
            other => panic!("cut after {cut} frames: {other:?}"),
        }
    }
}

#[tokio::test]
async fn stalls_before_the_headers_after_them_and_mid_stream_are_given_up_and_retried() {
    let stalls = [
        (
            "before the headers",
            final_openai().delayed(Duration::from_secs(30)),
        ),
        (
            "after the headers",
            two_calls_openai().into_reply().stall_after(0),
        ),
        ("mid-text", two_calls_openai().into_reply().stall_after(2)),
    ];
    for (what, stall) in stalls {
        let mock = MockServer::start().await.unwrap();
        mock.push_openai(stall);
        mock.push_openai(two_calls_openai().into_reply());
        mock.push_openai(final_openai());
        let (out, session) = run(&agent(openai(&mock, 4))).await;
        assert_both_tools_ran(&out, &session);
        assert_eq!(mock.requests().len(), 3, "a stall {what}");
    }

    // A stall inside a tool call is not retried: a clear error, and no tool runs.
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(two_calls_openai().into_reply().stall_after(5));
    let (out, session) = run(&agent(openai(&mock, 4))).await;
    let EndState::Failed { error } = &out.state else {
        panic!("{:?}", out.state)
    };
    assert!(
        error.contains("idle") || error.contains("stalled") || error.contains("no data"),
        "{error}"
    );
    assert!(tool_answers(&session).is_empty());
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn malformed_json_in_the_stream_is_a_clear_error_and_runs_nothing() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .role()
            .tool_call_start(0, "call_a", "echo")
            .raw("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\"\n\n")
            .finish("tool_calls")
            .done()
            .into_reply(),
    );
    let (out, session) = run(&agent(openai(&mock, 4))).await;
    let EndState::Failed { error } = &out.state else {
        panic!("{:?}", out.state)
    };
    assert!(error.contains("cannot decode chunk"), "{error}");
    assert!(tool_answers(&session).is_empty());

    // Arguments that are not JSON reach no tool: the model is told, and carries on.
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .tool_call(0, "call_a", "echo", "{\"text\": alpha")
            .finish("tool_calls")
            .done()
            .into_reply(),
    );
    mock.push_openai(final_openai());
    let (out, session) = run(&agent(openai(&mock, 4))).await;
    assert_eq!(out.state, EndState::Completed);
    let answers = tool_answers(&session);
    assert_eq!(answers.len(), 1);
    assert!(answers[0].2, "{answers:?}");
    assert_nothing_partial_or_lost(&session);
}

#[tokio::test]
async fn duplicate_and_empty_call_ids_each_get_their_own_answer() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .tool_call(0, "call_x", "echo", "{\"text\":\"alpha\"}")
            .tool_call(1, "call_x", "echo", "{\"text\":\"beta\"}")
            .tool_call(2, "", "echo", "{\"text\":\"alpha\"}")
            .finish("tool_calls")
            .done()
            .into_reply(),
    );
    mock.push_openai(final_openai());
    let (out, session) = run(&agent(openai(&mock, 4))).await;
    assert_eq!(out.state, EndState::Completed);
    let answers = tool_answers(&session);
    let mut ids: Vec<&str> = answers.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids.len(), 3);
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "ids made unique: {answers:?}");
    assert!(ids.iter().all(|id| !id.is_empty()));
    assert_nothing_partial_or_lost(&session);
    // What went back to the provider ties each result to its renamed call.
    let second = &mock.requests()[1].body;
    let sent: Vec<&str> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(sent.len(), 3);
}

#[tokio::test]
async fn an_unknown_tool_is_answered_with_an_error_and_the_run_goes_on() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .tool_call(0, "call_a", "no_such_tool", "{}")
            .tool_call(1, "call_b", "echo", "{\"text\":\"beta\"}")
            .finish("tool_calls")
            .done()
            .into_reply(),
    );
    mock.push_openai(final_openai());
    let (out, session) = run(&agent(openai(&mock, 4))).await;
    assert_eq!(out.state, EndState::Completed);
    let answers = tool_answers(&session);
    assert_eq!(answers.len(), 2);
    assert!(
        answers[0].2 && answers[0].1.contains("no_such_tool"),
        "{answers:?}"
    );
    assert_eq!(answers[1].1, "echo:beta");
    assert_nothing_partial_or_lost(&session);
}

#[tokio::test]
async fn an_endless_stream_ends_limit_reached_without_running_a_tool() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .text("thinking aloud ")
            .tool_call_start(0, "call_a", "echo")
            .tool_call_args(0, "{\"text\":\"")
            .tool_call_args(0, &"a".repeat(4096))
            .into_reply()
            .repeat_last(),
    );
    let (out, session) = run(&agent(openai(&mock, 4))).await;
    assert_eq!(
        out.state,
        EndState::LimitReached {
            limit: LimitKind::ReplyTooLong
        }
    );
    assert_eq!(out.output, "thinking aloud ");
    assert!(tool_answers(&session).is_empty());
    assert_eq!(
        mock.requests().len(),
        1,
        "a reply too long is not asked again"
    );
}
