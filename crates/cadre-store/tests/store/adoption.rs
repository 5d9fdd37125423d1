//! Adoption of orphans: a compare-and-swap on owner and fencing epoch. Of nodes racing for
//! the same orphan exactly one wins; the stale owner's later writes (its end, its
//! checkpoint) are refused, while the adopter's go through; the sweeper fails only orphans
//! whose policy is `fail`.

use crate::both_backends;
use crate::common::{Fixture, Kind};
use cadre_store::{NewTask, OrphanPolicy, StoreError, TaskStatus, TaskStore, Transition};
use cadre_types::{Message, Usage};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A running task of `store`'s node with the given policy.
async fn running(store: &dyn TaskStore, policy: OrphanPolicy) -> String {
    let mut t = NewTask::new("w", "s", "p");
    t.on_orphan = policy;
    let id = store.create(&t).await.unwrap().id;
    store
        .transition(&id, Transition::running().fenced(0))
        .await
        .unwrap();
    id
}

/// Wait (up to 5 s) until every id is an orphan with no grace at all: the clock has moved
/// past its last heartbeat.
async fn wait_orphaned(store: &dyn TaskStore, ids: &[String]) {
    cadre_testkit::eventually(
        "every task to be an orphan",
        Duration::from_secs(5),
        || async {
            let orphans = store.resumable_orphans(Duration::ZERO).await.unwrap();
            ids.iter().all(|id| orphans.iter().any(|o| &o.id == id))
        },
    )
    .await;
}

async fn racing_adopters_one_wins(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    let c = fx.open("node-c").await;
    let mut ids = Vec::new();
    for _ in 0..24 {
        ids.push(running(a.as_ref(), OrphanPolicy::Resume).await);
    }
    // Beaten just now: not an orphan under a minute's timeout.
    a.heartbeat_owned().await.unwrap();
    assert_eq!(
        b.adopt(&ids[0], 0, Duration::from_secs(60)).await.unwrap(),
        None
    );
    // A `fail` task of the same age is swept; `resume` ones are left for adoption.
    let doomed = running(a.as_ref(), OrphanPolicy::Fail).await;
    wait_orphaned(a.as_ref(), &ids).await;
    // `doomed` may have been made in the clock tick of the first sweep (not yet older than a
    // zero timeout): sweep until it goes, and no sweep may take a `resume` task.
    cadre_testkit::eventually(
        "the fail task to be swept",
        Duration::from_secs(5),
        || async {
            let swept = b.sweep(Duration::ZERO).await.unwrap();
            assert!(ids.iter().all(|id| !swept.contains(id)), "{swept:?}");
            swept.contains(&doomed)
        },
    )
    .await;

    // B and C race over every orphan, in opposite orders.
    let race = |store: Arc<dyn TaskStore>, mut order: Vec<String>, reverse: bool| async move {
        if reverse {
            order.reverse();
        }
        let mut won = Vec::new();
        for id in order {
            if let Some(rec) = store.adopt(&id, 0, Duration::ZERO).await.unwrap() {
                won.push(rec);
            }
            tokio::task::yield_now().await;
        }
        won
    };
    let (wb, wc) = tokio::join!(
        tokio::spawn(race(b.clone(), ids.clone(), false)),
        tokio::spawn(race(c.clone(), ids.clone(), true)),
    );
    let (wb, wc) = (wb.unwrap(), wc.unwrap());
    let mut winner: HashMap<String, String> = HashMap::new();
    for rec in wb.iter().chain(&wc) {
        assert_eq!((rec.owner_epoch, rec.resumes), (1, 1), "{rec:?}");
        assert!(
            winner
                .insert(rec.id.clone(), rec.owner_node.clone())
                .is_none(),
            "{} adopted twice",
            rec.id
        );
    }
    assert_eq!(winner.len(), ids.len(), "every orphan adopted once");
    for id in &ids {
        let rec = a.get(id).await.unwrap().unwrap();
        assert_eq!(&rec.owner_node, &winner[id]);
        assert_eq!((rec.owner_epoch, rec.status), (1, TaskStatus::Running));
    }
    // An adoption at the epoch seen before is refused even once the task is orphaned again.
    wait_orphaned(a.as_ref(), &ids[..1]).await;
    assert_eq!(a.adopt(&ids[0], 0, Duration::ZERO).await.unwrap(), None);
}

