//! A budget stop with many runs in flight: what the provider bills is what the runs report,
//! and no model call starts once the budget is spent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_llm::{ModelRequest, ModelStream, Provider, ResolvedModel, StreamEvent};
use cadre_tools::{Budget, BudgetLimits, RunContext, ToolRegistry, Workspace};
use cadre_types::{EndState, Event, EventEnvelope, EventSink, LimitKind, ToolCall, Usage};
use common::*;
use futures::StreamExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PER_CALL: u64 = 1000;
const MAX_TOKENS: u64 = 3500;
const RUNS: usize = 8;

/// One ordered log of model calls starting (at the provider, when the request is made) and
/// usage being reported (in the runs' event stream, the stop being the report that crosses
/// the limit), with the shared budget's total at each report.
#[derive(Default)]
struct Log(Mutex<Vec<(String, u64)>>);

/// A provider that bills every call it starts (the reply is on its way) and answers each
/// after its own latency with a tool call and its usage.
struct Billing {
    log: Arc<Log>,
    billed: AtomicU64,
    calls: AtomicU64,
}

impl Provider for Billing {
    fn name(&self) -> &str {
        "billing"
    }

    fn stream(&self, _request: ModelRequest) -> ModelStream {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        self.billed.fetch_add(PER_CALL, Ordering::SeqCst);
        self.log.0.lock().unwrap().push(("start".into(), n));
        // Model latency, 5 to 40 ms by call, so replies land one by one and some are in
        // flight when the budget runs out: a slow model is the fixture, so it sleeps.
        let latency = Duration::from_millis(5 * (n % 8 + 1));
        let usage = Usage {
            input_tokens: PER_CALL,
            ..Usage::default()
        };
        let call = ToolCall {
            id: format!("c{n}"),
            name: "echo".into(),
            arguments: r#"{"text":"x"}"#.into(),
        };
        let head = futures::stream::iter(vec![Ok(StreamEvent::TextDelta(format!("call {n}")))]);
        let tail = futures::stream::once(tokio::time::sleep(latency)).flat_map(move |()| {
            futures::stream::iter(vec![
                Ok(StreamEvent::ToolCall(call.clone())),
                Ok(StreamEvent::Usage(usage)),
                Ok(StreamEvent::Done { stop_reason: None }),
            ])
        });
        head.chain(tail).boxed()
    }
}

/// Logs every usage report with the shared budget's total at that moment.
struct UsageLog {
    log: Arc<Log>,
    shared: Budget,
}

impl EventSink for UsageLog {
    fn emit(&self, env: EventEnvelope) {
        if let Event::Usage { .. } = env.event {
            let total = self.shared.spent().usage.total();
            self.log.0.lock().unwrap().push(("usage".into(), total));
        }
    }
}

// Two worker threads: the runs start and charge calls in parallel, so a call started
// between a sibling's crossing charge and its report would show up in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_crossing_a_shared_budget_report_what_was_billed_and_start_nothing_after_the_stop() {
    let log = Arc::new(Log::default());
    let provider = Arc::new(Billing {
        log: log.clone(),
        billed: AtomicU64::new(0),
        calls: AtomicU64::new(0),
    });
    let model = ResolvedModel {
        provider: provider.clone(),
        model: "test".into(),
        spec: "billing:test".into(),
        price: None,
    };
    let agent = builder(model)
        .tools(ToolRegistry::new().with(TestTool::new("echo", Behaviour::Echo)))
        .build();
    // The parent's node: every run spends from it, like parallel children of one run.
    let shared = Budget::unlimited().child(BudgetLimits {
        max_tokens: Some(MAX_TOKENS),
        ..BudgetLimits::default()
    });
    let events: Arc<dyn EventSink> = Arc::new(UsageLog {
        log: log.clone(),
        shared: shared.clone(),
    });
    let h = Harness::new();
    let ws = Arc::new(Workspace::new(h.dir.path()).unwrap());
    let runs = (0..RUNS).map(|i| {
        let mut session = h.session();
        let run = Arc::new(RunContext {
            agent: format!("child{i}"),
            budget: shared.clone(),
            events: events.clone(),
            ..(*h.run_context(&session)).clone()
        });
        let (agent, ws, cancel) = (&agent, ws.clone(), h.cancel.clone());
        async move {
            agent
                .run(&mut session, Some("go".into()), run, ws, cancel)
                .await
        }
    });
    let outcomes = futures::future::join_all(runs).await;

    for out in &outcomes {
        assert_eq!(
            out.state,
            EndState::LimitReached {
                limit: LimitKind::Tokens
            }
        );
    }
    let billed = provider.billed.load(Ordering::SeqCst);
    assert!(billed > MAX_TOKENS, "the budget was crossed: {billed}");
    let reported: u64 = outcomes.iter().map(|o| o.usage.total()).sum();
    assert_eq!(reported, billed, "what the runs report is what was billed");
    assert_eq!(shared.spent().usage.total(), billed);
    // The stop is the first report that takes the shared total to the limit; no call
    // starts after it.
    let log = log.0.lock().unwrap().clone();
    let stop = log
        .iter()
        .position(|(what, total)| what == "usage" && *total >= MAX_TOKENS)
        .expect("a report crossed the limit");
    let late: Vec<_> = log[stop..].iter().filter(|(w, _)| w == "start").collect();
    assert!(
        late.is_empty(),
        "calls started after the stop: {late:?} in {log:?}"
    );
}
