//! A model request that failed retryably is sent again only if the run may still act when
//! the backoff is over: a budget a sibling exhausted meanwhile, or an observer that says
//! no (a durable child that lost its task), ends the call without the retry.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use cadre_engine::{Step, TurnBoundary, TurnObserver};
use cadre_llm::openai::OpenAiProvider;
use cadre_llm::{ProviderConfig, ResolvedModel};
use cadre_testkit::{MockReply, MockServer, OpenAiJson};
use cadre_tools::{Budget, BudgetLimits, RunContext, Spend, Workspace};
use cadre_types::{EndState, LimitKind, Usage};
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
