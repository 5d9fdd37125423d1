//! The OpenTelemetry GenAI names cadre's spans carry, and the spans built with them: every
//! `gen_ai.*` attribute, span name and cadre's own `cadre.*` attributes are spelled here and
//! nowhere else. The spans are ordinary `tracing` spans of the target [`TARGET`]; only when
//! telemetry is on does the binary install a layer that exports them (without it they are
//! disabled by the log filter and cost a level check).
//!
//! The conventions followed are those of semantic-conventions [`SEMCONV_VERSION`].

pub mod metrics;

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The version of the OpenTelemetry semantic conventions the names follow.
pub const SEMCONV_VERSION: &str = "1.37.0";

/// The `tracing` target of every span and event made here (what the exporting layer
/// admits).
pub const TARGET: &str = "cadre::otel";

static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);
static INHERITED: OnceLock<opentelemetry::Context> = OnceLock::new();

/// Record message contents, tool arguments and results on the spans (off by default:
/// they may hold anything the model or a tool saw).
pub fn set_capture_content(on: bool) {
    CAPTURE_CONTENT.store(on, Ordering::Relaxed);
}

/// Whether contents are recorded (see [`set_capture_content`]).
pub fn capture_content() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

/// Make the trace of `traceparent` (a W3C header value, as `TRACEPARENT` holds it), with the
/// vendor entries of `tracestate` (`TRACESTATE`), the parent of the top-level agent span of
/// this process. Ignored when malformed or set already.
pub fn inherit_trace(traceparent: &str, tracestate: Option<&str>) -> bool {
    match parse_trace_context(traceparent, tracestate) {
        Some(sc) => INHERITED
            .set(opentelemetry::Context::new().with_remote_span_context(sc))
            .is_ok(),
        None => false,
    }
}

/// The span context of a W3C `traceparent` value; `None` unless it is version 00 (or a later
/// version's first four fields) with a non-zero trace and span id in lowercase hex.
pub fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let mut parts = value.trim().split('-');
    let version = parts.next()?;
    let trace = parts.next()?;
    let span = parts.next()?;
    let flags = parts.next()?;
    let rest = parts.next();
    let lower_hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !lower_hex(version, 2) || version == "ff" || (version == "00" && rest.is_some()) {
        return None;
    }
    if !lower_hex(trace, 32) || !lower_hex(span, 16) || !lower_hex(flags, 2) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let sc = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    sc.is_valid().then_some(sc)
}

/// The span context of a W3C `traceparent` with the entries of its `tracestate`; a
/// malformed `tracestate` is dropped (the W3C rule: the parent still counts).
pub fn parse_trace_context(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let sc = parse_traceparent(traceparent)?;
    let state = tracestate
        .and_then(|s| s.trim().parse::<TraceState>().ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags(),
        sc.is_remote(),
        state,
    ))
}

/// The W3C trace-context fields of the current span, as headers name them (environment
/// variables take the same names in capitals, `_meta` as they are): `traceparent`, and
/// `tracestate` when the trace carries vendor entries. Empty when telemetry records nothing.
pub fn current_trace_fields() -> Vec<(&'static str, String)> {
    let span = Span::current();
    let Some(tp) = traceparent(&span) else {
        return Vec::new();
    };
    let mut fields = vec![("traceparent", tp)];
    let state = span.context().span().span_context().trace_state().header();
    if !state.is_empty() {
        fields.push(("tracestate", state));
    }
    fields
}

/// The W3C `traceparent` of `span`, when telemetry records it.
pub fn traceparent(span: &Span) -> Option<String> {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// The W3C `traceparent` of the current span, when telemetry records it.
pub fn current_traceparent() -> Option<String> {
    traceparent(&Span::current())
}

/// Continue the trace of `traceparent` (and `tracestate`) in `span` (a request from another
/// process, or a task adopted from one).
pub fn continue_trace(span: &Span, traceparent: &str, tracestate: Option<&str>) {
    if let Some(sc) = parse_trace_context(traceparent, tracestate) {
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(sc));
    }
}

/// The span of one request `cadre serve` answers (SERVER), continuing the caller's trace
/// when it sent a valid `traceparent` (with its `tracestate`).
pub fn served(
    method: &str,
    route: &str,
    traceparent: Option<&str>,
    tracestate: Option<&str>,
) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "serve",
        "otel.name" = %format!("{method} {route}"),
        "otel.kind" = "server",
        "http.request.method" = method,
        "http.route" = route,
    );
    if let Some(tp) = traceparent
        && !span.is_disabled()
    {
        continue_trace(&span, tp, tracestate);
    }
    span
}

/// Who an agent span is for.
#[derive(Debug, Clone, Copy)]
pub struct AgentSpan<'a> {
    /// The agent's name.
    pub agent: &'a str,
    /// Its task id (none for the top-level run).
    pub task_id: Option<&'a str>,
    /// Its session id.
    pub session_id: &'a str,
    /// The model spec it runs (`anthropic:claude-…`).
    pub model: &'a str,
    /// Spawn depth (0 at the top).
    pub depth: u32,
    /// Whether it runs in the background of its caller.
    pub background: bool,
    /// Whether the agent runs in another process (a remote agent: a CLIENT span).
    pub remote: bool,
}

