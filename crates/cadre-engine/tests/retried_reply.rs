//! A reply that breaks off after text but before any tool call is asked for again: the
//! run keeps only the new reply (in its output and its session) and says that the text
//! shown before was discarded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_llm::openai::OpenAiProvider;
use cadre_llm::{ProviderConfig, ResolvedModel, RetryPolicy};
use cadre_testkit::{MockServer, OpenAiStream};
use cadre_types::{EndState, Event, Message};
use common::*;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn the_text_of_a_broken_reply_is_discarded_and_the_new_reply_kept() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .text("half of a first ")
            .text("answer")
            .into_reply()
            .cut_after(1),
    );
    mock.push_openai(
        OpenAiStream::new()
            .text("the answer")
            .finish("stop")
            .done()
            .into_reply(),
    );
    let cfg = ProviderConfig {
        base_url: Some(mock.openai_base_url()),
        idle_timeout_secs: Some(10),
        ..Default::default()
    };
    let provider = OpenAiProvider::from_config("mockai", &cfg)
        .unwrap()
        .with_retry_policy(RetryPolicy::default().with_base_delay(Duration::from_millis(5)));
    let model = ResolvedModel {
        provider: Arc::new(provider),
        model: "gpt-mock".into(),
        spec: "mockai:gpt-mock".into(),
        price: None,
    };
    let agent = builder(model).build();
    let h = Harness::new();
    let mut session = h.session();
    let out = h.run(&agent, &mut session, "answer").await;
    assert_eq!(out.state, EndState::Completed);
    assert_eq!(out.output, "the answer");
    let replies: Vec<&str> = session
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Assistant { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(replies, vec!["the answer"]);
    assert!(h.events.events().iter().any(
        |e| matches!(e, Event::Notice { message } if message.contains("the text above is discarded"))
    ));
    assert_eq!(mock.requests().len(), 2);
}
