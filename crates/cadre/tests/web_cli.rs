//! `cadre run` with the web tools, against a real local web server: `web_fetch` refuses the
//! local server unless `[tools] web_fetch_allow_private = true`; `web_search` exists only with
//! a configured backend whose key is set, sends the key and query to it, and a Claude Code
//! file's `WebSearch` maps to it (or is dropped with a warning when it is absent).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use assert_cmd::Command;
use cadre_testkit::{WebPage, WebServer};
use serde_json::{Value, json};
use std::path::Path;

fn cadre(ws: &Path) -> Command {
    let mut cmd = cli_support::cadre(ws);
    cmd.env_remove("CADRE_TEST_SEARCH_KEY");
    cmd
}

/// A workspace whose main agent calls `tool` with `args` and then answers with the result.
fn workspace(config: &str, tool: &str, args: Value) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre")).unwrap();
    std::fs::write(ws.join(".cadre/config.toml"), config).unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": tool, "args": args}]},
        {"text": "RESULT: {{tool_results}}"}
    ]});
    std::fs::write(ws.join("s.json"), script.to_string()).unwrap();
    let model = format!("scripted:{}", ws.join("s.json").display());
    (dir, model)
}

/// The run's tool result for the main agent.
fn tool_result(stdout: &[u8]) -> (String, bool) {
    let text = String::from_utf8(stdout.to_vec()).unwrap();
    let ev: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool_result in {text}"));
    (
        ev["output"].as_str().unwrap().to_string(),
        ev["is_error"].as_bool().unwrap(),
    )
}

