//! OpenTelemetry export end to end: `cadre run` with a scripted delegation tree sends its
//! GenAI spans to a test OTLP/HTTP receiver (decoded with the `opentelemetry-proto` types),
//! writes them with `--trace-file`, and finishes when the collector never answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use axum::body::Bytes;
use axum::extract::State;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Tokens each agent's every model call reports: input, output, cache read, cache write.
const USAGE: [(&str, [u64; 4]); 4] = [
    ("main", [100, 10, 7, 3]),
    ("worker-a", [200, 20, 11, 5]),
    ("worker-b", [300, 30, 13, 0]),
    ("leaf", [400, 40, 0, 17]),
];

fn usage_of(agent: &str) -> String {
    let [i, o, r, w] = USAGE.iter().find(|(a, _)| *a == agent).unwrap().1;
    format!(
        "{{ input_tokens = {i}, output_tokens = {o}, cached_input_tokens = {r}, cache_write_tokens = {w} }}"
    )
}

/// A workspace where `main` starts two background workers and `worker-a` delegates to `leaf`
/// in the foreground; returns the model spec.
fn delegation_tree(ws: &Path) -> String {
    let agents = ws.join(".cadre/agents");
    std::fs::create_dir_all(&agents).unwrap();
    for (name, extra) in [
        ("worker-a", "tools: [task]\ncan_delegate: true\n"),
        ("worker-b", "tools: [read_file]\n"),
        ("leaf", "tools: [read_file]\n"),
    ] {
        std::fs::write(
            agents.join(format!("{name}.md")),
            format!("---\nname: {name}\ndescription: the {name} of the test\n{extra}---\nDo it.\n"),
        )
        .unwrap();
    }
    std::fs::write(
        ws.join(".cadre/config.toml"),
        "[subagents]\nmax_depth = 2\n",
    )
    .unwrap();
    let main = usage_of("main");
    let mut script = format!(
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
usage = {main}
tool_calls = [
  {{ name = "task", args = {{ subagent_type = "worker-a", description = "a", background = true, prompt = "work a" }} }},
  {{ name = "task", args = {{ subagent_type = "worker-b", description = "b", background = true, prompt = "work b" }} }},
]
"#
    );
    // The background results may come back one by one or together: enough turns for both.
    for _ in 0..4 {
        script.push_str(&format!(
            "[[scripts.turns]]\nusage = {main}\ntext = \"noted\"\n"
        ));
    }
    script.push_str(&format!(
        r#"
[[scripts]]
agent = "worker-a"
[[scripts.turns]]
usage = {a}
tool_calls = [ {{ name = "task", args = {{ subagent_type = "leaf", description = "l", prompt = "leaf work" }} }} ]
[[scripts.turns]]
usage = {a}
text = "a done"

[[scripts]]
agent = "worker-b"
[[scripts.turns]]
usage = {b}
delay_ms = 200
text = "b done"

[[scripts]]
agent = "leaf"
[[scripts.turns]]
usage = {l}
text = "leaf done"
"#,
        a = usage_of("worker-a"),
        b = usage_of("worker-b"),
        l = usage_of("leaf"),
    ));
    let path = ws.join("script.toml");
    std::fs::write(&path, script).unwrap();
    format!("scripted:{}", path.display())
}

type Collected = Arc<Mutex<Vec<Span>>>;

async fn receive(State(spans): State<Collected>, body: Bytes) -> Vec<u8> {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf request");
    let mut all = spans.lock().unwrap();
    for rs in request.resource_spans {
        for ss in rs.scope_spans {
            all.extend(ss.spans);
        }
    }
    ExportTraceServiceResponse::default().encode_to_vec()
}

/// A test OTLP/HTTP receiver on 127.0.0.1: its traces URL and what it got.
fn receiver(rt: &tokio::runtime::Runtime) -> (String, Collected) {
    let spans = Collected::default();
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(receive))
        .with_state(spans.clone());
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    rt.spawn(async move { axum::serve(listener, app).await });
    (url, spans)
}

