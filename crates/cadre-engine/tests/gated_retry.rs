//! A model request that failed retryably is sent again only if the run may still act when
//! the backoff is over: a budget a sibling exhausted meanwhile, or an observer that says
//! no (a durable child that lost its task), ends the call without the retry. The summary
//! call of an automatic compaction is a model call like a turn's: it obeys the same stops.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_engine::{AgentBuilder, CompactionPolicy, Session, Step, TurnBoundary, TurnObserver};
use cadre_llm::openai::OpenAiProvider;
use cadre_llm::{ContextWindows, ProviderConfig, ResolvedModel};
use cadre_testkit::{MockReply, MockServer, OpenAiJson, RecordedRequest};
use cadre_tools::{Budget, BudgetLimits, RunContext, Spend, Workspace};
use cadre_types::{EndState, LimitKind, Message, Usage};
use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::Notify;

/// A provider endpoint that answers the first request `503` with `Retry-After: 1` and every
/// later one with an answer; `first` is notified when the first request arrived.
async fn busy_once() -> (MockServer, Arc<Notify>, ResolvedModel) {
    let first = Arc::new(Notify::new());
    let seen = Arc::new(AtomicUsize::new(0));
    let notify = first.clone();
    let mock = MockServer::start_with(Arc::new(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            notify.notify_one();
            return MockReply::openai_error(503, "overloaded", None).retry_after(1);
        }
        OpenAiJson::new().text("done").into_reply()
    }))
    .await
    .unwrap();
    let cfg = ProviderConfig {
        base_url: Some(mock.openai_base_url()),
        // A variable cargo always sets, standing in for an API key.
        api_key_env: Some("CARGO_PKG_NAME".into()),
        stream: Some(false),
        ..Default::default()
    };
    let provider = OpenAiProvider::from_config("mockai", &cfg).unwrap();
    let model = ResolvedModel {
        provider: Arc::new(provider),
        model: "gpt-mock".into(),
        spec: "mockai:gpt-mock".into(),
        price: None,
    };
    (mock, first, model)
}

#[tokio::test]
async fn a_retry_is_not_sent_once_a_sibling_exhausted_the_budget_during_the_backoff() {
    let (mock, first, model) = busy_once().await;
    let agent = builder(model).build();
    let parent = Budget::unlimited().child(BudgetLimits {
        max_tokens: Some(1000),
        ..BudgetLimits::default()
    });
    let sibling = parent.child(BudgetLimits::default());
    let h = Harness::new();
    let mut session = h.session();
    let run = Arc::new(RunContext {
        budget: parent.child(BudgetLimits::default()),
        ..(*h.run_context(&session)).clone()
    });
    let ws = Arc::new(Workspace::new(h.dir.path()).unwrap());
    let (out, ()) = tokio::join!(
        agent.run(&mut session, Some("go".into()), run, ws, h.cancel.clone()),
        async {
            // The first attempt failed and its backoff runs: the sibling's reply crosses
            // the shared limit.
            first.notified().await;
            sibling.charge(Spend::tokens(Usage {
                input_tokens: 1000,
                ..Usage::default()
            }));
        }
    );
    assert_eq!(
        out.state,
        EndState::LimitReached {
            limit: LimitKind::Tokens
        }
    );
    assert_eq!(mock.request_count(), 1, "the retry was sent");
}

/// Lets the first model step through and none after `lost` is set (a lease lost).
struct Lease {
    lost: Arc<AtomicBool>,
    asked: AtomicUsize,
}

