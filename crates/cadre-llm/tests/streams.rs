//! Broken streams against the mock server: cuts before and after content, cuts inside a
//! tool call, streams without an end, error events, stalls and slow starts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_llm::{Provider, ProviderError, RetryPolicy, StreamEvent, collect};
use cadre_testkit::{AnthropicJson, AnthropicStream, MockReply, MockServer, OpenAiStream};
use cadre_types::Message;
use common::*;
use std::time::{Duration, Instant};

fn ok_openai() -> MockReply {
    OpenAiStream::new()
        .text("ok")
        .finish("stop")
        .done()
        .into_reply()
}

fn ok_anthropic() -> MockReply {
    AnthropicStream::new()
        .text(&["ok"])
        .stop("end_turn", 1)
        .into_reply()
}

fn hi() -> cadre_llm::ModelRequest {
    request(vec![Message::user("hi")])
}

#[tokio::test]
async fn stream_cut_before_content_is_retried() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .role()
            .text("never")
            .into_reply()
            .cut_after(1),
    );
    mock.push_openai(ok_openai());
    mock.push_anthropic(
        AnthropicStream::new()
            .start(1, 0)
            .text(&["x"])
            .into_reply()
            .cut_after(1),
    );
    mock.push_anthropic(ok_anthropic());
    let (events, err) = run(&openai(&mock, true), hi()).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(text_of(&events), "ok");
    let (events, err) = run(&anthropic(&mock, true), hi()).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(text_of(&events), "ok");
    assert_eq!(mock.requests().len(), 4);
}

#[tokio::test]
async fn a_cut_after_text_before_any_tool_call_is_retried_once_and_succeeds() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .text("partial")
            .text(" answer")
            .into_reply()
            .cut_after(1),
    );
    mock.push_openai(ok_openai());
    mock.push_anthropic(
        AnthropicStream::new()
            .text(&["partial", "more"])
            .into_reply()
            .cut_after(3),
    );
    mock.push_anthropic(ok_anthropic());
    for p in [
        &openai(&mock, true) as &dyn Provider,
        &anthropic(&mock, true),
    ] {
        let (events, err) = run(p, hi()).await;
        assert!(err.is_none(), "{err:?}");
        // The text of the broken reply, the restart, then the whole new reply.
        let restart = events
            .iter()
            .position(|e| *e == StreamEvent::Restart)
            .expect("a restart");
        assert_eq!(text_of(&events[..restart]), "partial");
        assert_eq!(text_of(&events[restart..]), "ok");
        assert!(matches!(events.last(), Some(StreamEvent::Done { .. })));
        let r = collect(p.stream(hi())).await;
        assert!(r.is_err(), "the queue is empty now");
    }
    // Two requests per provider, one retry each (plus the check on the empty queue).
    assert_eq!(mock.requests().len(), 6);
}