/// The provider part of a model spec (`anthropic` of `anthropic:claude-…`).
fn provider_of(model: &str) -> &str {
    model.split_once(':').map_or("", |(p, _)| p)
}

/// The model part of a model spec.
fn model_of(model: &str) -> &str {
    model.split_once(':').map_or(model, |(_, m)| m)
}

/// `invoke_agent {agent}`: one agent's run, the top-level one or a sub-agent's. Its parent is
/// the current span (the `execute_tool` span of the call that started it), or for the
/// top-level run the trace given to this process.
pub fn invoke_agent(a: AgentSpan<'_>) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "invoke_agent",
        "otel.name" = %format!("invoke_agent {}", a.agent),
        "otel.kind" = if a.remote { "client" } else { "internal" },
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.agent.name" = a.agent,
        "gen_ai.agent.id" = a.task_id.unwrap_or(""),
        "gen_ai.conversation.id" = a.session_id,
        "gen_ai.provider.name" = provider_of(a.model),
        "gen_ai.request.model" = model_of(a.model),
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.usage.cache_read.input_tokens" = Empty,
        "gen_ai.usage.cache_creation.input_tokens" = Empty,
        "cadre.task.background" = a.background,
        "cadre.task.end_state" = Empty,
        "cadre.task.complete" = Empty,
        "cadre.turns" = Empty,
        "cadre.depth" = i64::from(a.depth),
        "cadre.cost_usd" = Empty,
        "error.type" = Empty,
    );
    if a.task_id.is_none()
        && let Some(cx) = INHERITED.get()
    {
        let _ = span.set_parent(cx.clone());
    }
    span
}

/// Token counts as the spans carry them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tokens {
    /// Prompt tokens, including those read from and written to the cache.
    pub input: u64,
    /// Completion tokens.
    pub output: u64,
    /// Prompt tokens read from the cache.
    pub cache_read: u64,
    /// Prompt tokens written to the cache.
    pub cache_creation: u64,
}

/// A count as an OpenTelemetry integer (which is signed: an unsigned one would be exported
/// as text).
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn record_tokens(span: &Span, t: Tokens) {
    span.record("gen_ai.usage.input_tokens", int(t.input));
    span.record("gen_ai.usage.output_tokens", int(t.output));
    span.record("gen_ai.usage.cache_read.input_tokens", int(t.cache_read));
    span.record(
        "gen_ai.usage.cache_creation.input_tokens",
        int(t.cache_creation),
    );
}

/// How an agent's run ended, recorded on its `invoke_agent` span.
#[derive(Debug, Clone)]
pub struct AgentEnd<'a> {
    /// The end state as cadre names it (`completed`, `failed`, …).
    pub end_state: &'a str,
    /// Whether it completed its task.
    pub complete: bool,
    /// The error kind when it failed.
    pub error: Option<&'a str>,
    /// Turns taken.
    pub turns: u32,
    /// Its own tokens plus its descendants'.
    pub tokens: Tokens,
    /// Cost in dollars, when every call was priced.
    pub cost_usd: Option<f64>,
}

/// Record `end` on the agent span `span`.
pub fn record_agent_end(span: &Span, end: &AgentEnd<'_>) {
    span.record("cadre.task.end_state", end.end_state);
    span.record("cadre.task.complete", end.complete);
    span.record("cadre.turns", i64::from(end.turns));
    record_tokens(span, end.tokens);
    if let Some(c) = end.cost_usd {
        span.record("cadre.cost_usd", c);
    }
    if let Some(e) = end.error {
        span.record("error.type", e);
        span.record("otel.status_code", "ERROR");
    }
}

/// `chat {model}`: one model call (CLIENT). `server` is the provider's host, if known.
pub fn chat(model_spec: &str, server: Option<&str>) -> Span {
    let model = model_of(model_spec);
    tracing::info_span!(
        target: TARGET,
        "chat",
        "otel.name" = %format!("chat {model}"),
        "otel.kind" = "client",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = provider_of(model_spec),
        "gen_ai.request.model" = model,
        "server.address" = server.unwrap_or(""),
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.usage.cache_read.input_tokens" = Empty,
        "gen_ai.usage.cache_creation.input_tokens" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "gen_ai.response.id" = Empty,
        "gen_ai.output.messages" = Empty,
        "error.type" = Empty,
    )
}

/// Record a model call's outcome on its `chat` span. `text` is recorded only while contents
/// are captured.
pub fn record_chat(
    span: &Span,
    tokens: Tokens,
    finish_reason: Option<&str>,
    response_id: Option<&str>,
    text: &str,
) {
    record_tokens(span, tokens);
    if let Some(r) = finish_reason {
        span.record("gen_ai.response.finish_reasons", r);
    }
    if let Some(id) = response_id {
        span.record("gen_ai.response.id", id);
    }
    if capture_content() {
        span.record("gen_ai.output.messages", text);
    }
}