fn attr(span: &Span, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.clone())
}

fn int(span: &Span, key: &str) -> u64 {
    match attr(span, key) {
        Some(Value::IntValue(i)) => i as u64,
        other => panic!("{key} of {} is {other:?}", span.name),
    }
}

fn string(span: &Span, key: &str) -> String {
    match attr(span, key) {
        Some(Value::StringValue(s)) => s,
        other => panic!("{key} of {} is {other:?}", span.name),
    }
}

const TOKEN_KEYS: [&str; 4] = [
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
];

fn tokens(span: &Span) -> [u64; 4] {
    TOKEN_KEYS.map(|k| int(span, k))
}

/// The nearest `invoke_agent` ancestor of `span` (not itself).
fn agent_of<'a>(span: &Span, by_id: &BTreeMap<Vec<u8>, &'a Span>) -> Option<&'a Span> {
    let mut parent = by_id.get(&span.parent_span_id).copied();
    while let Some(p) = parent {
        if p.name.starts_with("invoke_agent ") {
            return Some(p);
        }
        parent = by_id.get(&p.parent_span_id).copied();
    }
    None
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
fn a_delegation_tree_is_one_trace_whose_agent_spans_mirror_it_with_every_calls_usage() {
    let dir = tempfile::tempdir().unwrap();
    let model = delegation_tree(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (url, collected) = receiver(&rt);
    let out = cli_support::cadre(dir.path())
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url)
        .env("OTEL_SERVICE_NAME", "cadre-test")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = cli_support::text(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    assert!(
        !stderr.contains("telemetry:"),
        "no export trouble: {stderr}"
    );
    // The parent's reported usage, from its `done` event.
    let done: serde_json::Value = cli_support::text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "done" && e["agent"] == "main")
        .expect("a done event");
    let reported = &done["usage"];

    let spans = collected.lock().unwrap().clone();
    let traces: BTreeSet<&Vec<u8>> = spans.iter().map(|s| &s.trace_id).collect();
    assert_eq!(traces.len(), 1, "one trace id everywhere");
    let by_id: BTreeMap<Vec<u8>, &Span> = spans.iter().map(|s| (s.span_id.clone(), s)).collect();
    let agents: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("invoke_agent "))
        .collect();
    // The invoke_agent tree is the delegation tree.
    let tree: BTreeSet<(String, String)> = agents
        .iter()
        .map(|a| {
            let parent =
                agent_of(a, &by_id).map_or("-".to_string(), |p| string(p, "gen_ai.agent.name"));
            (string(a, "gen_ai.agent.name"), parent)
        })
        .collect();
    let expected: BTreeSet<(String, String)> = [
        ("main", "-"),
        ("worker-a", "main"),
        ("worker-b", "main"),
        ("leaf", "worker-a"),
    ]
    .iter()
    .map(|(a, p)| (a.to_string(), p.to_string()))
    .collect();
    assert_eq!(tree, expected);
    assert_eq!(agents.len(), 4);
    for a in &agents {
        let name = string(a, "gen_ai.agent.name");
        assert_eq!(string(a, "gen_ai.operation.name"), "invoke_agent");
        assert_eq!(string(a, "cadre.task.end_state"), "completed");
        assert_eq!(string(a, "gen_ai.provider.name"), "scripted");
        assert!(!string(a, "gen_ai.conversation.id").is_empty());
        if name == "main" {
            assert_eq!(a.parent_span_id, Vec::<u8>::new(), "the run is the root");
        } else {
            assert!(
                string(a, "gen_ai.agent.id").starts_with("t-")
                    || !string(a, "gen_ai.agent.id").is_empty()
            );
            // A sub-agent hangs under the tool call that started it, also in the background.
            let parent = by_id[&a.parent_span_id];
            assert_eq!(parent.name, "execute_tool task", "{name}'s parent");
            assert_eq!(
                matches!(
                    attr(a, "cadre.task.background"),
                    Some(Value::BoolValue(true))
                ),
                name.starts_with("worker"),
                "{name}: background"
            );
        }
    }
    // Every chat span carries the usage its agent's model answered.
    let chats: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert!(chats.len() >= 6, "{} chat spans", chats.len());
    for c in &chats {
        let agent = string(
            agent_of(c, &by_id).expect("chat under an agent"),
            "gen_ai.agent.name",
        );
        let want = USAGE.iter().find(|(a, _)| *a == agent).unwrap().1;
        assert_eq!(tokens(c), want, "chat of {agent}");
        assert_eq!(c.kind, 3, "chat is CLIENT");
        assert_eq!(string(c, "gen_ai.response.finish_reasons"), "stop");
    }
    // The sums over each subtree equal what its agent span reports.
    for a in &agents {
        let mut sum = [0u64; 4];
        for c in &chats {
            let mut up = Some(*c);
            let mut inside = false;
            while let Some(s) = up {
                if s.span_id == a.span_id {
                    inside = true;
                    break;
                }
                up = by_id.get(&s.parent_span_id).copied();
            }
            if inside {
                for (i, t) in tokens(c).iter().enumerate() {
                    sum[i] += t;
                }
            }
        }
        assert_eq!(
            tokens(a),
            sum,
            "subtree of {}",
            string(a, "gen_ai.agent.name")
        );
    }
    let main = agents
        .iter()
        .find(|a| string(a, "gen_ai.agent.name") == "main")
        .unwrap();
    assert_eq!(
        int(main, "gen_ai.usage.input_tokens"),
        reported["input_tokens"].as_u64().unwrap()
    );
    assert_eq!(
        int(main, "gen_ai.usage.output_tokens"),
        reported["output_tokens"].as_u64().unwrap()
    );
    // Tool calls: named, with their call id, and the permission decision.
    let tools: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("execute_tool "))
        .collect();
    assert_eq!(tools.len(), 3, "three task calls");
    for t in tools {
        assert_eq!(string(t, "gen_ai.tool.name"), "task");
        assert!(!string(t, "gen_ai.tool.call.id").is_empty());
        assert_eq!(string(t, "gen_ai.tool.type"), "function");
        assert!(!string(t, "cadre.permission.decision").is_empty());
        // Contents are not captured by default.
        assert!(attr(t, "gen_ai.tool.call.arguments").is_none());
    }
}