#[tokio::test]
async fn a_cut_after_text_is_an_error_when_no_attempt_is_left() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .text("partial")
            .text(" answer")
            .into_reply()
            .cut_after(1),
    );
    let p = openai(&mock, true).with_retry_policy(RetryPolicy::default().with_max_attempts(1));
    let (events, err) = run(&p, hi()).await;
    assert_eq!(text_of(&events), "partial");
    let err = err.expect("the cut must surface as an error");
    assert!(
        matches!(
            err,
            ProviderError::Stream {
                after_tool_call: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("bad stream from"), "{err}");
}

#[tokio::test]
async fn stream_cut_inside_a_tool_call_never_yields_it() {
    let mock = MockServer::start().await.unwrap();
    // Text, then half a tool call: a reply with tool-call content is never asked for again.
    mock.push_openai(
        OpenAiStream::new()
            .text("Reading")
            .tool_call_start(0, "call_1", "read_file")
            .tool_call_args(0, "{\"path\":\"a.")
            .into_reply()
            .cut_after(3),
    );
    let (s, _) = AnthropicStream::new().text(&["Reading"]).tool_use_open(
        "toolu_1",
        "read_file",
        &["{\"path\":\"a."],
    );
    mock.push_anthropic(s.into_reply().cut_after(7));
    for p in [
        &openai(&mock, true) as &dyn Provider,
        &anthropic(&mock, true),
    ] {
        let (events, err) = run(p, hi()).await;
        assert_eq!(text_of(&events), "Reading");
        assert!(calls_of(&events).is_empty(), "{events:?}");
        let err = err.expect("an error");
        assert!(
            matches!(
                err,
                ProviderError::Stream {
                    after_tool_call: true,
                    ..
                }
            ),
            "{err:?}"
        );
    }
    assert_eq!(mock.requests().len(), 2);

    // A single attempt cut inside a call: an error and no call either.
    mock.push_openai(
        OpenAiStream::new()
            .tool_call_start(0, "call_1", "read_file")
            .tool_call_args(0, "{\"pa")
            .into_reply()
            .cut_after(2),
    );
    let p = openai(&mock, true).with_retry_policy(RetryPolicy::default().with_max_attempts(1));
    let (events, err) = run(&p, hi()).await;
    assert!(events.is_empty(), "{events:?}");
    assert!(matches!(err, Some(ProviderError::Stream { .. })), "{err:?}");
}

#[tokio::test]
async fn stream_cut_after_finish_reason_is_complete() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .tool_call(0, "call_1", "read_file", "{}")
            .finish("tool_calls")
            .usage(1, 1, 0)
            .done()
            .into_reply()
            .cut_after(2),
    );
    let r = collect(openai(&mock, true).stream(hi())).await.unwrap();
    assert_eq!(r.tool_calls, vec![call("call_1", "read_file", "{}")]);
    assert_eq!(r.stop_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn stream_ending_without_done_is_broken() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(OpenAiStream::new().text("half").into_reply());
    mock.push_anthropic(AnthropicStream::new().text(&["half"]).into_reply());
    let once = || RetryPolicy::default().with_max_attempts(1);
    for p in [
        &openai(&mock, true).with_retry_policy(once()) as &dyn Provider,
        &anthropic(&mock, true).with_retry_policy(once()),
    ] {
        let (events, err) = run(p, hi()).await;
        assert_eq!(text_of(&events), "half");
        assert!(!events.iter().any(|e| matches!(e, StreamEvent::Done { .. })));
        let err = err.expect("an unfinished stream is an error");
        assert!(
            matches!(
                err,
                ProviderError::Stream {
                    after_tool_call: false,
                    ..
                }
            ),
            "{err}"
        );
    }
}

#[tokio::test]
async fn anthropic_error_event_before_content_is_retried() {
    let mock = MockServer::start().await.unwrap();
    mock.push_anthropic(
        AnthropicStream::new()
            .start(3, 0)
            .error("overloaded_error", "Overloaded")
            .into_reply(),
    );
    mock.push_anthropic(ok_anthropic());
    let r = collect(anthropic(&mock, true).stream(hi())).await.unwrap();
    assert_eq!(r.text, "ok");
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn stalled_streams_time_out() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .text("wait")
            .finish("stop")
            .done()
            .into_reply()
            .stall_after(1),
    );
    mock.push_anthropic(ok_anthropic().stall_after(2));
    let mut cfg = config(mock.openai_base_url(), true);
    cfg.idle_timeout_secs = Some(1);
    let once = || fast_retries().with_max_attempts(1);
    let o = openai_with(cfg.clone()).with_retry_policy(once());
    cfg.base_url = Some(mock.base_url());
    let a = anthropic_with(cfg).with_retry_policy(once());
    let started = Instant::now();
    let (r1, r2) = tokio::join!(run(&o, hi()), run(&a, hi()));
    let elapsed = started.elapsed();
    for (events, err) in [r1, r2] {
        assert!(
            events
                .iter()
                .all(|e| !matches!(e, StreamEvent::Done { .. }))
        );
        let err = err.expect("a stall must time out");
        assert!(matches!(err, ProviderError::IdleTimeout { .. }), "{err}");
        assert!(err.to_string().contains("no data for 1s"), "{err}");
    }
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(4),
        "{elapsed:?}"
    );
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn a_stall_before_any_tool_call_is_retried() {
    let mock = MockServer::start().await.unwrap();
    // Stalled before the head, and after some text.
    mock.push_openai(ok_openai().delayed(Duration::from_secs(30)));
    mock.push_openai(
        OpenAiStream::new()
            .text("wait")
            .finish("stop")
            .done()
            .into_reply()
            .stall_after(1),
    );
    mock.push_openai(ok_openai());
    let mut cfg = config(mock.openai_base_url(), true);
    cfg.idle_timeout_secs = Some(1);
    let r = collect(openai_with(cfg).stream(hi())).await.unwrap();
    assert_eq!(r.text, "ok");
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test]
async fn slow_first_byte_within_the_idle_limit_is_fine() {
    let mock = MockServer::start().await.unwrap();
    mock.push_anthropic(
        AnthropicJson::new()
            .text("late")
            .into_reply()
            .delayed(Duration::from_millis(300)),
    );
    let r = collect(anthropic(&mock, false).stream(hi())).await.unwrap();
    assert_eq!(r.text, "late");
}
