//! `cadre serve` continues its caller's trace: a task-protocol request that carries a W3C
//! `traceparent` is served in a SERVER span under that parent, with the served agent's
//! `invoke_agent` span under it, all in the caller's trace (a test OTLP receiver collects).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use axum::body::Bytes;
use axum::extract::State;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};
use serve_support::{Served, workspace};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_task_continues_the_callers_trace() {
    let spans = Collected::default();
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(receive))
        .with_state(spans.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let traces = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let ws = workspace(&[
        ("script.toml", "[[turns]]\ntext = \"done\"\n"),
        (
            ".cadre/agents/worker.md",
            "---\nname: worker\ndescription: Works.\n---\nYou work.\n",
        ),
        (
            ".cadre/config.toml",
            "[serve]\ndefault_agent = \"worker\"\n",
        ),
    ]);
    let model = format!("scripted:{}", ws.path().join("script.toml").display());
    let mut served = Served::start(
        ws.path(),
        &model,
        &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces.as_str())],
    );
    let http = reqwest::Client::new();
    let submitted: Value = http
        .post(format!("{}/tasks", served.url))
        .header(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .header("tracestate", "rojo=00f067aa0ba902b7")
        .json(&json!({"task_id": "job-1", "input": "do it"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(submitted["task_id"], "job-1", "{submitted}");
    let waited: Value = http
        .get(format!(
            "{}/tasks/job-1/wait?timeout_seconds=30",
            served.url
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(waited["status"], "success", "{waited}");
    // SIGTERM: the server flushes its spans on the way out.
    assert!(
        served.terminate(Duration::from_secs(20)),
        "{}",
        served.stderr()
    );

    let spans = spans.lock().unwrap().clone();
    let trace = hex("0af7651916cd43dd8448eb211c80319c");
    let server = spans
        .iter()
        .find(|s| s.name == "POST /tasks")
        .unwrap_or_else(|| panic!("a server span in {:?}", names(&spans)));
    assert_eq!(server.trace_id, trace);
    assert_eq!(server.parent_span_id, hex("b7ad6b7169203331"));
    assert_eq!(server.kind, 2, "SERVER");
    assert_eq!(
        server.trace_state, "rojo=00f067aa0ba902b7",
        "the caller's tracestate"
    );
    let agent = spans
        .iter()
        .find(|s| s.name == "invoke_agent worker")
        .unwrap_or_else(|| panic!("the served agent's span in {:?}", names(&spans)));
    assert_eq!(agent.trace_id, trace, "the caller's trace");
    assert_eq!(
        agent.parent_span_id, server.span_id,
        "under the server span"
    );
}

fn names(spans: &[Span]) -> Vec<&str> {
    spans.iter().map(|s| s.name.as_str()).collect()
}