#[async_trait]
impl TurnObserver for Lease {
    async fn turn_boundary(&self, _run: &RunContext, _boundary: TurnBoundary<'_>) {}

    async fn may_proceed(&self, _run: &RunContext, _step: Step<'_>) -> bool {
        self.asked.fetch_add(1, Ordering::SeqCst);
        !self.lost.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn a_retry_is_not_sent_once_the_observer_stops_the_run_during_the_backoff() {
    let (mock, first, model) = busy_once().await;
    let agent = builder(model).build();
    let h = Harness::new();
    let mut session = h.session();
    let run = h.run_context(&session);
    let ws = Arc::new(Workspace::new(h.dir.path()).unwrap());
    let lost = Arc::new(AtomicBool::new(false));
    let lease = Lease {
        lost: lost.clone(),
        asked: AtomicUsize::new(0),
    };
    let (out, ()) = tokio::join!(
        agent.run_observed(
            &mut session,
            Some("go".into()),
            run,
            ws,
            h.cancel.clone(),
            &lease
        ),
        async {
            first.notified().await;
            lost.store(true, Ordering::SeqCst);
        }
    );
    assert_eq!(out.state, EndState::Cancelled);
    assert_eq!(mock.request_count(), 1, "the retry was sent");
    // Asked before the request and before its retry.
    assert_eq!(lease.asked.load(Ordering::SeqCst), 2);
}

/// An agent on `model` whose conversation is compacted above 800 tokens.
fn compacting(model: ResolvedModel) -> AgentBuilder {
    builder(model).compaction(CompactionPolicy {
        windows: Arc::new(ContextWindows::new().with("mockai:gpt-mock", 1_000)),
        ..CompactionPolicy::default()
    })
}

/// Six earlier exchanges of about 1 000 bytes each: the first request of a run on this
/// session is over the compaction limit, so a compaction is due before it.
fn long_session(h: &Harness) -> Session {
    let mut session = h.session();
    for i in 0..6 {
        let question = format!("question {i} {}", "words ".repeat(150));
        session.push(Message::user(question)).unwrap();
        session
            .push(Message::assistant(format!("answer {i}")))
            .unwrap();
    }
    session
}

fn is_summary_request(r: &RecordedRequest) -> bool {
    String::from_utf8_lossy(&r.raw).contains("Summarise this conversation")
}

#[tokio::test]
async fn a_compaction_asks_for_no_summary_once_the_observer_stops_the_run() {
    let (mock, _first, model) = busy_once().await;
    let agent = compacting(model).build();
    let h = Harness::new();
    let mut session = long_session(&h);
    let run = h.run_context(&session);
    let ws = Arc::new(Workspace::new(h.dir.path()).unwrap());
    // The lease was lost before the run got to its first step.
    let lease = Lease {
        lost: Arc::new(AtomicBool::new(true)),
        asked: AtomicUsize::new(0),
    };
    let out = agent
        .run_observed(
            &mut session,
            Some("go".into()),
            run,
            ws,
            h.cancel.clone(),
            &lease,
        )
        .await;
    assert_eq!(out.state, EndState::Cancelled);
    assert_eq!(mock.request_count(), 0, "the summary was asked for");
    assert_eq!(lease.asked.load(Ordering::SeqCst), 1);
    // Nothing was compacted: the six exchanges and the prompt.
    assert_eq!(session.messages().len(), 13);
}

#[tokio::test]
async fn a_summary_is_not_retried_once_the_observer_stops_the_run_during_the_backoff() {
    let (mock, first, model) = busy_once().await;
    let agent = compacting(model).build();
    let h = Harness::new();
    let mut session = long_session(&h);
    let run = h.run_context(&session);
    let ws = Arc::new(Workspace::new(h.dir.path()).unwrap());
    let lost = Arc::new(AtomicBool::new(false));
    let lease = Lease {
        lost: lost.clone(),
        asked: AtomicUsize::new(0),
    };
    let (out, ()) = tokio::join!(
        agent.run_observed(
            &mut session,
            Some("go".into()),
            run,
            ws,
            h.cancel.clone(),
            &lease
        ),
        async {
            // The summary request failed and its backoff runs: the lease is lost.
            first.notified().await;
            lost.store(true, Ordering::SeqCst);
        }
    );
    assert_eq!(out.state, EndState::Cancelled);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "the summary's retry was sent");
    assert!(is_summary_request(&requests[0]));
    // Asked before the summary request and before its retry.
    assert_eq!(lease.asked.load(Ordering::SeqCst), 2);
    assert_eq!(session.messages().len(), 13);
}

/// Charges a sibling's reply to the shared budget when a compaction is about to ask for
/// its summary: the last moment before the call at which the run can see it.
struct SiblingSpends {
    sibling: Budget,
}

#[async_trait]
impl cadre_engine::ToolHook for SiblingSpends {
    async fn pre_compact(
        &self,
        _manual: bool,
        _instructions: Option<&str>,
        _run: &RunContext,
    ) -> Option<String> {
        self.sibling.charge(Spend::tokens(Usage {
            input_tokens: 1000,
            ..Usage::default()
        }));
        None
    }
}

#[tokio::test]
async fn a_compaction_asks_for_no_summary_once_a_sibling_exhausted_the_budget() {
    let (mock, _first, model) = busy_once().await;
    // Recorded when the call starts: a call started and dropped at once (the budget's
    // stop arriving a moment later) may never reach the mock, and is a started call.
    let (model, started) = recorded(model);
    let parent = Budget::unlimited().child(BudgetLimits {
        max_tokens: Some(1000),
        ..BudgetLimits::default()
    });
    let sibling = parent.child(BudgetLimits::default());
    let agent = compacting(model)
        .hook(Arc::new(SiblingSpends { sibling }))
        .build();
    let h = Harness::new();
    let mut session = long_session(&h);
    let run = Arc::new(RunContext {
        budget: parent.child(BudgetLimits::default()),
        ..(*h.run_context(&session)).clone()
    });
    let ws = Arc::new(Workspace::new(h.dir.path()).unwrap());
    let out = agent
        .run(&mut session, Some("go".into()), run, ws, h.cancel.clone())
        .await;
    assert_eq!(
        out.state,
        EndState::LimitReached {
            limit: LimitKind::Tokens
        }
    );
    assert_eq!(
        started.requests.lock().unwrap().len(),
        0,
        "the summary call was started"
    );
    assert_eq!(mock.request_count(), 0);
    assert_eq!(session.messages().len(), 13);
}
