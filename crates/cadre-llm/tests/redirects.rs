//! A provider follows a redirect only within the origin it sent the request to: a redirect
//! to another host would take the API key (`x-api-key` is not one of the headers reqwest
//! takes off) and, for a 307, the conversation along.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_testkit::{WebPage, WebServer};
use cadre_types::Message;
use common::{anthropic_with, config, key, openai_with, request, run};

/// A page that answers every request with a redirect to `to`.
fn redirecting(status: u16, to: &str) -> WebPage {
    WebPage::redirect(to).status(status)
}

#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed_and_says_where_it_pointed() {
    let elsewhere = WebServer::start().await.unwrap();
    let provider_side = WebServer::start().await.unwrap();
    for status in [307, 308, 302] {
        provider_side.page(
            "/v1/messages",
            redirecting(status, &elsewhere.url("/v1/messages")),
        );
        let anthropic = anthropic_with(config(provider_side.url(""), true));
        let (_, err) = run(&anthropic, request(vec![Message::user("secret plans")])).await;
        let err = err.expect("the redirect is an error").to_string();
        assert_eq!(
            err.matches(&format!("HTTP {status}")).count(),
            1,
            "the status is said once: {err}"
        );
        assert!(err.contains(&elsewhere.url("/v1/messages")), "{err}");
        assert!(err.contains("not followed"), "{err}");
    }
    assert!(
        elsewhere.requests().is_empty(),
        "the other host was sent {:?}",
        elsewhere.requests()
    );
    // The key did reach the host it was meant for.
    let sent = provider_side.requests();
    assert!(
        sent.iter()
            .all(|r| r.header("x-api-key") == Some(key().as_str()))
    );
}

#[tokio::test]
async fn a_redirect_within_the_origin_is_followed() {
    let front = WebServer::start().await.unwrap();
    front.page(
        "/old/chat/completions",
        redirecting(307, &front.url("/new/chat/completions")),
    );
    front.page(
        "/new/chat/completions",
        redirecting(307, &front.url("/newer/chat/completions")),
    );
    let openai = openai_with(config(front.url("/old"), false));
    let (_, err) = run(&openai, request(vec![Message::user("hi")])).await;
    // Followed twice within the origin, then the last path has no page: a 404 from the
    // same server, not a refusal to follow.
    let err = err.expect("no page at the end").to_string();
    assert!(!err.contains("not followed"), "{err}");
    let paths: Vec<String> = front
        .requests()
        .into_iter()
        .map(|r| r.path_and_query)
        .collect();
    assert_eq!(
        paths,
        [
            "/old/chat/completions",
            "/new/chat/completions",
            "/newer/chat/completions"
        ]
    );
}
