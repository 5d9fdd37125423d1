//! What a web page in the user's browser could send: cross-origin requests, requests through
//! a rebound DNS name (a foreign `Host`) and `text/plain` POSTs are refused, with and without
//! a token, before any task starts; pages of an allowed origin get CORS answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use reqwest::header::{CONTENT_TYPE, HOST, ORIGIN};
use serde_json::{Value, json};

const TOKEN: &str = "tok-31b7";

fn send_message() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": message("hi")}})
}

/// The POST routes with a body each accepts.
fn posts(base: &str) -> Vec<(String, Value)> {
    vec![
        (format!("{base}/"), send_message()),
        (format!("{base}/a2a"), send_message()),
        (
            format!("{base}/tasks"),
            json!({"task_id": "t1", "input": "hi"}),
        ),
        (format!("{base}/tasks/t1/cancel"), json!({})),
    ]
}

fn with_token(rb: reqwest::RequestBuilder, token: Option<&str>) -> reqwest::RequestBuilder {
    match token {
        Some(t) => rb.bearer_auth(t),
        None => rb,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_origin_requests_get_403_with_and_without_a_token() {
    for token in [None, Some(TOKEN)] {
        let n = node();
        let mut opts = options();
        opts.token = token.map(str::to_string);
        let srv = serve(&n, opts).await;
        let c = http();
        let card = format!("{}/.well-known/agent-card.json", srv.url());
        for origin in ["http://evil.example", "null", "http://localhost:3000"] {
            for (url, body) in posts(&srv.url()) {
                let r = with_token(c.post(&url).header(ORIGIN, origin).json(&body), token)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 403, "{url} from {origin}");
                let v: Value = r.json().await.unwrap();
                assert!(
                    v["error"].as_str().unwrap().contains("allowed_origins"),
                    "{v}"
                );
            }
            let r = c.get(&card).header(ORIGIN, origin).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 403, "card from {origin}");
            // A preflight is refused as well.
            let r = c
                .request(reqwest::Method::OPTIONS, format!("{}/", srv.url()))
                .header(ORIGIN, origin)
                .header("access-control-request-method", "POST")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 403, "preflight from {origin}");
        }
        assert_eq!(task_count(&n, &srv).await, 0, "token {token:?}");
        // The same requests without an Origin (not from a page) work.
        let r = with_token(
            c.post(format!("{}/", srv.url())).json(&send_message()),
            token,
        )
        .send()
        .await
        .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        assert_eq!(c.get(&card).send().await.unwrap().status().as_u16(), 200);
        srv.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_origin_gets_cors_answers() {
    let n = node();
    let mut opts = options();
    opts.token = Some(TOKEN.into());
    opts.allowed_origins = vec!["http://localhost:3000".into()];
    let srv = serve(&n, opts).await;
    let c = http();
    let origin = "http://localhost:3000";
    let pre = c
        .request(reqwest::Method::OPTIONS, format!("{}/", srv.url()))
        .header(ORIGIN, origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(pre.status().is_success(), "{}", pre.status());
    assert_eq!(pre.headers()["access-control-allow-origin"], origin);
    let allowed = pre.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(allowed.contains("authorization") && allowed.contains("content-type"));
    let r = c
        .post(format!("{}/", srv.url()))
        .header(ORIGIN, origin)
        .bearer_auth(TOKEN)
        .json(&send_message())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], origin);
    // The token is still needed.
    let r = c
        .post(format!("{}/", srv.url()))
        .header(ORIGIN, origin)
        .json(&send_message())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // Another origin is not.
    let r = c
        .post(format!("{}/", srv.url()))
        .header(ORIGIN, "http://localhost:3001")
        .bearer_auth(TOKEN)
        .json(&send_message())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert_eq!(task_count(&n, &srv).await, 1);
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_is_not_this_server_gets_403() {
    for token in [None, Some(TOKEN)] {
        let n = node();
        let mut opts = options();
        opts.token = token.map(str::to_string);
        let srv = serve(&n, opts).await;
        let port = srv.addr.port();
        let c = http();
        let card = format!("{}/.well-known/agent-card.json", srv.url());
        // What a page at attacker.example sends once its name resolves to 127.0.0.1.
        let foreign = [
            format!("attacker.example:{port}"),
            format!("localhost.attacker.example:{port}"),
            format!("localhost:{}", port + 1),
            "localhost".to_string(),
            format!("192.168.1.5:{port}"),
        ];
        for host in &foreign {
            for (url, body) in posts(&srv.url()) {
                let r = with_token(c.post(&url).header(HOST, host).json(&body), token)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 403, "{url} as {host}");
            }
            let r = c.get(&card).header(HOST, host).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 403, "card as {host}");
            let v: Value = r.json().await.unwrap();
            assert!(v["error"].as_str().unwrap().contains("Host"), "{v}");
        }
        assert_eq!(task_count(&n, &srv).await, 0);
        for host in [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ] {
            let r = c.get(&card).header(HOST, &host).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200, "card as {host}");
            let v: Value = r.json().await.unwrap();
            assert_eq!(
                v["supportedInterfaces"][0]["url"],
                format!("http://{host}/"),
                "{v}"
            );
        }
        srv.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_hosts_admit_a_proxy_name() {
    let n = node();
    let mut opts = options();
    opts.allowed_hosts = vec!["cadre.internal".into()];
    let srv = serve(&n, opts).await;
    let c = http();
    let card = format!("{}/.well-known/agent-card.json", srv.url());
    for (host, status) in [
        ("cadre.internal", 200),
        ("cadre.internal:443", 200),
        ("other.internal", 403),
    ] {
        let r = c.get(&card).header(HOST, host).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{host}");
    }
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_that_is_not_json_gets_415() {
    for token in [None, Some(TOKEN)] {
        let n = node();
        let mut opts = options();
        opts.token = token.map(str::to_string);
        let srv = serve(&n, opts).await;
        let c = http();
        for (url, body) in posts(&srv.url()) {
            for ct in [
                Some("text/plain"),
                Some("text/plain;charset=UTF-8"),
                Some("application/x-www-form-urlencoded"),
                Some("multipart/form-data; boundary=x"),
                None,
            ] {
                let mut rb = c.post(&url).body(body.to_string());
                if let Some(ct) = ct {
                    rb = rb.header(CONTENT_TYPE, ct);
                }
                let r = with_token(rb, token).send().await.unwrap();
                assert_eq!(r.status().as_u16(), 415, "{url} as {ct:?}");
                let v: Value = r.json().await.unwrap();
                // The JSON-RPC endpoint answers in JSON-RPC: A2A's ContentTypeNotSupported.
                let msg = if url.contains("/tasks") {
                    v["error"].as_str().unwrap()
                } else {
                    assert_eq!(v["error"]["code"], -32005, "{v}");
                    assert_eq!(v["id"], Value::Null);
                    assert_eq!(
                        v["error"]["data"][0]["reason"],
                        "CONTENT_TYPE_NOT_SUPPORTED"
                    );
                    v["error"]["message"].as_str().unwrap()
                };
                assert!(msg.contains("application/json"), "{v}");
            }
            // Without the token, the answer is 401 first: nothing is told to strangers.
            if token.is_some() {
                let r = c
                    .post(&url)
                    .header(CONTENT_TYPE, "text/plain")
                    .body(body.to_string())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 401, "{url}");
            }
        }
        assert_eq!(task_count(&n, &srv).await, 0);
        let r = with_token(
            c.post(format!("{}/", srv.url()))
                .header(CONTENT_TYPE, "application/json; charset=utf-8")
                .body(send_message().to_string()),
            token,
        )
        .send()
        .await
        .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        srv.stop().await.unwrap();
    }
}
