//! A background task of this process that the store hands out between its durable end and
//! its local one is delivered once, not again by the tracker a turn later.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::TurnExtension;
use cadre_store::{TaskStore, Transition};
use cadre_subagents::{NewTask, SubagentContext, TaskStatus};
use common::*;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_completion_seen_first_in_the_store_is_not_delivered_again() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let store: Arc<dyn TaskStore> = Arc::new(
        cadre_store::open(&url, cadre_store::NodeId::new("n1"))
            .await
            .unwrap(),
    );
    let for_cfg = store.clone();
    let f = fixture(
        "",
        Options {
            tweak: Box::new(move |cfg| cfg.store = Some(for_cfg)),
            ..Default::default()
        },
    );
    let session = f.session();
    let run = f.run_context(&session);
    let ctx = SubagentContext::new(f.runtime.clone());

    // One background task, known to the tracker and the store.
    let mut stored = cadre_store::NewTask::new("worker", session.id(), "job");
    stored.background = true;
    let id = store.create(stored).await.unwrap().id;
    let tracker = f.runtime.tracker();
    tracker.insert(
        NewTask {
            id: id.clone(),
            agent: "worker".into(),
            parent_session_id: session.id().to_string(),
            child_session_id: "sub-x".into(),
            description: "job".into(),
            background: true,
        },
        CancellationToken::new(),
    );
    tracker
        .transition(&id, TaskStatus::Running, None, None, None)
        .unwrap();
    store.transition(&id, Transition::running()).await.unwrap();

    // The durable end is written; the local one has not happened yet.
    store
        .transition(&id, Transition::completed("the answer"))
        .await
        .unwrap();
    let deliveries = |messages: Vec<cadre_types::Message>| {
        messages
            .into_iter()
            .filter(|m| {
                matches!(m, cadre_types::Message::User { content }
                    if content.starts_with("<background-task-results>"))
            })
            .count()
    };
    let first = ctx.take_injections(&run, &[]).await;
    assert_eq!(deliveries(first), 1, "delivered from the store");
    tracker
        .transition(
            &id,
            TaskStatus::Completed,
            Some("the answer".into()),
            None,
            None,
        )
        .unwrap();
    assert_eq!(
        deliveries(ctx.take_injections(&run, &[]).await),
        0,
        "the tracker must not deliver it a second time"
    );
}