fn run_jsonl(ws: &Path, model: &str, envs: &[(&str, &str)]) -> (std::process::Output, String) {
    let mut cmd = cadre(ws);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd
        .args(["--model", model, "run", "--output", "jsonl", "go"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (out, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_fetch_reaches_the_local_server_only_when_private_addresses_are_allowed() {
    let server = WebServer::start().await.unwrap();
    server.page(
        "/notes",
        WebPage::html("<h2>Notes</h2><script>alert(1)</script><p>all good</p>"),
    );
    let args = json!({"url": server.url("/notes")});

    let (dir, model) = workspace("", "web_fetch", args.clone());
    let (out, _) = run_jsonl(dir.path(), &model, &[]);
    let (output, is_error) = tool_result(&out.stdout);
    assert!(is_error, "{output}");
    assert!(output.contains("a loopback address"), "{output}");
    assert!(server.requests().is_empty());

    let (dir, model) = workspace(
        "[tools]\nweb_fetch_allow_private = true\n",
        "web_fetch",
        args,
    );
    let (out, _) = run_jsonl(dir.path(), &model, &[]);
    let (output, is_error) = tool_result(&out.stdout);
    assert!(!is_error, "{output}");
    assert!(
        output.contains("## Notes") && output.contains("all good"),
        "{output}"
    );
    assert!(!output.contains("alert"), "{output}");
}

fn search_config(server: &WebServer) -> String {
    format!(
        "[tools.web_search]\nprovider = \"http\"\nurl = \"{}\"\napi_key_env = \"CADRE_TEST_SEARCH_KEY\"\napi_key_header = \"X-Subscription-Token\"\nresults = \"/web/results\"\n",
        server.url("/res/v1/web/search?q={query}&count=5")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_search_goes_to_the_configured_http_api_with_its_key() {
    let server = WebServer::start().await.unwrap();
    server.page(
        "/res/v1/web/search",
        WebPage::json(&json!({"web": {"results": [
            {"title": "Tokio", "url": "https://tokio.rs", "description": "An async runtime"},
            {"title": "async-std", "url": "https://async.rs", "description": "Another one"}
        ]}})),
    );
    let (dir, model) = workspace(
        &search_config(&server),
        "web_search",
        json!({"query": "rust async & more"}),
    );
    let (out, stderr) = run_jsonl(dir.path(), &model, &[("CADRE_TEST_SEARCH_KEY", "k-123")]);
    assert!(!stderr.contains("warning"), "{stderr}");
    let (output, is_error) = tool_result(&out.stdout);
    assert!(!is_error, "{output}");
    assert_eq!(
        output,
        "1. Tokio\n   https://tokio.rs\n   An async runtime\n2. async-std\n   https://async.rs\n   Another one"
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].path_and_query,
        "/res/v1/web/search?q=rust%20async%20%26%20more&count=5"
    );
    assert_eq!(reqs[0].header("x-subscription-token"), Some("k-123"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_key_web_search_is_absent_and_claude_codes_websearch_is_dropped() {
    let server = WebServer::start().await.unwrap();
    let (dir, model) = workspace(
        &search_config(&server),
        "web_search",
        json!({"query": "anything"}),
    );
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".claude/agents")).unwrap();
    std::fs::write(
        ws.join(".claude/agents/researcher.md"),
        "---\nname: researcher\ndescription: Researches.\ntools: WebSearch, Read\n---\nResearch.\n",
    )
    .unwrap();
    let (out, stderr) = run_jsonl(ws, &model, &[]);
    assert!(
        stderr.contains("CADRE_TEST_SEARCH_KEY is not set; web_search is not offered"),
        "{stderr}"
    );
    let (output, is_error) = tool_result(&out.stdout);
    assert!(is_error, "{output}");
    assert!(server.requests().is_empty());

    let show = |envs: &[(&str, &str)]| {
        let mut cmd = cadre(ws);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let out = cmd
            .args(["--model", &model, "agents", "show", "researcher"])
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let shown = show(&[]);
    assert!(
        shown.contains(
            "tool `WebSearch` means `web_search`, which is not available here; dropped from the allowlist"
        ),
        "{shown}"
    );
    let shown = show(&[("CADRE_TEST_SEARCH_KEY", "k")]);
    assert!(!shown.contains("WebSearch"), "{shown}");
    assert!(shown.contains("web_search"), "{shown}");
}

/// A workspace whose main agent delegates to `fetcher` (web_fetch only, `sandbox` as given,
/// sub-agents sandboxed by `[sandbox]`), which fetches `url` and reports the result.
fn sandboxed_fetcher(sandbox: &str, url: &str) -> (tempfile::TempDir, String) {
    let front = format!("tools: [web_fetch]\nsandbox: {sandbox}\n");
    fetcher_with(
        &front,
        &format!("{{ name = \"web_fetch\", args = {{ url = {url:?} }} }}"),
    )
}

/// A workspace whose main agent delegates to `fetcher` (front matter lines `front`, sub-agents
/// sandboxed by `[sandbox]`), which makes the `calls` (TOML inline tables) and reports them.
fn fetcher_with(front: &str, calls: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(
        ws.join(".cadre/config.toml"),
        "[tools]\nweb_fetch_allow_private = true\n[sandbox]\nrequired = true\n",
    )
    .unwrap();
    std::fs::write(
        ws.join(".cadre/agents/fetcher.md"),
        format!("---\nname: fetcher\ndescription: fetches pages\n{front}---\nFetch.\n"),
    )
    .unwrap();
    let script = format!(
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{{ name = "task", args = {{ subagent_type = "fetcher", description = "fetch", prompt = "fetch" }} }}]
[[scripts.turns]]
text = "{{{{tool_results}}}}"

[[scripts]]
agent = "fetcher"
[[scripts.turns]]
tool_calls = [{calls}]
[[scripts.turns]]
text = "CHILD SAW: {{{{tool_results}}}}"
"#
    );
    std::fs::write(ws.join("s.toml"), script).unwrap();
    let model = format!("scripted:{}", ws.join("s.toml").display());
    (dir, model)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_that_inherits_web_fetch_loses_it_without_the_network() {
    let server = WebServer::start().await.unwrap();
    server.page("/p", WebPage::html("<p>fetched body</p>"));
    let url = server.url("/p");

    // No `tools:` list: web_fetch is only inherited from the main agent.
    let (dir, model) = fetcher_with(
        "sandbox: workspace-write\n",
        &format!("{{ name = \"web_fetch\", args = {{ url = {url:?} }} }}"),
    );
    let (out, _) = run_jsonl(dir.path(), &model, &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("web_fetch is not available: this agent runs in a workspace-write sandbox without the network"),
        "{text}"
    );
    assert!(!text.contains("fetched body"), "{text}");
    assert!(
        server.requests().is_empty(),
        "the sandboxed child reached the server"
    );

    let (dir, model) = sandboxed_fetcher("{mode: workspace-write, network: true}", &url);
    let (out, _) = run_jsonl(dir.path(), &model, &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("fetched body"), "{text}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_agent_sandboxed_without_the_network_cannot_use_web_fetch() {
    let server = WebServer::start().await.unwrap();
    server.page("/p", WebPage::html("<p>fetched body</p>"));
    let (dir, model) = workspace(
        "[tools]\nweb_fetch_allow_private = true\n[sandbox]\nrequired = true\n",
        "web_fetch",
        json!({"url": server.url("/p")}),
    );
    let mut cmd = cadre(dir.path());
    let out = cmd
        .args([
            "--model",
            &model,
            "run",
            "--sandbox",
            "read-only",
            "--output",
            "jsonl",
            "go",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (output, is_error) = tool_result(&out.stdout);
    assert!(is_error, "{output}");
    assert!(
        output.contains("read-only sandbox without the network"),
        "{output}"
    );
    assert!(server.requests().is_empty());
}

/// A Claude Code agent file that names `WebFetch` keeps it under the default sub-agent
/// sandbox (`workspace-write`, no network): web_fetch follows its own rules (here the
/// private-address guard, opened for the local server by `web_fetch_allow_private`),
/// while the same agent's `bash` still cannot connect anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_agent_naming_webfetch_fetches_under_the_default_sandbox() {
    let server = WebServer::start().await.unwrap();
    server.page("/p", WebPage::html("<p>fetched body</p>"));
    let url = server.url("/p");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED");
    let (dir, model) = fetcher_with(
        "tools: WebFetch, Read, Bash\n",
        &format!(
            "{{ name = \"web_fetch\", args = {{ url = {url:?} }} }}, {{ name = \"bash\", args = {{ command = {connect:?} }} }}"
        ),
    );
    let out = cadre(dir.path())
        .args([
            "--model",
            &model,
            "run",
            "--permission-mode",
            "auto-approve",
            "--output",
            "jsonl",
            "go",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("fetched body"), "{text}");
    assert_eq!(server.requests().len(), 1);
    // The command line itself says CONNECTED; its output would start with it.
    assert!(
        !text.contains(r#""text":"CONNECTED"#),
        "bash reached the network: {text}"
    );
    assert!(text.contains("connect: Permission denied"), "{text}");
    assert!(listener.accept().is_err(), "bash connected to the listener");

    // The private-address guard is still web_fetch's own: without the setting the local
    // server is refused, sandbox or not.
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        "[sandbox]\nrequired = true\n",
    )
    .unwrap();
    let out = cadre(dir.path())
        .args([
            "--model",
            &model,
            "run",
            "--permission-mode",
            "auto-approve",
            "--output",
            "jsonl",
            "go",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("a loopback address"), "{text}");
    assert_eq!(server.requests().len(), 1);
}
