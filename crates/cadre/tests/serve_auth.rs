//! `cadre serve` over HTTP with bearer auth: every route but the card refuses a missing or
//! wrong token, the body limit from the config applies, malformed JSON-RPC gets an error
//! object, and the token appears neither in the debug log nor in any file under `.cadre/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use serde_json::{Value, json};
use serve_support::*;
use std::time::Duration;

const TOKEN: &str = "tok-never-logged-5b8e03a1";

fn node() -> tempfile::TempDir {
    workspace(&[
        (
            "script.toml",
            "[[scripts]]\nagent = \"echo\"\n[[scripts.turns]]\ntext = \"echo: {{user}}\"\n",
        ),
        (
            ".cadre/agents/echo.md",
            "---\nname: echo\ndescription: Echoes the message.\n---\nYou echo.\n",
        ),
        (
            ".cadre/config.toml",
            "[serve]\ndefault_agent = \"echo\"\nmax_body_bytes = 4096\nexpose = [\"echo\"]\n",
        ),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
async fn auth_limits_and_no_token_in_logs_or_files() {
    let ws = node();
    let model = format!("scripted:{}", ws.path().join("script.toml").display());
    let mut srv = Served::start(
        ws.path(),
        &model,
        &[("CADRE_SERVE_TOKEN", TOKEN), ("RUST_LOG", "debug")],
    );
    let base = srv.url.clone();
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let rpc_body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
    let routes: Vec<(reqwest::Method, String, Option<Value>)> = vec![
        (
            reqwest::Method::POST,
            format!("{base}/"),
            Some(rpc_body.clone()),
        ),
        (
            reqwest::Method::POST,
            format!("{base}/a2a"),
            Some(rpc_body.clone()),
        ),
        (
            reqwest::Method::POST,
            format!("{base}/tasks"),
            Some(json!({"task_id": "t-1", "agent_id": "echo", "input": "hi"})),
        ),
        (reqwest::Method::GET, format!("{base}/tasks/t-1"), None),
        (
            reqwest::Method::GET,
            format!("{base}/tasks/t-1/wait?timeout_seconds=5"),
            None,
        ),
        (
            reqwest::Method::POST,
            format!("{base}/tasks/t-1/cancel"),
            Some(json!({})),
        ),
    ];
    for (method, url, body) in &routes {
        for token in [None, Some("wrong"), Some(&TOKEN[1..])] {
            let mut rb = c.request(method.clone(), url);
            if let Some(b) = body {
                rb = rb.json(b);
            }
            if let Some(t) = token {
                rb = rb.bearer_auth(t);
            }
            let r = rb.send().await.unwrap();
            assert_eq!(r.status().as_u16(), 401, "{method} {url} {token:?}");
            assert!(r.headers().contains_key("www-authenticate"));
        }
    }
    for (method, url, body) in &routes {
        let mut rb = c
            .request(method.clone(), url)
            .bearer_auth(TOKEN)
            .header("A2A-Version", "1.0");
        if let Some(b) = body {
            rb = rb.json(b);
        }
        let r = rb.send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{method} {url}");
        let v: Value = r.json().await.unwrap();
        if url.ends_with('/') || url.ends_with("/a2a") {
            assert_eq!(
                v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
                "{v}"
            );
        }
        if url.ends_with("/wait?timeout_seconds=5") {
            assert_eq!(v["status"], "success", "{v}");
            assert_eq!(v["result"], "echo: hi");
        }
    }
    let card: Value = c
        .get(format!("{base}/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        card["skills"].as_array().unwrap().len(),
        1,
        "expose = [echo]"
    );
    assert!(card["securityRequirements"].is_array());

    let big = c
        .post(format!("{base}/"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body("x".repeat(5000))
        .send()
        .await
        .unwrap();
    assert_eq!(big.status().as_u16(), 413);
    let bad = c
        .post(format!("{base}/"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 200);
    let v: Value = bad.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32700);

    assert!(srv.terminate(Duration::from_secs(20)));
    let log = srv.stderr();
    assert!(log.contains("DEBUG"), "debug logging was on: {log}");
    assert!(!log.contains(TOKEN), "the token leaked into the log");
    let files = files_under(&ws.path().join(".cadre"));
    assert!(
        files
            .iter()
            .any(|f| f.to_string_lossy().contains("sessions")),
        "sessions were written: {files:?}"
    );
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(TOKEN),
            "the token leaked into {}",
            f.display()
        );
    }
}

#[test]
fn serving_a_public_address_without_a_token_is_refused() {
    let ws = node();
    let out = cadre(ws.path())
        .args(["--model", "scripted:x.toml", "serve", "--addr", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without a bearer token"), "{err}");
}
