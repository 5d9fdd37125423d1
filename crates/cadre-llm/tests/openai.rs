//! OpenAI-compatible provider against the mock server: requests on the wire and replies
//! decoded, streamed and not.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_llm::{Provider, ProviderConfig, ProviderRegistry, StreamEvent, collect};
use cadre_testkit::{MockReply, MockServer, OpenAiJson, OpenAiStream};
use cadre_types::{Message, Usage};
use common::*;
use serde_json::json;
use std::collections::HashMap;

#[tokio::test]
async fn streamed_text_reply_and_request_shape() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .role()
            .text("Hel")
            .text("lo")
            .finish("stop")
            .usage(11, 2, 4)
            .done()
            .into_reply(),
    );
    let p = openai(&mock, true);
    let (events, err) = run(&p, request(vec![Message::user("hi")])).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta("Hel".into()),
            StreamEvent::TextDelta("lo".into()),
            StreamEvent::Usage(Usage {
                input_tokens: 11,
                output_tokens: 2,
                cached_input_tokens: 4,
                ..Usage::default()
            }),
            StreamEvent::ResponseId("chatcmpl-mock".into()),
            StreamEvent::Done {
                stop_reason: Some("stop".into())
            },
        ]
    );
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {}", key()).as_str())
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.body,
        json!({
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "hi"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "read_file", "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                               "required": ["path"]}}}],
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    );
}

#[tokio::test]
async fn plain_text_reply() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiJson::new()
            .reasoning("thought")
            .text("Hello")
            .usage(5, 1, 0)
            .into_reply(),
    );
    let p = openai(&mock, false);
    let r = collect(p.stream(request(vec![Message::user("hi")])))
        .await
        .unwrap();
    assert_eq!(r.text, "Hello");
    assert_eq!(r.thinking, "thought");
    assert_eq!(r.usage.input_tokens, 5);
    assert_eq!(r.stop_reason.as_deref(), Some("stop"));
    let body = &mock.requests()[0].body;
    assert_eq!(body["stream"], json!(false));
    assert!(body.get("stream_options").is_none());
}

/// A tool call, then the follow-up request carrying the call and its result.
async fn tool_round_trip(stream: bool) {
    let mock = MockServer::start().await.unwrap();
    let first = if stream {
        OpenAiStream::new()
            .role()
            .tool_call_start(0, "call_1", "read_file")
            .tool_call_args(0, "{\"pa")
            .tool_call_args(0, "th\":\"a.txt\"}")
            .finish("tool_calls")
            .done()
            .into_reply()
    } else {
        OpenAiJson::new()
            .tool_call("call_1", "read_file", r#"{"path":"a.txt"}"#)
            .into_reply()
    };
    mock.push_openai(first);
    mock.push_openai(MockReply::by_stream(
        OpenAiStream::new()
            .text("done")
            .finish("stop")
            .done()
            .into_reply(),
        OpenAiJson::new().text("done").into_reply(),
    ));
    let p = openai(&mock, stream);
    let history = vec![Message::user("read a.txt")];
    let r1 = collect(p.stream(request(history.clone()))).await.unwrap();
    assert_eq!(
        r1.tool_calls,
        vec![call("call_1", "read_file", r#"{"path":"a.txt"}"#)]
    );
    assert_eq!(r1.stop_reason.as_deref(), Some("tool_calls"));

    let mut history = history;
    history.push(assistant_calls(r1.tool_calls.clone()));
    history.push(tool_result("call_1", "hello", false));
    let r2 = collect(p.stream(request(history))).await.unwrap();
    assert_eq!(r2.text, "done");

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].body["stream"], json!(stream));
    assert_eq!(reqs[1].body["model"], json!("test-model"));
    assert_eq!(
        reqs[1].body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "read a.txt"},
            {"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "hello"}
        ])
    );
    assert_eq!(
        reqs[1].body["tools"][0]["function"]["name"],
        json!("read_file")
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
async fn interleaved_parallel_tool_calls_assemble() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .role()
            .text("Reading both.")
            .tool_call_start(0, "call_a", "read_file")
            .tool_call_start(1, "call_b", "read_file")
            .tool_call_args(0, "{\"path\":")
            .tool_call_args(1, "{\"path\":")
            .tool_call_args(0, "\"a.txt\"}")
            .tool_call_args(1, "\"b.txt\"}")
            .finish("tool_calls")
            .usage(20, 10, 0)
            .done()
            .into_reply(),
    );
    let p = openai(&mock, true);
    let (events, err) = run(&p, request(vec![Message::user("x")])).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        calls_of(&events),
        vec![
            call("call_a", "read_file", r#"{"path":"a.txt"}"#),
            call("call_b", "read_file", r#"{"path":"b.txt"}"#),
        ]
    );
    assert_eq!(text_of(&events), "Reading both.");
    assert!(matches!(events.last(), Some(StreamEvent::Done { .. })));
}

