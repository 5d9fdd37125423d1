//! Exactly-once delivery, live-child labels, and keeping secrets out of the database.

use crate::both_backends;
use crate::common::{Fixture, Kind};
use cadre_store::{LiveChildEntry, NewTask, REDACTED, StoreError, Transition, Transport};
use cadre_types::TaskStatus;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

async fn finished_delivered_exactly_once(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    let mut finished = HashSet::new();
    let mut still_running = Vec::new();
    for i in 0..50 {
        let mut t = NewTask::new("w", "s", "p");
        t.background = i % 10 != 9;
        let id = a.create(&t).await.unwrap().id;
        a.transition(&id, Transition::running()).await.unwrap();
        match i % 10 {
            0..=5 => a
                .transition(&id, Transition::completed("ok"))
                .await
                .unwrap(),
            6 => a.transition(&id, Transition::failed("x")).await.unwrap(),
            7 => a.transition(&id, Transition::cancelled()).await.unwrap(),
            8 => {
                still_running.push(id);
                continue;
            }
            _ => {
                a.transition(&id, Transition::completed("fg"))
                    .await
                    .unwrap();
                continue; // foreground: never delivered
            }
        }
        finished.insert(id);
    }
    // Four concurrent readers on two handles, each claiming what it read: a claim is won once.
    let mut takers = Vec::new();
    for store in [a.clone(), b.clone(), a.clone(), b.clone()] {
        takers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..20 {
                for r in store.undelivered_finished("s").await.unwrap() {
                    assert!(!r.delivered && r.background && r.status.is_terminal());
                    if store.mark_delivered(&r.id).await.unwrap() {
                        got.push(r.id);
                    }
                }
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in takers {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), unique.len(), "a completion was delivered twice");
    assert_eq!(unique, finished);
    // Survives a restart.
    drop((a, b));
    let a = fx.open("node-a").await;
    assert!(a.undelivered_finished("s").await.unwrap().is_empty());
    for id in &still_running {
        a.transition(id, Transition::completed("late"))
            .await
            .unwrap();
    }
    let late: HashSet<_> = a
        .undelivered_finished("s")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(late, still_running.iter().cloned().collect());
    // mark_delivered claims once; promote makes a foreground task deliverable.
    let fg = a.create(&NewTask::new("w", "s2", "p")).await.unwrap().id;
    assert!(a.promote(&fg).await.unwrap());
    assert!(!a.promote(&fg).await.unwrap());
    a.transition(&fg, Transition::completed("x")).await.unwrap();
    assert!(a.mark_delivered(&fg).await.unwrap());
    assert!(!a.mark_delivered(&fg).await.unwrap());
    assert!(a.undelivered_finished("s2").await.unwrap().is_empty());
    assert!(matches!(
        a.mark_delivered("task_nope").await,
        Err(StoreError::NotFound(_))
    ));
}

pub(crate) fn child(key: &str, session: &str, label: Option<&str>, at: u64) -> LiveChildEntry {
    LiveChildEntry {
        agent_key: key.to_string(),
        label: label.map(str::to_string),
        agent_id: "explorer".into(),
        parent_session_id: session.to_string(),
        child_session_id: format!("sub-{key}"),
        depth: 1,
        created_at: at,
    }
}

/// `create_live` adds a live child and creates its first task, both or neither: a taken
/// label creates no task, a task that cannot be created leaves no child, and a refused one
/// among many created at once (one batch on SQLite) does not fail the others.
async fn a_live_child_and_its_first_task_are_created_together(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let s = fx.open("node-a").await;
    let first = NewTask::new("explorer", "s1", "go");
    let made = s
        .create_live(&child("agent:explorer:1", "s1", Some("a"), 1), &first)
        .await
        .unwrap();
    assert_eq!(made.id, first.id);
    assert_eq!(s.get(&first.id).await.unwrap().unwrap().prompt, "go");
    assert_eq!(s.live_children("s1").await.unwrap().len(), 1);

    let clash = NewTask::new("explorer", "s1", "again");
    let r = s
        .create_live(&child("agent:explorer:2", "s1", Some("A"), 2), &clash)
        .await;
    assert!(matches!(r, Err(StoreError::LabelInUse(_))), "{r:?}");
    assert!(
        s.get(&clash.id).await.unwrap().is_none(),
        "its task was created"
    );

    let r = s
        .create_live(&child("agent:explorer:3", "s1", None, 3), &first)
        .await;
    assert!(matches!(r, Err(StoreError::DuplicateTask(_))), "{r:?}");
    assert!(
        s.find_live_by_key("s1", "agent:explorer:3")
            .await
            .unwrap()
            .is_none(),
        "the child of a task that could not be created was kept"
    );

    let tasks: Vec<NewTask> = (0..8)
        .map(|i| NewTask::new("explorer", "s2", &format!("job {i}")))
        .collect();
    let made = futures::future::join_all(tasks.iter().enumerate().map(|(i, t)| {
        let s = s.clone();
        // The fourth takes a label the second has.
        let label = match i {
            1 | 3 => Some("same"),
            _ => None,
        };
        let c = child(&format!("agent:explorer:b{i}"), "s2", label, 10 + i as u64);
        async move { s.create_live(&c, t).await }
    }))
    .await;
    assert_eq!(made.iter().filter(|r| r.is_ok()).count(), 7, "{made:?}");
    assert_eq!(s.live_children("s2").await.unwrap().len(), 7);
    assert_eq!(s.list_by_session("s2").await.unwrap().len(), 7);
}

async fn live_child_labels(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let s = fx.open("node-a").await;
    let alpha = child("agent:explorer:1", "s1", Some("Alpha"), 1);
    s.insert_live_child(&alpha).await.unwrap();
    let clash = s
        .insert_live_child(&child("agent:explorer:2", "s1", Some("alpha"), 2))
        .await;
    assert!(matches!(clash, Err(StoreError::LabelInUse(l)) if l == "alpha"));
    // Another session may use it; unlabeled children never clash.
    s.insert_live_child(&child("agent:explorer:3", "s2", Some("ALPHA"), 3))
        .await
        .unwrap();
    s.insert_live_child(&child("agent:explorer:4", "s1", None, 4))
        .await
        .unwrap();
    s.insert_live_child(&child("agent:explorer:5", "s1", None, 5))
        .await
        .unwrap();
    let dup = s
        .insert_live_child(&child("agent:explorer:4", "s1", None, 6))
        .await;
    assert!(matches!(dup, Err(StoreError::DuplicateLiveChild(_))));
    assert_eq!(
        s.find_live_by_label("s1", "ALPHA").await.unwrap(),
        Some(alpha.clone())
    );
    assert_eq!(
        s.find_live_by_key("s1", "agent:explorer:1").await.unwrap(),
        Some(alpha)
    );
    assert!(
        s.find_live_by_key("s2", "agent:explorer:1")
            .await
            .unwrap()
            .is_none()
    );
    let keys: Vec<_> = s
        .live_children("s1")
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.agent_key)
        .collect();
    assert_eq!(
        keys,
        ["agent:explorer:1", "agent:explorer:4", "agent:explorer:5"]
    );
    assert!(s.remove_live_child("s1", "agent:explorer:1").await.unwrap());
    assert!(!s.remove_live_child("s1", "agent:explorer:1").await.unwrap());
    s.insert_live_child(&child("agent:explorer:6", "s1", Some("alpha"), 7))
        .await
        .unwrap();
}