async fn stale_owner_writes_are_refused(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    let id = running(a.as_ref(), OrphanPolicy::Resume).await;
    let turn = [Message::user("go"), Message::assistant("step one")];
    a.append_checkpoint(&id, 0, 0, 0, &turn, Usage::default())
        .await
        .unwrap();
    wait_orphaned(b.as_ref(), std::slice::from_ref(&id)).await;
    let created = a.owners(&id).await.unwrap();
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!((created[0].epoch, created[0].node.as_str()), (0, "node-a"));
    let adopted = b
        .adopt(&id, 0, Duration::ZERO)
        .await
        .unwrap()
        .expect("adopted");
    assert_eq!(
        (adopted.owner_node.as_str(), adopted.owner_epoch),
        ("node-b", 1)
    );
    // The history says who had it, epoch by epoch, from either node.
    let owners = a.owners(&id).await.unwrap();
    let who: Vec<(u64, &str)> = owners.iter().map(|o| (o.epoch, o.node.as_str())).collect();
    assert_eq!(who, [(0, "node-a"), (1, "node-b")]);
    assert_eq!(owners[0], created[0]);
    assert!(owners[1].since >= owners[0].since);
    assert_eq!(owners[1].instance, adopted.owner_instance);
    assert_eq!(b.owners(&id).await.unwrap(), owners);
    assert!(b.owners("task_nobody").await.unwrap().is_empty());

    // A comes back: its checkpoint and its end carry epoch 0 and change nothing.
    let late = [Message::assistant("a's late step")];
    let e = a
        .append_checkpoint(&id, 0, 0, 2, &late, Usage::default())
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::CheckpointRefused { .. }), "{e}");
    let e = a
        .transition(&id, Transition::completed("a's answer").fenced(0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Fenced {
                epoch: 0,
                current: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.is_refused());
    let rec = b.get(&id).await.unwrap().unwrap();
    assert_eq!((rec.status, rec.result), (TaskStatus::Running, None));
    assert_eq!(
        b.read_checkpoint(&id).await.unwrap().unwrap().messages,
        turn
    );

    // B's writes, at epoch 1, go through.
    let next = [Message::assistant("b's step two")];
    b.append_checkpoint(&id, 1, 0, 2, &next, Usage::default())
        .await
        .unwrap();
    assert_eq!(
        b.read_checkpoint(&id)
            .await
            .unwrap()
            .unwrap()
            .messages
            .len(),
        3
    );
    b.transition(&id, Transition::completed("b's answer").fenced(1))
        .await
        .unwrap();
    let rec = a.get(&id).await.unwrap().unwrap();
    assert_eq!(rec.result.as_deref(), Some("b's answer"));
    // Once it ended, a stale write is refused by the state rules as any late write is.
    let e = a
        .transition(&id, Transition::failed("late").fenced(0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Refused {
                from: TaskStatus::Completed,
                ..
            }
        ),
        "{e}"
    );
}

async fn a_renewal_holds_only_at_the_current_epoch(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    let id = running(a.as_ref(), OrphanPolicy::Resume).await;
    // The owner's renewal beats the task: it is no orphan right after.
    wait_orphaned(a.as_ref(), std::slice::from_ref(&id)).await;
    assert!(a.renew_owned(&id, 0).await.unwrap());
    let beaten = a.get(&id).await.unwrap().unwrap().heartbeat_at;
    assert!(beaten.is_some());
    // A wrong epoch (and an unknown task) is not renewed, and beats nothing.
    assert!(!a.renew_owned(&id, 1).await.unwrap());
    assert!(!a.renew_owned("no-such-task", 0).await.unwrap());
    assert_eq!(a.get(&id).await.unwrap().unwrap().heartbeat_at, beaten);

    // Once B adopted it, A's renewal at epoch 0 is refused; B's at 1 holds.
    wait_orphaned(a.as_ref(), std::slice::from_ref(&id)).await;
    assert!(b.adopt(&id, 0, Duration::ZERO).await.unwrap().is_some());
    assert!(!a.renew_owned(&id, 0).await.unwrap());
    assert!(b.renew_owned(&id, 1).await.unwrap());
    // An ended task is nobody's to renew.
    b.transition(&id, Transition::completed("done").fenced(1))
        .await
        .unwrap();
    assert!(!b.renew_owned(&id, 1).await.unwrap());
}

async fn a_released_task_is_adopted_at_once_and_fences_its_old_owner(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    let durable = running(a.as_ref(), OrphanPolicy::Resume).await;
    let failing = running(a.as_ref(), OrphanPolicy::Fail).await;
    let theirs = running(b.as_ref(), OrphanPolicy::Resume).await;
    let ended = running(a.as_ref(), OrphanPolicy::Resume).await;
    a.transition(&ended, Transition::completed("done").fenced(0))
        .await
        .unwrap();
    let turn = [Message::user("go"), Message::assistant("step one")];
    a.append_checkpoint(&durable, 0, 0, 0, &turn, Usage::default())
        .await
        .unwrap();
    a.heartbeat_owned().await.unwrap();
    let hour = Duration::from_secs(3600);
    assert!(b.resumable_orphans(hour).await.unwrap().is_empty());

    // Only A's own running durable task is handed over; B's, A's `fail` one and the ended
    // one stay as they are.
    assert_eq!(
        a.release_owned().await.unwrap(),
        std::slice::from_ref(&durable)
    );
    let rec = b.get(&durable).await.unwrap().unwrap();
    assert_eq!((rec.status, rec.owner_epoch), (TaskStatus::Running, 1));
    assert_eq!(rec.owner_instance, None);
    for id in [&failing, &theirs] {
        assert_eq!(b.get(id).await.unwrap().unwrap().owner_epoch, 0, "{id}");
    }
    // An orphan at once, under any timeout; and A's heartbeats no longer reach it.
    a.heartbeat_owned().await.unwrap();
    let orphans = b.resumable_orphans(hour).await.unwrap();
    let ids: Vec<&str> = orphans.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, [durable.as_str()]);
    // A's later writes (its cancelled end, a checkpoint) are refused.
    let e = a
        .transition(&durable, Transition::cancelled().fenced(0))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Fenced { .. }), "{e}");
    let late = [Message::assistant("a's late step")];
    assert!(
        a.append_checkpoint(&durable, 0, 0, 2, &late, Usage::default())
            .await
            .is_err()
    );
    // B adopts it without waiting, with its checkpoint; nothing is left to release twice.
    let adopted = b.adopt(&durable, 1, hour).await.unwrap().expect("adopted");
    assert_eq!(
        (adopted.owner_node.as_str(), adopted.owner_epoch),
        ("node-b", 2)
    );
    assert_eq!(
        b.read_checkpoint(&durable).await.unwrap().unwrap().messages,
        turn
    );
    assert!(a.release_owned().await.unwrap().is_empty());
}

both_backends!(
    racing_adopters_one_wins,
    stale_owner_writes_are_refused,
    a_renewal_holds_only_at_the_current_epoch,
    a_released_task_is_adopted_at_once_and_fences_its_old_owner
);
