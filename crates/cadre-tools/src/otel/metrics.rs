//! The OpenTelemetry GenAI metrics cadre records beside its spans: tokens and duration of
//! every model call (`gen_ai.client.*`), and how many sub-agents started, ended (by end
//! state), were adopted after a crash and run now (`cadre.subagent.*`), each with
//! `gen_ai.agent.name`. Off until the binary has installed a meter provider and called
//! [`enable`]: then every record is one atomic load.

use super::{Tokens, model_of, provider_of};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, UpDownCounter};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static ON: AtomicBool = AtomicBool::new(false);
static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

/// Bucket boundaries the conventions advise for token counts.
const TOKEN_BOUNDS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
/// Bucket boundaries the conventions advise for operation durations, in seconds.
const DURATION_BOUNDS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

struct Instruments {
    tokens: Histogram<u64>,
    duration: Histogram<f64>,
    started: Counter<u64>,
    ended: Counter<u64>,
    adopted: Counter<u64>,
    in_flight: UpDownCounter<i64>,
}

/// Record metrics from now on, through the global meter provider (install it first: the
/// instruments are made from it at the first record).
pub fn enable() {
    ON.store(true, Ordering::Release);
}

fn instruments() -> Option<&'static Instruments> {
    if !ON.load(Ordering::Acquire) {
        return None;
    }
    Some(INSTRUMENTS.get_or_init(|| {
        let m = opentelemetry::global::meter("cadre");
        Instruments {
            tokens: m
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Tokens of each model call, by gen_ai.token.type")
                .with_boundaries(TOKEN_BOUNDS.to_vec())
                .build(),
            duration: m
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("Duration of each model call")
                .with_boundaries(DURATION_BOUNDS.to_vec())
                .build(),
            started: m
                .u64_counter("cadre.subagent.started")
                .with_description("Sub-agent tasks started")
                .build(),
            ended: m
                .u64_counter("cadre.subagent.ended")
                .with_description("Sub-agent tasks ended, by cadre.task.end_state")
                .build(),
            adopted: m
                .u64_counter("cadre.subagent.adopted")
                .with_description("Sub-agent tasks adopted after their node was lost")
                .build(),
            in_flight: m
                .i64_up_down_counter("cadre.subagent.in_flight")
                .with_description("Sub-agent tasks running in this process")
                .build(),
        }
    }))
}

/// One model call of `agent` on `model_spec`: its tokens (input and output apart) and how
/// long it took; `error` the kind of its failure.
pub fn chat_call(
    model_spec: &str,
    agent: &str,
    tokens: Tokens,
    took: Duration,
    error: Option<&str>,
) {
    let Some(i) = instruments() else { return };
    let mut attrs = vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.provider.name", provider_of(model_spec).to_string()),
        KeyValue::new("gen_ai.request.model", model_of(model_spec).to_string()),
        KeyValue::new("gen_ai.agent.name", agent.to_string()),
    ];
    for (kind, n) in [("input", tokens.input), ("output", tokens.output)] {
        let mut with_type = attrs.clone();
        with_type.push(KeyValue::new("gen_ai.token.type", kind));
        i.tokens.record(n, &with_type);
    }
    if let Some(e) = error {
        attrs.push(KeyValue::new("error.type", e.to_string()));
    }
    i.duration.record(took.as_secs_f64(), &attrs);
}

fn agent(name: &str) -> [KeyValue; 1] {
    [KeyValue::new("gen_ai.agent.name", name.to_string())]
}

/// A sub-agent task running in this process (new, or adopted): counted as started when
/// made, and in flight until dropped, however its job ends.
pub struct InFlight(Option<String>);

impl InFlight {
    /// A task of agent `name` starts running here.
    pub fn start(name: &str) -> Self {
        let Some(i) = instruments() else {
            return Self(None);
        };
        i.started.add(1, &agent(name));
        i.in_flight.add(1, &agent(name));
        Self(Some(name.to_string()))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let (Some(name), Some(i)) = (&self.0, instruments()) {
            i.in_flight.add(-1, &agent(name));
        }
    }
}

/// A sub-agent task of `name` that ran here ended in `end_state`.
pub fn subagent_ended(name: &str, end_state: &str) {
    if let Some(i) = instruments() {
        let [a] = agent(name);
        let state = KeyValue::new("cadre.task.end_state", end_state.to_string());
        i.ended.add(1, &[a, state]);
    }
}

/// A sub-agent task of `name` was adopted here after its node was lost.
pub fn subagent_adopted(name: &str) {
    if let Some(i) = instruments() {
        i.adopted.add(1, &agent(name));
    }
}
