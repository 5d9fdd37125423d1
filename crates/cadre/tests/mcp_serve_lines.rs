//! `cadre mcp serve` survives bad input: over stdio a malformed line, a line nested 100 000
//! deep and a line over the 16 MiB limit each get a `-32700` reply and the session goes on
//! (the next `tools/list` is answered); over HTTP a malformed body gets a `-32700` body and
//! the session still answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn workspace() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        "[[scripts]]\nagent = \"x\"\n[[scripts.turns]]\ntext = \"hi\"\n",
    )
    .unwrap();
    (dir, format!("scripted:{}", script.display()))
}

fn cadre(ws: &Path, model: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.arg("--workspace")
        .arg(ws)
        .args(["--model", model, "mcp", "serve"]);
    cmd.env_remove("CADRE_MODEL");
    cmd.env("XDG_CONFIG_HOME", ws.join(".no-user-config"));
    cmd
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"lines-test","version":"1"}}}"#;

/// Read stdout lines on a thread, so a stuck server fails the test instead of hanging it.
fn replies(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<Value> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("reply is not JSON ({e}): {line}"));
            if tx.send(v).is_err() {
                return;
            }
        }
    });
    rx
}

fn next(rx: &std::sync::mpsc::Receiver<Value>) -> Value {
    rx.recv_timeout(Duration::from_secs(60))
        .expect("no reply: the session ended or hung")
}

#[test]
fn stdio_answers_malformed_deep_and_oversized_lines_with_parse_errors_and_goes_on() {
    let (dir, model) = workspace();
    let mut child = cadre(dir.path(), &model)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = replies(child.stdout.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    let init = next(&rx);
    assert_eq!(init["id"], 1, "{init}");
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();

    // Malformed (a cut request, then bytes that are not UTF-8), too deep, too long.
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/li\n")
        .unwrap();
    stdin.write_all(b"\xff\xfe{]\n").unwrap();
    let deep = format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    stdin.write_all(deep.as_bytes()).unwrap();
    let mut long = br#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"x":""#.to_vec();
    long.resize(cadre_mcp::MAX_LINE_BYTES + 1024, b'a');
    long.extend_from_slice(b"\"}}\n");
    stdin.write_all(&long).unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":4,"method":"tools/list"}}"#).unwrap();
    stdin.flush().unwrap();

    for what in [
        "cut line",
        "not UTF-8",
        "100 000 deep",
        "over the line limit",
    ] {
        let r = next(&rx);
        assert_eq!(r["error"]["code"], -32700, "{what}: {r}");
        assert_eq!(r["id"], Value::Null, "{what}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Parse error"),
            "{what}: {r}"
        );
    }
    let listed = next(&rx);
    assert_eq!(listed["id"], 4, "{listed}");
    let tools: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"task"), "{tools:?}");

    // Closing stdin ends the session cleanly.
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

/// `cadre mcp serve --http` on a free port, with a token; killed on drop.
struct HttpServe {
    child: std::process::Child,
    url: String,
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_serve(ws: &Path, model: &str, token: &str) -> HttpServe {
    let mut child = cadre(ws, model)
        .args(["--http", "127.0.0.1:0"])
        .env("CADRE_SERVE_TOKEN", token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if let Some(rest) = line.split_once("streamable HTTP at ").map(|(_, r)| r) {
                let url = rest.split_whitespace().next().unwrap_or("").to_string();
                let _ = tx.send(url);
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("cadre mcp serve --http did not say where it listens");
    HttpServe { child, url }
}

/// The JSON-RPC message of a streamable-HTTP reply (plain JSON or one SSE `data:` event).
fn message_of(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str(body) {
        return v;
    }
    let data = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or_else(|| panic!("no message in {body:?}"));
    serde_json::from_str(data).unwrap()
}

#[tokio::test]
async fn http_answers_a_malformed_body_with_a_parse_error_and_the_session_goes_on() {
    let (dir, model) = workspace();
    let server = http_serve(dir.path(), &model, "s3cret");
    let client = reqwest::Client::new();
    let post = |session: Option<&str>, body: Vec<u8>| {
        let mut req = client
            .post(&server.url)
            .bearer_auth("s3cret")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        req.send()
    };
    let init = post(None, INITIALIZE.as_bytes().to_vec()).await.unwrap();
    assert_eq!(init.status(), 200);
    let session = init
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_string();
    let _ = init.text().await.unwrap();
    let notified = post(
        Some(&session),
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(),
    )
    .await
    .unwrap();
    assert!(notified.status().is_success(), "{}", notified.status());

    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    for (what, body) in [
        (
            "cut",
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/li".to_vec(),
        ),
        ("not UTF-8", b"\xff\xfe{]".to_vec()),
        ("100 000 deep", deep.into_bytes()),
    ] {
        let r = post(Some(&session), body).await.unwrap();
        assert_eq!(r.status(), 400, "{what}");
        let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        assert_eq!(v["jsonrpc"], "2.0", "{what}: {v}");
        assert_eq!(v["id"], Value::Null, "{what}: {v}");
        assert_eq!(v["error"]["code"], -32700, "{what}: {v}");
    }
    let listed = post(
        Some(&session),
        json!({"jsonrpc":"2.0","id":5,"method":"tools/list"})
            .to_string()
            .into_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(listed.status(), 200);
    let v = message_of(&listed.text().await.unwrap());
    assert_eq!(v["id"], 5, "{v}");
    assert!(
        v["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{v}"
    );
}
