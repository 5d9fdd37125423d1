//! `cadre serve` under a small open-file limit (`ulimit -n 256`): a client without a token
//! that opens 400 connections and sends nothing cannot exhaust the server's file
//! descriptors. The server caps its connections below the limit, closes the idle ones after
//! `serve.idle_timeout_secs`, and a normal client's task still runs (it needs files too).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use serde_json::{Value, json};
use serve_support::*;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_connections_cannot_exhaust_the_file_descriptors() {
    let ws = workspace(&[
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
            "[serve]\ndefault_agent = \"echo\"\nidle_timeout_secs = 1\n",
        ),
    ]);
    let model = format!("scripted:{}", ws.path().join("script.toml").display());
    let mut srv = Served::start_command(cadre_with_file_limit(ws.path(), 256), &model, &[]);
    let addr = srv.url.trim_start_matches("http://").to_string();
    let mut flood = Vec::new();
    for _ in 0..400 {
        flood.push(TcpStream::connect(&addr).await.unwrap());
    }
    // This client's connection waits behind the flood until idle ones are closed.
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let v: Value = c
        .post(format!("{}/", srv.url))
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message":
            {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "echo: hi");
    // Every connection of the flood is closed by the server in the end.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for (i, s) in flood.iter_mut().enumerate() {
        let mut rest = Vec::new();
        let r = tokio::time::timeout_at(deadline, s.read_to_end(&mut rest)).await;
        assert!(r.is_ok(), "connection {i} still open");
    }
    assert!(srv.terminate(Duration::from_secs(20)), "{}", srv.stderr());
    assert!(
        !srv.stderr().contains("Too many open files"),
        "{}",
        srv.stderr()
    );
}
