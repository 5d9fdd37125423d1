//! `cadre run` end to end over HTTP: the real binary talks to a mock OpenAI or Anthropic
//! server started inside the test, found through `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`
//! with the key from `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use cadre_testkit::{AnthropicStream, MockReply, MockServer, OpenAiStream};
use cli_support::{cadre_async, output, text};
use serde_json::json;
use std::path::Path;
use std::process::Output;

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    dir
}

/// Run `cadre --workspace WS run --model MODEL PROMPT` with `vars` set and no user config.
async fn cadre_run(ws: &Path, model: &str, prompt: &str, vars: &[(&str, String)]) -> Output {
    cadre_run_with(ws, &["--model", model, prompt], vars).await
}

/// Run `cadre --workspace WS run ARGS...` with `vars` set and no user config.
async fn cadre_run_with(ws: &Path, args: &[&str], vars: &[(&str, String)]) -> Output {
    let run: Vec<&str> = std::iter::once("run").chain(args.iter().copied()).collect();
    cadre_args(ws, &run, vars).await
}

#[tokio::test(flavor = "multi_thread")]
async fn run_against_a_mock_openai_server() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .role()
            .text("Reading.")
            .tool_call_start(0, "call_1", "read_file")
            .tool_call_args(0, "{\"path\":")
            .tool_call_args(0, "\"notes.txt\"}")
            .finish("tool_calls")
            .usage(100, 10, 0)
            .done()
            .into_reply(),
    );
    mock.push_openai(
        OpenAiStream::new()
            .role()
            .text("The middle word ")
            .text("is beta.")
            .finish("stop")
            .usage(150, 8, 0)
            .done()
            .into_reply(),
    );
    let ws = workspace();
    let out = cadre_run(
        ws.path(),
        "openai:any-model",
        "hi",
        &[
            ("OPENAI_BASE_URL", mock.openai_base_url()),
            ("OPENAI_API_KEY", "test-key".into()),
        ],
    )
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stdout.contains("The middle word is beta."), "{stdout}");
    assert!(stderr.contains("read_file"), "{stderr}");
    // No price for this model: the cost is unknown, not $0.
    assert!(
        stderr.contains("· 268 tokens (in 250, out 18) · cost unknown"),
        "{stderr}"
    );

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    for req in &reqs {
        assert_eq!(req.path, "/v1/chat/completions");
        assert_eq!(req.header("authorization"), Some("Bearer test-key"));
        assert_eq!(req.body["model"], "any-model");
        assert_eq!(req.body["stream"], true);
        assert_eq!(req.body["messages"][0]["role"], "system");
        let tools = req.body["tools"].as_array().unwrap();
        assert!(
            tools.iter().any(|t| t["function"]["name"] == "read_file"),
            "{tools:?}"
        );
    }
    assert_eq!(
        reqs[0].body["messages"][1],
        json!({"role": "user", "content": "hi"})
    );
    // The builtin read_file ran in the workspace and its output went back to the model.
    let messages = reqs[1].body["messages"].as_array().unwrap();
    let result = messages.last().unwrap();
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "call_1");
    assert!(
        result["content"].as_str().unwrap().contains("beta"),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn model_sonnet_on_the_command_line_is_the_anthropic_model_it_means() {
    // As a Claude Code user types it: not sent to the default provider as "sonnet".
    let mock = MockServer::start().await.unwrap();
    mock.push_anthropic(
        AnthropicStream::new()
            .start(40, 0)
            .text(&["Hi."])
            .stop("end_turn", 5)
            .into_reply(),
    );
    let ws = workspace();
    let out = cadre_run(
        ws.path(),
        "sonnet",
        "hi",
        &[
            ("ANTHROPIC_BASE_URL", mock.base_url()),
            ("ANTHROPIC_API_KEY", "test-key".into()),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9".into()),
        ],
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(
        stderr.contains("cadre: model sonnet is anthropic:claude-sonnet-4-5"),
        "{stderr}"
    );
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].body["model"], "claude-sonnet-4-5");
}

