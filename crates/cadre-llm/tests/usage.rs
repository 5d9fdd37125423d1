//! Cached-token accounting from both providers, streamed and not: Anthropic's
//! `cache_read_input_tokens` / `cache_creation_input_tokens` and OpenAI's
//! `prompt_tokens_details.cached_tokens`, as the mock server sends them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_llm::{Provider, collect};
use cadre_testkit::{AnthropicJson, AnthropicStream, MockServer, OpenAiJson, OpenAiStream};
use cadre_types::{Message, Usage};
use common::*;

fn usage(input: u64, cached: u64, written: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: cached,
        cache_write_tokens: written,
        ..Usage::default()
    }
}

async fn anthropic_usage(stream: bool) -> Usage {
    let mock = MockServer::start().await.unwrap();
    // 40 uncached, 900 read from the cache, 60 written to it.
    let reply = if stream {
        AnthropicStream::new()
            .start_with_cache(40, 900, 60)
            .text(&["ok"])
            .stop("end_turn", 7)
            .into_reply()
    } else {
        AnthropicJson::new()
            .text("ok")
            .usage(40, 7, 900)
            .cache_write(60)
            .into_reply()
    };
    mock.push_anthropic(reply);
    let p = anthropic(&mock, stream);
    collect(p.stream(request(vec![Message::user("hi")])))
        .await
        .unwrap()
        .usage
}

async fn openai_usage(stream: bool) -> Usage {
    let mock = MockServer::start().await.unwrap();
    // 1000 prompt tokens of which 768 cached.
    let reply = if stream {
        OpenAiStream::new()
            .role()
            .text("ok")
            .finish("stop")
            .usage(1000, 7, 768)
            .done()
            .into_reply()
    } else {
        OpenAiJson::new()
            .text("ok")
            .usage(1000, 7, 768)
            .into_reply()
    };
    mock.push_openai(reply);
    let p = openai(&mock, stream);
    collect(p.stream(request(vec![Message::user("hi")])))
        .await
        .unwrap()
        .usage
}

#[tokio::test]
async fn anthropic_cache_reads_and_writes_are_counted_streamed_and_not() {
    for stream in [true, false] {
        let u = anthropic_usage(stream).await;
        assert_eq!(u, usage(1000, 900, 60, 7), "stream={stream}");
        assert_eq!(u.uncached_input_tokens(), 40);
    }
}

#[tokio::test]
async fn openai_cached_tokens_are_counted_streamed_and_not() {
    for stream in [true, false] {
        let u = openai_usage(stream).await;
        assert_eq!(u, usage(1000, 768, 0, 7), "stream={stream}");
        assert_eq!(u.uncached_input_tokens(), 232);
    }
}
