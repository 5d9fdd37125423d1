//! Anthropic provider against the mock server: requests on the wire (headers, system,
//! alternation and merging of tool results) and replies decoded, streamed and not.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_llm::{Provider, ProviderConfig, StreamEvent, collect};
use cadre_testkit::{AnthropicJson, AnthropicStream, MockReply, MockServer};
use cadre_types::{Message, Usage};
use common::*;
use serde_json::json;

#[tokio::test]
async fn streamed_text_reply_and_request_shape() {
    let mock = MockServer::start().await.unwrap();
    mock.push_anthropic(
        AnthropicStream::new()
            .start(10, 30)
            .ping()
            .thinking("pondering", Some("sig-1"))
            .text(&["Hel", "lo"])
            .stop("end_turn", 5)
            .into_reply(),
    );
    let p = anthropic(&mock, true);
    let (events, err) = run(&p, request(vec![Message::user("hi")])).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        events,
        vec![
            StreamEvent::ThinkingDelta("pondering".into()),
            StreamEvent::ThinkingSignature("sig-1".into()),
            StreamEvent::TextDelta("Hel".into()),
            StreamEvent::TextDelta("lo".into()),
            StreamEvent::Usage(Usage {
                input_tokens: 40,
                output_tokens: 5,
                cached_input_tokens: 30,
                ..Usage::default()
            }),
            StreamEvent::ResponseId("msg_mock".into()),
            StreamEvent::Done {
                stop_reason: Some("end_turn".into())
            },
        ]
    );
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(key().as_str()));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.body,
        json!({
            "model": "test-model",
            "max_tokens": 8192,
            "system": [{"type": "text", "text": "You are terse.",
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}],
            "tools": [{"name": "read_file", "description": "Read a file",
                       "input_schema": {"type": "object",
                                        "properties": {"path": {"type": "string"}},
                                        "required": ["path"]},
                       "cache_control": {"type": "ephemeral"}}],
            "stream": true
        })
    );
}

#[tokio::test]
async fn plain_text_reply() {
    let mock = MockServer::start().await.unwrap();
    mock.push_anthropic(
        AnthropicJson::new()
            .thinking("hm", "sig")
            .text("Hello")
            .usage(7, 3, 0)
            .into_reply(),
    );
    let p = anthropic(&mock, false);
    let mut req = request(vec![Message::user("hi")]);
    req.max_output_tokens = Some(100);
    req.temperature = Some(0.5);
    let r = collect(p.stream(req)).await.unwrap();
    assert_eq!(r.text, "Hello");
    assert_eq!(r.thinking, "hm");
    assert_eq!(r.thinking_signature.as_deref(), Some("sig"));
    assert_eq!(r.usage.output_tokens, 3);
    assert_eq!(r.stop_reason.as_deref(), Some("end_turn"));
    let body = &mock.requests()[0].body;
    assert_eq!(body["stream"], json!(false));
    assert_eq!(body["max_tokens"], json!(100));
    assert_eq!(body["temperature"], json!(0.5));
}

/// Two tool calls, then the follow-up carrying them and both results, which must merge
/// into one user message.
async fn tool_round_trip(stream: bool) {
    let mock = MockServer::start().await.unwrap();
    let first = if stream {
        AnthropicStream::new()
            .start(5, 0)
            .text(&["Reading."])
            .tool_use("toolu_a", "read_file", &["{\"path\":", "\"a.txt\"}"])
            .tool_use("toolu_b", "read_file", &["{\"path\":\"b.txt\"}"])
            .stop("tool_use", 9)
            .into_reply()
    } else {
        AnthropicJson::new()
            .text("Reading.")
            .tool_use("toolu_a", "read_file", json!({"path": "a.txt"}))
            .tool_use("toolu_b", "read_file", json!({"path": "b.txt"}))
            .into_reply()
    };
    mock.push_anthropic(first);
    mock.push_anthropic(MockReply::by_stream(
        AnthropicStream::new()
            .text(&["done"])
            .stop("end_turn", 1)
            .into_reply(),
        AnthropicJson::new().text("done").into_reply(),
    ));
    let p = anthropic(&mock, stream);
    let history = vec![Message::user("read both")];
    let r1 = collect(p.stream(request(history.clone()))).await.unwrap();
    assert_eq!(r1.text, "Reading.");
    assert_eq!(
        r1.tool_calls,
        vec![
            call("toolu_a", "read_file", r#"{"path":"a.txt"}"#),
            call("toolu_b", "read_file", r#"{"path":"b.txt"}"#),
        ]
    );
    assert_eq!(r1.stop_reason.as_deref(), Some("tool_use"));

    let mut history = history;
    history.push(Message::Assistant {
        content: r1.text.clone(),
        thinking: None,
        thinking_signature: None,
        tool_calls: r1.tool_calls.clone(),
    });
    history.push(tool_result("toolu_a", "alpha", false));
    history.push(tool_result("toolu_b", "no such file", true));
    let r2 = collect(p.stream(request(history))).await.unwrap();
    assert_eq!(r2.text, "done");

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].body["stream"], json!(stream));
    assert_eq!(reqs[1].body["model"], json!("test-model"));
    assert_eq!(reqs[1].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        reqs[1].body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "read both"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"path": "b.txt"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "alpha", "is_error": false},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such file", "is_error": true,
                 "cache_control": {"type": "ephemeral"}}
            ]}
        ])
    );
}

#[tokio::test]
async fn streamed_tool_call_round_trip() {
    tool_round_trip(true).await;
}

#[tokio::test]
async fn plain_tool_call_round_trip() {
    tool_round_trip(false).await;
}

#[tokio::test]
async fn multibyte_characters_split_across_chunks_arrive_intact() {
    let mock = MockServer::start().await.unwrap();
    let text = "naïve café — 你好 🦀";
    mock.push_anthropic(
        AnthropicStream::new()
            .text(&[text])
            .tool_use("t", "read_file", &["{\"path\":\"日本.txt\"}"])
            .stop("tool_use", 1)
            .into_reply()
            .split_every(1),
    );
    let r = collect(anthropic(&mock, true).stream(request(vec![Message::user("q")])))
        .await
        .unwrap();
    assert_eq!(r.text, text);
    assert_eq!(r.tool_calls[0].arguments, r#"{"path":"日本.txt"}"#);
}

#[tokio::test]
async fn tool_images_go_inside_their_tool_result_unless_turned_off() {
    let mock = MockServer::start().await.unwrap();
    for _ in 0..2 {
        mock.push_anthropic(AnthropicJson::new().text("seen").into_reply());
    }
    let on = anthropic(&mock, false);
    collect(on.stream(request(history_with_image())))
        .await
        .unwrap();
    let off = anthropic_with(ProviderConfig {
        images: Some(false),
        ..config(mock.base_url(), false)
    });
    collect(off.stream(request(history_with_image())))
        .await
        .unwrap();

    let reqs = mock.requests();
    let results = &reqs[0].body["messages"][2]["content"];
    assert_eq!(
        results[0]["content"],
        json!([
            {"type": "text", "text": "[image image/png, 4 bytes, saved to x.png]"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}}
        ])
    );
    assert_eq!(results[1]["content"], json!("text"));
    let plain = &reqs[1].body["messages"][2]["content"];
    assert_eq!(
        plain[0]["content"],
        json!("[image image/png, 4 bytes, saved to x.png]")
    );
}
