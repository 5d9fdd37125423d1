//! Cross-node control: a cancel requested on one node reaches the owner within 1 s, and a
//! node waiting for another node's task sees it finish within 1 s.

use crate::both_backends;
use crate::common::{Fixture, Kind};
use cadre_store::{NewTask, StoreError, TaskStatus, Transition};
use std::time::{Duration, Instant};

async fn cancel_reaches_owner(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    // Requested before the watch starts: reported first.
    let early = a.create(&NewTask::new("w", "s", "p")).await.unwrap().id;
    b.request_cancel(&early).await.unwrap();
    let mut watch = a.watch_cancellations(a.node_id()).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(1), watch.recv()).await;
    assert_eq!(got.unwrap().as_deref(), Some(early.as_str()));

    let id = a.create(&NewTask::new("w", "s", "p")).await.unwrap().id;
    a.transition(&id, Transition::running()).await.unwrap();
    let theirs = b.create(&NewTask::new("w", "s", "p")).await.unwrap().id;
    b.request_cancel(&theirs).await.unwrap();
    let start = Instant::now();
    assert_eq!(b.request_cancel(&id).await.unwrap(), TaskStatus::Running);
    let got = tokio::time::timeout(Duration::from_secs(1), watch.recv())
        .await
        .expect("cancel did not reach the owner within 1 s");
    let elapsed = start.elapsed();
    eprintln!("{kind:?}: cancel reached the owner in {elapsed:?}");
    assert_eq!(got.as_deref(), Some(id.as_str()), "only the owner's tasks");
    // The owner stops the child; the task ends cancelled and is not reported again.
    a.transition(&id, Transition::cancelled()).await.unwrap();
    let more = tokio::time::timeout(Duration::from_millis(700), watch.recv()).await;
    assert!(more.is_err(), "unexpected {more:?}");
    // B's own watch sees its own task.
    let mut wb = b.watch_cancellations(b.node_id()).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(1), wb.recv()).await;
    assert_eq!(got.unwrap().as_deref(), Some(theirs.as_str()));
}

async fn wait_for_other_node(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    let id = a.create(&NewTask::new("w", "s", "p")).await.unwrap().id;
    a.transition(&id, Transition::running()).await.unwrap();
    assert_eq!(
        b.wait_terminal(&id, Duration::from_millis(200))
            .await
            .unwrap(),
        None,
        "times out while running"
    );
    assert!(matches!(
        b.wait_terminal("task_nope", Duration::from_millis(50))
            .await,
        Err(StoreError::NotFound(_))
    ));
    let waiter = tokio::spawn({
        let (b, id) = (b.clone(), id.clone());
        async move {
            let rec = b.wait_terminal(&id, Duration::from_secs(10)).await.unwrap();
            (rec, Instant::now())
        }
    });
    // The requirement is about a waiter that is already waiting when the task ends: it is
    // given 700 ms to be parked in its wait, and the 1 s it must notice within starts after.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let done_at = Instant::now();
    a.transition(&id, Transition::completed("the answer"))
        .await
        .unwrap();
    let (rec, seen_at) = waiter.await.unwrap();
    let lag = seen_at.duration_since(done_at);
    eprintln!("{kind:?}: wait_terminal returned {lag:?} after completion");
    assert!(lag < Duration::from_secs(1), "{lag:?}");
    let rec = rec.expect("terminal record");
    assert_eq!(rec.status, TaskStatus::Completed);
    assert_eq!(rec.result.as_deref(), Some("the answer"));
    // Already terminal: answered without waiting at all (no time to wait is given).
    assert!(
        b.wait_terminal(&id, Duration::ZERO)
            .await
            .unwrap()
            .is_some()
    );
}

both_backends!(cancel_reaches_owner, wait_for_other_node);
