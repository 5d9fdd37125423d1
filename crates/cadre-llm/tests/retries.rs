//! Retries and error classification of both HTTP providers against the mock server:
//! error statuses, `Retry-After`, refused connections, and the mock's throughput.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_llm::{Provider, ProviderError, collect};
use cadre_testkit::{AnthropicStream, MockReply, MockServer, OpenAiStream};
use cadre_types::Message;
use common::*;
use std::sync::Arc;
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
async fn retry_after_is_honoured() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(MockReply::openai_error(429, "Rate limit reached", None).retry_after(1));
    mock.push_openai(ok_openai());
    let r = collect(openai(&mock, true).stream(hi())).await.unwrap();
    assert_eq!(r.text, "ok");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let waited = reqs[1].received_at - reqs[0].received_at;
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");
    assert!(waited < Duration::from_secs(3), "retried after {waited:?}");
}

#[tokio::test]
async fn a_retry_after_above_the_cap_fails_at_once_with_the_message() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        MockReply::openai_error(429, "rate limited for 27 h", Some("rate_limit"))
            .retry_after(99999),
    );
    mock.push_openai(ok_openai());
    let started = Instant::now();
    let err = collect(openai(&mock, true).stream(hi())).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(
        err.to_string(),
        "openai returned HTTP 429: rate limited for 27 h (the server asks to wait 27 h, more \
         than the 1 min cadre waits: not retried)"
    );
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(MockReply::openai_error(503, "busy", None));
    mock.push_openai(MockReply::text(503, "Service Unavailable"));
    mock.push_openai(ok_openai());
    mock.push_anthropic(MockReply::anthropic_error(
        529,
        "overloaded_error",
        "Overloaded",
    ));
    mock.push_anthropic(MockReply::anthropic_error(503, "api_error", "busy"));
    mock.push_anthropic(ok_anthropic());
    let r = collect(openai(&mock, true).stream(hi())).await.unwrap();
    assert_eq!(r.text, "ok");
    let r = collect(anthropic(&mock, true).stream(hi())).await.unwrap();
    assert_eq!(r.text, "ok");
    assert_eq!(mock.requests().len(), 6);
}

#[tokio::test]
async fn retries_stop_after_max_attempts() {
    let mock = MockServer::start().await.unwrap();
    mock.set_default_reply(MockReply::openai_error(502, "bad gateway", None));
    let p = openai(&mock, false).with_retry_policy(fast_retries().with_max_attempts(3));
    let err = collect(p.stream(hi())).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Http { status: 502, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("bad gateway"), "{err}");
    assert_eq!(mock.request_count(), 3);
}

#[tokio::test]
async fn auth_failures_are_not_retried_and_name_the_key_variable() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(MockReply::openai_error(
        401,
        "Incorrect API key provided",
        None,
    ));
    mock.push_anthropic(MockReply::anthropic_error(
        401,
        "authentication_error",
        "invalid x-api-key",
    ));
    let err = collect(openai(&mock, true).stream(hi())).await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("authentication failed for openai: check {KEY_VAR}")
    );
    let err = collect(anthropic(&mock, true).stream(hi()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains(KEY_VAR), "{err}");
    assert_eq!(mock.requests().len(), 2);

    // Without api_key_env the default variable is named.
    mock.push_openai(MockReply::openai_error(403, "forbidden", None));
    let mut cfg = config(mock.openai_base_url(), false);
    cfg.api_key_env = None;
    let err = collect(openai_with(cfg).stream(hi())).await.unwrap_err();
    assert!(err.to_string().ends_with("check OPENAI_API_KEY"), "{err}");
}

#[tokio::test]
async fn client_errors_are_classified_and_not_retried() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(MockReply::openai_error(
        404,
        "The model `test-model` does not exist",
        Some("model_not_found"),
    ));
    mock.push_openai(MockReply::openai_error(
        400,
        "This model's maximum context length is 8192 tokens",
        Some("context_length_exceeded"),
    ));
    mock.push_anthropic(MockReply::anthropic_error(
        400,
        "invalid_request_error",
        "prompt is too long: 300000 tokens > 200000 maximum",
    ));
    mock.push_anthropic(MockReply::anthropic_error(
        400,
        "invalid_request_error",
        "bad field",
    ));
    let p = openai(&mock, true);
    let err = collect(p.stream(hi())).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::UnknownModel { ref model, .. } if model == "test-model"),
        "{err}"
    );
    let err = collect(p.stream(hi())).await.unwrap_err();
    assert!(matches!(err, ProviderError::ContextTooLong { .. }), "{err}");
    let a = anthropic(&mock, true);
    let err = collect(a.stream(hi())).await.unwrap_err();
    assert!(matches!(err, ProviderError::ContextTooLong { .. }), "{err}");
    let err = collect(a.stream(hi())).await.unwrap_err();
    assert_eq!(err.to_string(), "anthropic returned HTTP 400: bad field");
    assert_eq!(mock.requests().len(), 4);
}

#[tokio::test]
async fn refused_connections_are_transport_errors() {
    let mock = MockServer::start().await.unwrap();
    let base = mock.openai_base_url();
    let addr = mock.addr();
    drop(mock);
    // The server's task is aborted on drop; its listener closes once the runtime drops it.
    cadre_testkit::eventually("the listener to close", Duration::from_secs(5), || async {
        tokio::net::TcpStream::connect(addr).await.is_err()
    })
    .await;
    let p = openai_with(config(base, true)).with_retry_policy(fast_retries().with_max_attempts(2));
    let err = collect(p.stream(hi())).await.unwrap_err();
    assert!(matches!(err, ProviderError::Transport { .. }), "{err}");
    assert!(
        err.to_string().starts_with("connection to openai failed"),
        "{err}"
    );
}

#[tokio::test]
async fn mock_serves_many_requests_quickly() {
    let reply = ok_openai();
    let mock = MockServer::start_with(Arc::new(move |_| reply.clone()))
        .await
        .unwrap();
    mock.set_recording(false);
    let p = openai(&mock, true);
    let started = Instant::now();
    for _ in 0..300 {
        let r = collect(p.stream(hi())).await.unwrap();
        assert_eq!(r.text, "ok");
    }
    assert_eq!(mock.request_count(), 300);
    assert!(mock.requests().is_empty());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