#[test]
fn a_traceparent_given_to_the_run_is_continued() {
    let dir = tempfile::tempdir().unwrap();
    let model = delegation_tree(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (url, collected) = receiver(&rt);
    let out = cli_support::cadre(dir.path())
        .args(["--model", &model, "run", "go"])
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url)
        .env(
            "TRACEPARENT",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .env("TRACESTATE", "congo=t61rcWkgMzE")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        cli_support::text(&out.stderr)
    );
    let spans = collected.lock().unwrap().clone();
    assert!(!spans.is_empty());
    let want_trace = hex("4bf92f3577b34da6a3ce929d0e0e4736");
    assert!(
        spans.iter().all(|s| s.trace_id == want_trace),
        "the caller's trace"
    );
    assert!(
        spans.iter().all(|s| s.trace_state == "congo=t61rcWkgMzE"),
        "the caller's vendor entries: {:?}",
        spans.iter().map(|s| &s.trace_state).collect::<Vec<_>>()
    );
    let main = spans
        .iter()
        .find(|s| s.name == "invoke_agent main")
        .unwrap();
    assert_eq!(main.parent_span_id, hex("00f067aa0ba902b7"));
}

/// The last span of a `--trace-file` whose name satisfies `wanted`.
fn last_span_in(file: &Path, wanted: impl Fn(&str) -> bool) -> Option<Span> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut found = None;
    for line in text.lines() {
        let request: ExportTraceServiceRequest = serde_json::from_str(line).unwrap();
        let spans = (request.resource_spans.into_iter())
            .flat_map(|rs| rs.scope_spans)
            .flat_map(|ss| ss.spans);
        found = spans.filter(|s| wanted(&s.name)).last().or(found);
    }
    found
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn the_trace_file_holds_otlp_json_lines_in_the_proto_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let model = delegation_tree(dir.path());
    let file = dir.path().join("trace.jsonl");
    let out = cli_support::cadre(dir.path())
        .args(["--model", &model, "run", "--trace-file"])
        .arg(&file)
        .arg("go")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        cli_support::text(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let request: ExportTraceServiceRequest =
            serde_json::from_str(line).expect("a line in the OTLP JSON mapping");
        for rs in request.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                .and_then(|kv| kv.value.clone())
                .and_then(|v| v.value);
            assert!(matches!(service, Some(Value::StringValue(s)) if s == "cadre"));
            for ss in rs.scope_spans {
                names.extend(ss.spans.into_iter().map(|s| s.name));
            }
        }
        // The mapping spells ids in hex, as collectors read them.
        let raw: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = raw["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
            .as_str()
            .unwrap();
        assert_eq!(id.len(), 32, "hex trace id: {id}");
    }
    for want in [
        "invoke_agent main",
        "invoke_agent leaf",
        "execute_tool task",
    ] {
        assert!(names.contains(want), "{want} in {names:?}");
    }
}