#[tokio::test(flavor = "multi_thread")]
async fn run_against_a_mock_anthropic_server() {
    let mock = MockServer::start().await.unwrap();
    mock.push_anthropic(
        AnthropicStream::new()
            .start(40, 0)
            .text(&["Hello ", "from the mock."])
            .stop("end_turn", 5)
            .into_reply(),
    );
    let ws = workspace();
    let out = cadre_run(
        ws.path(),
        "anthropic:claude-x",
        "hi",
        &[
            ("ANTHROPIC_BASE_URL", mock.base_url()),
            ("ANTHROPIC_API_KEY", "test-key".into()),
        ],
    )
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stdout.contains("Hello from the mock."), "{stdout}");

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some("test-key"));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.body["model"], "claude-x");
    assert_eq!(req.body["stream"], true);
    // Prompt caching is on by default: the system prompt is one text block with a
    // breakpoint, and so is the latest message.
    let ephemeral = json!({"type": "ephemeral"});
    assert!(
        req.body["system"][0]["text"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(req.body["system"][0]["cache_control"], ephemeral);
    assert_eq!(
        req.body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "hi", "cache_control": ephemeral}]}])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_summary_and_usage_events_show_cache_tokens_and_dollars() {
    let mock = MockServer::start().await.unwrap();
    // 1000 uncached, 2000 read from the cache, 500 written; 100 out. At Sonnet 4.5's
    // $3 / $0.30 / $3.75 / $15 per million: $0.006975.
    let reply = || {
        AnthropicStream::new()
            .start_with_cache(1000, 2000, 500)
            .text(&["Done."])
            .stop("end_turn", 100)
            .into_reply()
    };
    mock.push_anthropic(reply());
    mock.push_anthropic(reply());
    let ws = workspace();
    let vars = [
        ("ANTHROPIC_BASE_URL", mock.base_url()),
        ("ANTHROPIC_API_KEY", "test-key".to_string()),
    ];
    let model = "anthropic:claude-sonnet-4-5-20250929";
    let out = cadre_run_with(ws.path(), &["--model", model, "hi"], &vars).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(
        stderr.contains(
            "· 1 turn · 3600 tokens (in 3500, cached 2000, written 500, out 100) · $0.0070"
        ),
        "{stderr}"
    );

    let out = cadre_run_with(
        ws.path(),
        &["--model", model, "--output", "jsonl", "hi"],
        &vars,
    )
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let usage = events.iter().find(|e| e["type"] == "usage").unwrap();
    assert_eq!(
        usage["usage"],
        json!({"input_tokens": 3500, "output_tokens": 100, "cached_input_tokens": 2000,
               "cache_write_tokens": 500, "cost_usd": 0.006975})
    );
    let done = events.iter().find(|e| e["type"] == "done").unwrap();
    assert_eq!(done["usage"]["cost_usd"], json!(0.006975));
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_key_fails_the_run_with_a_hint() {
    let mock = MockServer::start().await.unwrap();
    mock.push_openai(MockReply::openai_error(
        401,
        "Incorrect API key provided",
        Some("invalid_api_key"),
    ));
    let ws = workspace();
    let out = cadre_run(
        ws.path(),
        "openai:any-model",
        "hi",
        &[
            ("OPENAI_BASE_URL", mock.openai_base_url()),
            ("OPENAI_API_KEY", "wrong-key".into()),
        ],
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("authentication failed for openai: check OPENAI_API_KEY"),
        "{stderr}"
    );
    // An authentication failure is not retried.
    assert_eq!(mock.request_count(), 1);
    assert_eq!(
        mock.requests()[0].header("authorization"),
        Some("Bearer wrong-key")
    );
}

/// Run `cadre` with `args` in `ws`, with no provider variables but `vars`.
async fn cadre_args(ws: &Path, args: &[&str], vars: &[(&str, String)]) -> Output {
    let mut cmd = cadre_async(ws);
    cmd.args(args);
    for (name, value) in vars {
        cmd.env(name, value);
    }
    output(cmd).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_key_stops_run_and_serve_before_any_request() {
    let mock = MockServer::start().await.unwrap();
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join(".cadre")).unwrap();
    std::fs::write(
        ws.path().join(".cadre/config.toml"),
        format!(
            "[providers.hosted]\nbase_url = \"{}\"\napi_key_env = \"CADRE_TEST_HOSTED_KEY\"\n",
            mock.openai_base_url()
        ),
    )
    .unwrap();
    for args in [
        &["--model", "hosted:big-model", "run", "hello"][..],
        &[
            "--model",
            "hosted:big-model",
            "serve",
            "--addr",
            "127.0.0.1:0",
        ][..],
    ] {
        let out = cadre_args(ws.path(), args, &[]).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains("set CADRE_TEST_HOSTED_KEY"), "{stderr}");
        assert!(
            stderr.contains("--model scripted:examples/scripts/delegation.toml"),
            "{stderr}"
        );
    }
    assert_eq!(mock.request_count(), 0, "no request without the key");
    assert!(
        !ws.path().join(".cadre/sessions").exists(),
        "no session was started"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_provider_prefix_is_a_configuration_error() {
    let mock = MockServer::start().await.unwrap();
    let ws = workspace();
    let out = cadre_run(
        ws.path(),
        "anthropc:claude-sonnet-4-5",
        "hello",
        &[
            ("OPENAI_BASE_URL", mock.openai_base_url()),
            ("OPENAI_API_KEY", "sk-test".into()),
        ],
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "unknown provider `anthropc` in model `anthropc:claude-sonnet-4-5`; known providers: anthropic, ollama, openai, scripted"
        ),
        "{stderr}"
    );
    assert_eq!(mock.request_count(), 0, "the key never went to OpenAI");
}

/// A workspace whose Claude Code reviewer says `model: sonnet`, and the OpenAI replies of a
/// parent that delegates to it once (`child` adds the child's own reply, when it comes to
/// the same server).
fn sonnet_workspace(mock: &MockServer, child_on_openai: bool) -> tempfile::TempDir {
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join(".claude/agents")).unwrap();
    std::fs::write(
        ws.path().join(".claude/agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews.\ntools: Read, Grep\nmodel: sonnet\n---\nReview.\n",
    )
    .unwrap();
    mock.push_openai(
        OpenAiStream::new()
            .role()
            .tool_call_start(0, "call_1", "task")
            .tool_call_args(
                0,
                "{\"subagent_type\":\"reviewer\",\"description\":\"review\",\"prompt\":\"review notes.txt\"}",
            )
            .finish("tool_calls")
            .done()
            .into_reply(),
    );
    if child_on_openai {
        mock.push_openai(
            OpenAiStream::new()
                .text("child: looks fine")
                .finish("stop")
                .done()
                .into_reply(),
        );
    }
    mock.push_openai(
        OpenAiStream::new()
            .text("parent: done")
            .finish("stop")
            .done()
            .into_reply(),
    );
    ws
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sonnet_child_without_an_anthropic_key_uses_the_parents_model() {
    let mock = MockServer::start().await.unwrap();
    let ws = sonnet_workspace(&mock, true);
    let out = cadre_run(
        ws.path(),
        "openai:parent-model",
        "review it",
        &[
            ("OPENAI_BASE_URL", mock.openai_base_url()),
            ("OPENAI_API_KEY", "sk-test".into()),
        ],
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3, "{reqs:#?}");
    assert!(reqs.iter().all(|r| r.path == "/v1/chat/completions"));
    // The child's request: its own system prompt, the parent's model, never `sonnet`.
    let child = &reqs[1];
    assert!(
        child.body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Review."),
        "{}",
        child.body
    );
    assert_eq!(child.body["model"], "parent-model");
    assert!(text(&out.stdout).contains("parent: done"));
    assert_eq!(
        stderr
            .matches("agent reviewer: model `sonnet` means `anthropic:claude-sonnet-4-5`")
            .count(),
        1,
        "one warning at load time: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sonnet_child_with_an_anthropic_key_goes_to_anthropic() {
    let mock = MockServer::start().await.unwrap();
    let ws = sonnet_workspace(&mock, false);
    mock.push_anthropic(
        AnthropicStream::new()
            .start(10, 0)
            .text(&["child: looks fine"])
            .stop("end_turn", 3)
            .into_reply(),
    );
    let out = cadre_run(
        ws.path(),
        "openai:parent-model",
        "review it",
        &[
            ("OPENAI_BASE_URL", mock.openai_base_url()),
            ("OPENAI_API_KEY", "sk-test".into()),
            ("ANTHROPIC_BASE_URL", mock.base_url()),
            ("ANTHROPIC_API_KEY", "sk-ant-test".into()),
        ],
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let reqs = mock.requests();
    let anthropic: Vec<_> = reqs.iter().filter(|r| r.path == "/v1/messages").collect();
    assert_eq!(anthropic.len(), 1, "{reqs:#?}");
    assert_eq!(anthropic[0].body["model"], "claude-sonnet-4-5");
    assert_eq!(anthropic[0].header("x-api-key"), Some("sk-ant-test"));
    let openai: Vec<_> = reqs
        .iter()
        .filter(|r| r.path == "/v1/chat/completions")
        .collect();
    assert_eq!(openai.len(), 2);
    assert!(openai.iter().all(|r| r.body["model"] == "parent-model"));
}