/// Record a failed call or tool on its span.
pub fn record_error(span: &Span, kind: &str) {
    span.record("error.type", kind);
    span.record("otel.status_code", "ERROR");
}

/// `execute_tool {tool}`: one tool call, in `turn` (the turn's span, which only the logs
/// show: the exported span is a child of the agent's).
pub fn execute_tool(turn: &Span, tool: &str, call_id: &str, arguments: &str) -> Span {
    // Entered rather than named as the parent: an exporter that leaves the turn span out
    // then hangs the call under the nearest span it records, not at a trace's root.
    let _in_turn = turn.enter();
    let span = tracing::info_span!(
        target: TARGET,
        "execute_tool",
        "otel.name" = %format!("execute_tool {tool}"),
        "otel.kind" = "internal",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = tool,
        "gen_ai.tool.call.id" = call_id,
        "gen_ai.tool.type" = "function",
        "gen_ai.tool.call.arguments" = Empty,
        "gen_ai.tool.call.result" = Empty,
        "cadre.permission.decision" = Empty,
        "cadre.approval.wait_ms" = Empty,
        "error.type" = Empty,
    );
    if capture_content() {
        span.record("gen_ai.tool.call.arguments", arguments);
    }
    span
}

/// Record the permission decision of a tool call (`allow`, `deny`, `ask`) and, when a person
/// or a parent was asked, how long the answer took.
pub fn record_permission(span: &Span, decision: &str, waited: Option<std::time::Duration>) {
    span.record("cadre.permission.decision", decision);
    if let Some(w) = waited {
        span.record("cadre.approval.wait_ms", int(w.as_millis() as u64));
    }
}

/// Record a tool call's result on its span (its text only while contents are captured).
pub fn record_tool_result(span: &Span, is_error: bool, output: &str) {
    if is_error {
        record_error(span, "tool_error");
    }
    if capture_content() {
        span.record("gen_ai.tool.call.result", output);
    }
}

/// A `cadre.retry` event on the current span (the model call is asked again).
pub fn retry_event(reason: &str) {
    tracing::event!(target: TARGET, tracing::Level::INFO, cadre.retry.reason = reason, "cadre.retry");
}

/// A `cadre.compaction` event on the current span.
pub fn compaction_event(replaced_messages: usize, tokens_before: u64, tokens_after: u64) {
    tracing::event!(
        target: TARGET,
        tracing::Level::INFO,
        cadre.compaction.replaced_messages = int(replaced_messages as u64),
        cadre.compaction.tokens_before = int(tokens_before),
        cadre.compaction.tokens_after = int(tokens_after),
        "cadre.compaction"
    );
}

/// A `cadre.checkpoint` event on the current span: `messages` of the conversation are stored.
pub fn checkpoint_event(task_id: &str, messages: u64) {
    tracing::event!(
        target: TARGET,
        tracing::Level::INFO,
        gen_ai.agent.id = task_id,
        cadre.checkpoint.messages = int(messages),
        "cadre.checkpoint"
    );
}

/// A `cadre.adoption` event on `span`: the task resumed on this node after `lost_node` was lost.
pub fn adoption_event(span: &Span, task_id: &str, lost_node: &str) {
    tracing::event!(
        target: TARGET,
        parent: span,
        tracing::Level::INFO,
        gen_ai.agent.id = task_id,
        cadre.node.lost = lost_node,
        "cadre.adoption"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracestate_travels_with_its_traceparent_and_a_malformed_one_is_dropped() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let sc = parse_trace_context(tp, Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"))
            .expect("valid");
        assert_eq!(sc.trace_state().get("congo"), Some("t61rcWkgMzE"));
        assert_eq!(
            sc.trace_state().header(),
            "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
        );
        let sc = parse_trace_context(tp, Some("no equals sign")).expect("the parent counts");
        assert_eq!(sc.trace_state().header(), "");
        assert!(parse_trace_context("00-bad", Some("a=b")).is_none());
    }

    #[test]
    fn traceparents_parse_only_in_their_w3c_form() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let sc = parse_traceparent(good).expect("valid");
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(sc.is_remote() && sc.is_sampled());
        for bad in [
            "",
            "00",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\u{e9}",
            "00-4bf92f3577b34da6a3ce929d0e0e4736\n-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad:?} parsed");
        }
        // A later version may append fields.
        assert!(
            parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz")
                .is_some()
        );
    }

    #[test]
    fn model_specs_split_into_provider_and_model() {
        assert_eq!(provider_of("anthropic:claude-x"), "anthropic");
        assert_eq!(model_of("anthropic:claude-x"), "claude-x");
        assert_eq!(model_of("bare"), "bare");
    }

    #[test]
    fn no_span_context_without_a_telemetry_layer() {
        assert_eq!(current_traceparent(), None);
    }
}