/// All bytes of the files under `dir` (recursively).
fn all_bytes(dir: &Path, out: &mut Vec<u8>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_bytes(&p, out);
        } else if let Ok(b) = std::fs::read(&p) {
            out.extend(b);
        }
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

async fn secrets_never_stored(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let s = fx.open("node-a").await;
    let mut t = NewTask::new("remote-agent", "s", "p");
    t.transport = Transport::Remote {
        url: "https://bob:url-password-x@agents.example/a".into(),
    };
    t.remote_headers = BTreeMap::from([
        ("Authorization".to_string(), "Bearer ${TOKEN}".to_string()),
        ("X-Key".to_string(), "literal-secret".to_string()),
    ]);
    let rec = s.create(&t).await.unwrap();
    let stored = s.get(&rec.id).await.unwrap().unwrap();
    assert_eq!(stored.remote_headers["Authorization"], "Bearer ${TOKEN}");
    assert_eq!(stored.remote_headers["X-Key"], REDACTED);
    assert_eq!(
        stored.transport,
        Transport::Remote {
            url: "https://<redacted>@agents.example/a".into()
        }
    );
    let mut bytes = Vec::new();
    match kind {
        // What the memory holds is the records themselves.
        Kind::Memory => {
            let all = s.list(&Default::default()).await.unwrap();
            bytes.extend(format!("{all:?}").into_bytes());
        }
        Kind::Sqlite => {
            let db = fx.path.clone().unwrap();
            for suffix in ["", "-wal", "-shm"] {
                let p = format!("{}{suffix}", db.display());
                if let Ok(b) = std::fs::read(&p) {
                    bytes.extend(b);
                }
            }
        }
        Kind::Postgres => {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(&fx.url).await.unwrap();
            // CHECKPOINT returns once every dirty page is in the data files.
            sqlx::raw_sql("CHECKPOINT").execute(&mut c).await.unwrap();
            let cluster = cadre_store::testing::shared_cluster().unwrap();
            all_bytes(&cluster.data_dir(), &mut bytes);
        }
    }
    assert!(
        contains(&bytes, "Bearer ${TOKEN}"),
        "the reference is stored"
    );
    assert!(
        !contains(&bytes, "literal-secret"),
        "a literal secret reached the files"
    );
    assert!(
        !contains(&bytes, "url-password-x"),
        "a URL password reached the files"
    );
}

