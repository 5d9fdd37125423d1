//! Heartbeats, the sweeper and restart recovery.

use crate::both_backends;
use crate::common::{Fixture, Kind};
use cadre_store::{
    BeatSource, Heartbeater, NewTask, Sweeper, TaskStatus, TaskStore, Transition, Transport,
    executor_died_message,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn running(store: &dyn TaskStore, transport: Transport) -> String {
    let mut t = NewTask::new("w", "s", "p");
    t.transport = transport;
    let id = store.create(&t).await.unwrap().id;
    store.transition(&id, Transition::running()).await.unwrap();
    id
}

async fn sweep_fails_silent_tasks_only(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store: Arc<dyn TaskStore> = fx.open("node-a").await;
    let made = Instant::now();
    let silent = running(store.as_ref(), Transport::Local).await;
    let beating = running(store.as_ref(), Transport::Local).await;
    let pending = store.create(&NewTask::new("w", "s", "p")).await.unwrap().id;
    let remote = Transport::Remote {
        url: "https://agents.example/a".into(),
    };
    let remote = running(store.as_ref(), remote).await;
    let done = running(store.as_ref(), Transport::Local).await;
    store
        .transition(&done, Transition::completed("ok"))
        .await
        .unwrap();
    let ids = vec![beating.clone()];
    let provider: cadre_store::RunningIds = Arc::new(move || ids.clone());
    let _hb = Heartbeater::spawn(
        store.clone(),
        Duration::from_millis(300),
        BeatSource::Ids(provider),
    );
    assert!(
        store
            .sweep(Duration::from_secs(2))
            .await
            .unwrap()
            .is_empty()
    );
    // Sweep until both silent tasks have gone past the 2 s timeout; no sweep may take a
    // task that beats, a remote one or a finished one.
    let mut expected = vec![silent.clone(), pending.clone()];
    expected.sort();
    let swept = tokio::sync::Mutex::new(Vec::new());
    cadre_testkit::eventually(
        "the silent tasks to be swept",
        Duration::from_secs(6),
        || async {
            let mut swept = swept.lock().await;
            swept.extend(store.sweep(Duration::from_secs(2)).await.unwrap());
            swept.sort();
            assert!(swept.iter().all(|id| expected.contains(id)), "{swept:?}");
            assert!(
                swept.is_empty() || made.elapsed() >= Duration::from_secs(2),
                "swept before the 2 s timeout: {swept:?}"
            );
            *swept == expected
        },
    )
    .await;
    let rec = store.get(&silent).await.unwrap().unwrap();
    assert_eq!(rec.status, TaskStatus::Failed);
    assert_eq!(rec.end_state.as_deref(), Some("failed"));
    let err = rec.error.unwrap();
    assert!(
        err.starts_with("executor lost: no heartbeat since 20") && err.ends_with('Z'),
        "{err}"
    );
    let beat = store.get(&beating).await.unwrap().unwrap();
    assert_eq!(beat.status, TaskStatus::Running);
    assert!(beat.heartbeat_at.is_some());
    assert_eq!(
        store.get(&remote).await.unwrap().unwrap().status,
        TaskStatus::Running,
        "remote tasks are not swept"
    );
    assert_eq!(
        store.get(&done).await.unwrap().unwrap().status,
        TaskStatus::Completed
    );
    // Sweeping again finds nothing.
    assert!(
        store
            .sweep(Duration::from_secs(2))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn background_sweeper_and_owned_beats(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a: Arc<dyn TaskStore> = fx.open("node-a").await;
    let b: Arc<dyn TaskStore> = fx.open("node-b").await;
    let mine = running(a.as_ref(), Transport::Local).await;
    let orphan = running(b.as_ref(), Transport::Local).await;
    // A beats everything it owns; nobody beats B's task; A's sweeper fails B's.
    let _hb = Heartbeater::spawn(a.clone(), Duration::from_millis(200), BeatSource::Owned);
    let _sw = Sweeper::spawn(
        a.clone(),
        Duration::from_millis(300),
        Duration::from_secs(1),
    );
    let rec = cadre_testkit::eventually_some(
        "the sweeper to fail B's task",
        Duration::from_secs(5),
        || async {
            let rec = a.get(&orphan).await.unwrap().unwrap();
            (rec.status == TaskStatus::Failed).then_some(rec)
        },
    )
    .await;
    assert!(rec.error.unwrap().starts_with("executor lost"));
    assert_eq!(
        a.get(&mine).await.unwrap().unwrap().status,
        TaskStatus::Running
    );
    assert_eq!(
        a.heartbeat(b.node_id(), std::slice::from_ref(&mine))
            .await
            .unwrap(),
        0
    );
    assert_eq!(a.heartbeat(a.node_id(), &[mine]).await.unwrap(), 1);
}

async fn recover_fails_node_tasks(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    let r1 = running(a.as_ref(), Transport::Local).await;
    let r2 = running(a.as_ref(), Transport::Local).await;
    let p = a.create(&NewTask::new("w", "s", "p")).await.unwrap().id;
    let done = running(a.as_ref(), Transport::Local).await;
    a.transition(&done, Transition::completed("ok"))
        .await
        .unwrap();
    let other = running(b.as_ref(), Transport::Local).await;
    // "Restart": a new handle of node A recovers at once, not after an orphan timeout: its
    // tasks were beaten just now, so a sweep with an hour's timeout leaves them running, and
    // recovery fails them anyway.
    drop(a);
    let a2 = fx.open("node-a").await;
    assert_eq!(
        a2.heartbeat(a2.node_id(), std::slice::from_ref(&r1))
            .await
            .unwrap(),
        1
    );
    assert!(
        a2.sweep(Duration::from_secs(3600))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        a2.get(&r1).await.unwrap().unwrap().status,
        TaskStatus::Running
    );
    let mut failed = a2.recover_node(a2.node_id()).await.unwrap();
    failed.sort();
    let mut expected = vec![r1.clone(), r2, p];
    expected.sort();
    assert_eq!(failed, expected);
    let rec = a2.get(&r1).await.unwrap().unwrap();
    assert_eq!(rec.status, TaskStatus::Failed);
    assert_eq!(
        rec.error.as_deref(),
        Some(executor_died_message(a2.node_id()).as_str())
    );
    assert_eq!(
        rec.error.as_deref(),
        Some("executor died: cadre restarted on node-a")
    );
    assert_eq!(
        a2.get(&other).await.unwrap().unwrap().status,
        TaskStatus::Running
    );
    assert_eq!(
        a2.get(&done).await.unwrap().unwrap().status,
        TaskStatus::Completed
    );
    assert!(a2.recover_node(a2.node_id()).await.unwrap().is_empty());
}

both_backends!(
    sweep_fails_silent_tasks_only,
    background_sweeper_and_owned_beats,
    recover_fails_node_tasks
);