#[test]
fn a_collector_that_never_answers_neither_stops_nor_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let model = delegation_tree(dir.path());
    // Accepts connections and never reads or answers them.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    let out = cli_support::cadre(dir.path())
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = cli_support::text(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    let done = cli_support::text(&out.stdout)
        .lines()
        .any(|l| l.contains("\"type\":\"done\"") && l.contains("\"agent\":\"main\""));
    assert!(done, "the run completed");
    let warnings = stderr.lines().filter(|l| l.contains("telemetry:")).count();
    assert_eq!(warnings, 1, "one warning: {stderr}");
}

#[test]
fn bash_and_hooks_get_the_trace_context_of_their_tool_call() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        "[[scripts]]\nagent = \"main\"\n[[scripts.turns]]\n\
         tool_calls = [ { name = \"bash\", args = { command = \"echo tp=$TRACEPARENT ts=$TRACESTATE\" } } ]\n\
         [[scripts.turns]]\ntext = \"{{tool_results}}\"\n",
    )
    .unwrap();
    // A PostToolUse hook (a command and an HTTP one would both be sent the fields; the
    // command shows them) writes what it was given.
    let seen = dir.path().join("hook.txt");
    std::fs::create_dir_all(dir.path().join(".claude")).unwrap();
    let hook = format!("echo \"$TRACEPARENT $TRACESTATE\" > {}", seen.display());
    let settings = serde_json::json!({"hooks": {"PostToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": hook}]}
    ]}});
    std::fs::write(
        dir.path().join(".claude/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let file = dir.path().join("trace.jsonl");
    let out = cli_support::cadre(dir.path())
        .args(["--model", &format!("scripted:{}", script.display())])
        .args(["run", "--approval", "auto", "--trace-file"])
        .arg(&file)
        .arg("go")
        .env(
            "TRACEPARENT",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .env("TRACESTATE", "congo=t61rcWkgMzE")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = cli_support::text(&out.stdout);
    assert!(
        out.status.success(),
        "stderr: {}",
        cli_support::text(&out.stderr)
    );
    let s = last_span_in(&file, |n| n == "execute_tool bash").expect("the bash call's span");
    let to_hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let want = format!(
        "tp=00-{}-{}-01 ts=congo=t61rcWkgMzE",
        to_hex(&s.trace_id),
        to_hex(&s.span_id)
    );
    assert!(stdout.contains(&want), "{want} in {stdout}");
    let hook = std::fs::read_to_string(&seen).expect("the hook ran");
    let trace = format!("00-{}-", to_hex(&s.trace_id));
    assert!(
        hook.starts_with(&trace) && hook.trim_end().ends_with("-01 congo=t61rcWkgMzE"),
        "{hook}"
    );
}

#[test]
fn an_mcp_tool_call_carries_the_traceparent_of_its_tool_call_in_meta() {
    if !cadre_testkit::optional::on_path("python3") {
        cadre_testkit::optional::skip_because("python3 not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/writer_mcp.py");
    std::fs::write(
        dir.path().join(".mcp.json"),
        serde_json::json!({"mcpServers": {"writer": {"command": "python3", "args": [server]}}})
            .to_string(),
    )
    .unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        "[[scripts]]\nagent = \"main\"\n[[scripts.turns]]\n\
         tool_calls = [ { name = \"mcp__writer__meta\", args = {} } ]\n\
         [[scripts.turns]]\ntext = \"{{tool_results}}\"\n",
    )
    .unwrap();
    let file = dir.path().join("trace.jsonl");
    let out = cli_support::cadre(dir.path())
        .args(["--model", &format!("scripted:{}", script.display())])
        .args(["run", "--approval", "auto", "--trace-file"])
        .arg(&file)
        .arg("go")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = cli_support::text(&out.stdout);
    assert!(
        out.status.success(),
        "stderr: {}",
        cli_support::text(&out.stderr)
    );
    let s = last_span_in(&file, |n| n == "execute_tool mcp__writer__meta")
        .expect("the MCP call's span");
    let to_hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let want = format!(
        r#""traceparent": "00-{}-{}-01""#,
        to_hex(&s.trace_id),
        to_hex(&s.span_id)
    );
    assert!(stdout.contains(&want), "{want} in {stdout}");
}

#[test]
fn a_chat_span_carries_the_providers_reply_id() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(cadre_testkit::MockServer::start()).unwrap();
    mock.push_openai(
        cadre_testkit::OpenAiStream::new()
            .role()
            .text("hi")
            .finish("stop")
            .usage(5, 1, 0)
            .done()
            .into_reply(),
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        format!(
            "[providers.openai]\nbase_url = \"{}\"\napi_key_env = \"CADRE_TEST_KEY\"\n",
            mock.openai_base_url()
        ),
    )
    .unwrap();
    let file = dir.path().join("trace.jsonl");
    let out = cli_support::cadre(dir.path())
        .env("CADRE_TEST_KEY", "sk-test")
        .args(["--model", "openai:gpt-4o-mini", "run", "--trace-file"])
        .arg(&file)
        .arg("go")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        cli_support::text(&out.stderr)
    );
    let chat = last_span_in(&file, |n| n.starts_with("chat ")).expect("the model call's span");
    assert_eq!(string(&chat, "gen_ai.response.id"), "chatcmpl-mock");
}