async fn batch_delivery_marks_each_once(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let mut ids = Vec::new();
    // More than one statement's worth (500 ids per statement).
    for _ in 0..620 {
        let mut t = NewTask::new("w", "s", "p");
        t.background = true;
        let id = a.create(&t).await.unwrap().id;
        a.transition(&id, Transition::running()).await.unwrap();
        a.transition(&id, Transition::completed("ok"))
            .await
            .unwrap();
        ids.push(id);
    }
    assert!(a.mark_delivered(&ids[0]).await.unwrap());
    let mut batch = ids.clone();
    batch.push("task_unknown".to_string());
    assert_eq!(a.mark_delivered_many(&batch).await.unwrap(), 619);
    assert_eq!(a.mark_delivered_many(&batch).await.unwrap(), 0);
    assert!(a.undelivered_finished("s").await.unwrap().is_empty());
    assert!(a.get(&ids[619]).await.unwrap().unwrap().delivered);
}

async fn background_summary_counts_and_lists_newest_open(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let mut t = NewTask::new("w", "s", &i.to_string());
        t.background = i != 5;
        ids.push(a.create(&t).await.unwrap().id);
        crate::common::clock_ticks().await;
    }
    a.create(&NewTask::new("w", "other", "x")).await.unwrap();
    a.transition(&ids[1], Transition::running()).await.unwrap();
    a.transition(&ids[0], Transition::completed("ok"))
        .await
        .unwrap();
    a.transition(&ids[2], Transition::failed("x"))
        .await
        .unwrap();
    assert!(a.mark_delivered(&ids[2]).await.unwrap());
    let s = a.background_summary("s", 1).await.unwrap();
    assert_eq!((s.open_total, s.finished_total, s.undelivered), (3, 2, 1));
    let open: Vec<&str> = s.open.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(open, [ids[4].as_str()], "the newest open background task");
    let all = a.background_summary("s", 10).await.unwrap();
    let open: Vec<&str> = all.open.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(open, [ids[4].as_str(), ids[3].as_str(), ids[1].as_str()]);
    let none = a.background_summary("nobody", 10).await.unwrap();
    assert_eq!(none, Default::default());
}

/// `take_finished_task` hands out one ended task's result once, only to its own session, and
/// leaves a running or already delivered task alone.
async fn one_finished_task_taken_once(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    let mut t = NewTask::new("w", "s", "p");
    t.background = true;
    let id = a.create(&t).await.unwrap().id;
    a.transition(&id, Transition::running()).await.unwrap();
    assert!(
        a.take_finished_task(&id, "s").await.unwrap().is_none(),
        "running"
    );
    a.transition(&id, Transition::failed("boom")).await.unwrap();
    assert!(
        a.take_finished_task(&id, "other").await.unwrap().is_none(),
        "another session's caller"
    );
    assert!(!a.get(&id).await.unwrap().unwrap().delivered);
    // Two handles race for it: one gets the stored record, marked delivered.
    let (x, y) = tokio::join!(
        a.take_finished_task(&id, "s"),
        b.take_finished_task(&id, "s")
    );
    let taken: Vec<_> = [x.unwrap(), y.unwrap()].into_iter().flatten().collect();
    assert_eq!(taken.len(), 1, "taken twice or never");
    let r = &taken[0];
    assert_eq!((r.id.as_str(), r.status), (id.as_str(), TaskStatus::Failed));
    assert_eq!(r.error.as_deref(), Some("boom"));
    assert!(r.delivered && r.background);
    assert!(a.get(&id).await.unwrap().unwrap().delivered);
    assert!(
        a.take_finished_task(&id, "s").await.unwrap().is_none(),
        "delivered"
    );
    assert!(a.undelivered_finished("s").await.unwrap().is_empty());
    assert!(
        a.take_finished_task("task_missing", "s")
            .await
            .unwrap()
            .is_none()
    );
}

/// `deliver_finished` returns an ended task of the caller's session as stored, marked
/// delivered, however often it is asked; a running task, another session's or an unknown
/// one is `None` and left alone.
async fn a_finished_task_is_delivered_whenever_asked(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let mut t = NewTask::new("w", "s", "p");
    t.background = true;
    let id = a.create(&t).await.unwrap().id;
    a.transition(&id, Transition::running()).await.unwrap();
    assert!(
        a.deliver_finished(&id, "s").await.unwrap().is_none(),
        "running"
    );
    a.transition(&id, Transition::completed("r")).await.unwrap();
    assert!(
        a.deliver_finished(&id, "other").await.unwrap().is_none(),
        "another session's caller"
    );
    assert!(!a.get(&id).await.unwrap().unwrap().delivered);
    for _ in 0..2 {
        let r = a.deliver_finished(&id, "s").await.unwrap().unwrap();
        assert_eq!(
            (r.status, r.result.as_deref()),
            (TaskStatus::Completed, Some("r"))
        );
        assert!(r.delivered);
    }
    assert!(a.get(&id).await.unwrap().unwrap().delivered);
    assert!(a.undelivered_finished("s").await.unwrap().is_empty());
    assert!(
        a.deliver_finished("task_missing", "s")
            .await
            .unwrap()
            .is_none()
    );
}

both_backends!(
    a_live_child_and_its_first_task_are_created_together,
    background_summary_counts_and_lists_newest_open,
    one_finished_task_taken_once,
    a_finished_task_is_delivered_whenever_asked,
    batch_delivery_marks_each_once,
    finished_delivered_exactly_once,
    live_child_labels,
    secrets_never_stored
);