#[tokio::test]
async fn reasoning_content_becomes_thinking() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .reasoning("let me ")
            .reasoning("think")
            .text("42")
            .finish("stop")
            .done()
            .into_reply(),
    );
    let r = collect(openai(&mock, true).stream(request(vec![Message::user("q")])))
        .await
        .unwrap();
    assert_eq!(r.thinking, "let me think");
    assert_eq!(r.text, "42");
}

#[tokio::test]
async fn multibyte_characters_split_across_chunks_arrive_intact() {
    let mock = MockServer::start().await.unwrap();
    let text = "héllo wörld — 日本語 🎉";
    mock.push_openai(
        OpenAiStream::new()
            .text(text)
            .finish("stop")
            .done()
            .into_reply()
            .split_inside('🎉'),
    );
    mock.push_openai(
        OpenAiStream::new()
            .text(text)
            .finish("stop")
            .done()
            .into_reply()
            .split_every(3),
    );
    let p = openai(&mock, true);
    for _ in 0..2 {
        let r = collect(p.stream(request(vec![Message::user("q")])))
            .await
            .unwrap();
        assert_eq!(r.text, text);
    }
}

#[tokio::test]
async fn no_key_means_no_authorization_and_headers_expand_env() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(OpenAiJson::new().text("ok").into_reply());
    let mut cfg = config(mock.base_url(), false);
    cfg.api_key_env = Some("CADRE_TEST_SURELY_UNSET_KEY".into());
    cfg.headers = [("X-Title".to_string(), format!("app-${{{KEY_VAR}}}"))]
        .into_iter()
        .collect();
    let p = openai_with(cfg);
    let r = collect(p.stream(request(vec![Message::user("q")])))
        .await
        .unwrap();
    assert_eq!(r.text, "ok");
    let req = &mock.requests()[0];
    assert_eq!(req.path, "/chat/completions");
    assert_eq!(req.header("authorization"), None);
    assert_eq!(
        req.header("x-title"),
        Some(format!("app-{}", key()).as_str())
    );
}

#[tokio::test]
async fn registry_routes_to_configured_provider() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .text("via registry")
            .finish("stop")
            .done()
            .into_reply(),
    );
    let mut cfgs: HashMap<String, ProviderConfig> = HashMap::new();
    cfgs.insert("local".into(), config(mock.openai_base_url(), true));
    let reg = ProviderRegistry::new(cfgs, "openai");
    let resolved = reg.resolve("local:qwen3:8b").unwrap();
    let mut req = request(vec![Message::user("q")]);
    req.model = resolved.model.clone();
    let r = collect(resolved.provider.stream(req)).await.unwrap();
    assert_eq!(r.text, "via registry");
    assert_eq!(mock.requests()[0].body["model"], json!("qwen3:8b"));
}

#[tokio::test]
async fn max_concurrent_requests_queues_calls_beyond_the_cap() {
    let mock = MockServer::start().await.unwrap();
    let delay = std::time::Duration::from_millis(80);
    mock.set_default_reply(OpenAiJson::new().text("ok").into_reply().delayed(delay));
    let mut cfg = config(mock.base_url(), false);
    cfg.max_concurrent_requests = Some(1);
    let p = openai_with(cfg);
    let calls = (0..3).map(|_| collect(p.stream(request(vec![Message::user("q")]))));
    for r in futures::future::join_all(calls).await {
        assert_eq!(r.unwrap().text, "ok");
    }
    // One at a time: each request reached the server only after the previous reply.
    let mut seen: Vec<_> = mock.requests().iter().map(|r| r.received_at).collect();
    seen.sort();
    assert_eq!(seen.len(), 3);
    for pair in seen.windows(2) {
        assert!(pair[1].duration_since(pair[0]) >= delay, "{seen:?}");
    }
}

#[tokio::test]
async fn tool_images_follow_the_tool_messages_as_a_user_message_when_enabled() {
    let mock = MockServer::start().await.unwrap();
    for _ in 0..2 {
        mock.push_openai(OpenAiJson::new().text("seen").into_reply());
    }
    let on = openai_with(ProviderConfig {
        images: Some(true),
        ..config(mock.openai_base_url(), false)
    });
    collect(on.stream(request(history_with_image())))
        .await
        .unwrap();
    // A compatible server other than OpenAI's own gets text only by default.
    let off = openai(&mock, false);
    collect(off.stream(request(history_with_image())))
        .await
        .unwrap();

    let reqs = mock.requests();
    let messages = reqs[0].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"]
    );
    assert_eq!(
        messages[5]["content"],
        json!([
            {"type": "text", "text": "Images returned by tool call c1 (shot):"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}
        ])
    );
    assert_eq!(
        messages[3]["content"],
        json!("[image image/png, 4 bytes, saved to x.png]")
    );
    let plain = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(plain.len(), 5);
    assert!(!reqs[1].body.to_string().contains("image_url"));
}