mod metrics {
    //! The GenAI metrics, exported at exit to the same receiver as the spans.
    use super::*;
    use opentelemetry_proto::tonic::collector::metrics::v1::{
        ExportMetricsServiceRequest, ExportMetricsServiceResponse,
    };
    use opentelemetry_proto::tonic::common::v1::KeyValue;
    use opentelemetry_proto::tonic::metrics::v1::{Metric, metric, number_data_point};

    type Metrics = Arc<Mutex<Vec<Metric>>>;

    async fn receive_metrics(State(all): State<Metrics>, body: Bytes) -> Vec<u8> {
        let request = ExportMetricsServiceRequest::decode(body).expect("an OTLP metrics request");
        let mut all = all.lock().unwrap();
        for rm in request.resource_metrics {
            for sm in rm.scope_metrics {
                all.extend(sm.metrics);
            }
        }
        ExportMetricsServiceResponse::default().encode_to_vec()
    }

    fn text_attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
        attrs
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref())
            .and_then(|v| match &v.value {
                Some(Value::StringValue(s)) => Some(s.as_str()),
                _ => None,
            })
    }

    /// The last export of metric `name` (they are cumulative).
    fn last<'a>(all: &'a [Metric], name: &str) -> &'a Metric {
        all.iter().rfind(|m| m.name == name).unwrap_or_else(|| {
            panic!(
                "no {name} in {:?}",
                all.iter().map(|m| &m.name).collect::<Vec<_>>()
            )
        })
    }

    /// Sum and count of histogram `m`'s points whose attributes satisfy `keep`.
    fn histogram(m: &Metric, keep: impl Fn(&[KeyValue]) -> bool) -> (f64, u64) {
        let Some(metric::Data::Histogram(h)) = &m.data else {
            panic!("{} is not a histogram", m.name)
        };
        h.data_points
            .iter()
            .filter(|p| keep(&p.attributes))
            .fold((0.0, 0), |(s, c), p| {
                (s + p.sum.unwrap_or(0.0), c + p.count)
            })
    }

    /// The sum of counter `m`'s points whose attributes satisfy `keep`.
    fn counter(m: &Metric, keep: impl Fn(&[KeyValue]) -> bool) -> i64 {
        let Some(metric::Data::Sum(s)) = &m.data else {
            panic!("{} is not a sum", m.name)
        };
        s.data_points
            .iter()
            .filter(|p| keep(&p.attributes))
            .map(|p| match p.value {
                Some(number_data_point::Value::AsInt(i)) => i,
                Some(number_data_point::Value::AsDouble(d)) => d as i64,
                None => 0,
            })
            .sum()
    }

    #[test]
    fn model_calls_and_sub_agents_are_counted_as_the_spans_say() {
        let dir = tempfile::tempdir().unwrap();
        let model = delegation_tree(dir.path());
        let rt = tokio::runtime::Runtime::new().unwrap();
        let spans = Collected::default();
        let metrics = Metrics::default();
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(receive))
            .with_state(spans.clone())
            .merge(
                axum::Router::new()
                    .route("/v1/metrics", axum::routing::post(receive_metrics))
                    .with_state(metrics.clone()),
            );
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        rt.spawn(async move { axum::serve(listener, app).await });
        let out = cli_support::cadre(dir.path())
            .args(["--model", &model, "run", "go"])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &base)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let stderr = cli_support::text(&out.stderr);
        assert!(out.status.success(), "stderr: {stderr}");
        let spans = spans.lock().unwrap().clone();
        let chats: Vec<&Span> = spans
            .iter()
            .filter(|s| s.name.starts_with("chat "))
            .collect();
        assert!(!chats.is_empty());
        let all = metrics.lock().unwrap().clone();

        let usage = last(&all, "gen_ai.client.token.usage");
        for (kind, key) in [
            ("input", "gen_ai.usage.input_tokens"),
            ("output", "gen_ai.usage.output_tokens"),
        ] {
            let (sum, count) =
                histogram(usage, |a| text_attr(a, "gen_ai.token.type") == Some(kind));
            let want: u64 = chats.iter().map(|s| int(s, key)).sum();
            assert_eq!(sum as u64, want, "{kind} tokens");
            assert_eq!(count, chats.len() as u64, "one {kind} point a call");
        }
        // Per agent: the leaf's calls, with its usage.
        let (leaf_in, _) = histogram(usage, |a| {
            text_attr(a, "gen_ai.agent.name") == Some("leaf")
                && text_attr(a, "gen_ai.token.type") == Some("input")
        });
        assert!(leaf_in >= 400.0, "{leaf_in}");
        let (_, calls) = histogram(last(&all, "gen_ai.client.operation.duration"), |_| true);
        assert_eq!(calls, chats.len() as u64);

        let every = |_: &[KeyValue]| true;
        assert_eq!(counter(last(&all, "cadre.subagent.started"), every), 3);
        let completed = counter(last(&all, "cadre.subagent.ended"), |a| {
            text_attr(a, "cadre.task.end_state") == Some("completed")
        });
        assert_eq!(completed, 3);
        assert_eq!(counter(last(&all, "cadre.subagent.in_flight"), every), 0);
        let leaf = counter(last(&all, "cadre.subagent.started"), |a| {
            text_attr(a, "gen_ai.agent.name") == Some("leaf")
        });
        assert_eq!(leaf, 1);
    }
}
