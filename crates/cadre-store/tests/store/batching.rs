//! Group commit: writes queued while the writer is busy run as one transaction, and a write
//! that fails there fails alone.

use crate::common::{Fixture, Kind};
use crate::sql_backends;
use cadre_store::{NewTask, SqlStore, StoreError, TaskStatus, TaskStore, Transition};
use sqlx::Connection;
use std::sync::Arc;
use std::time::Duration;

/// Another connection holding the database's write lock: the store's writer waits for it.
enum Blocker {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl Blocker {
    async fn hold(fx: &Fixture, kind: Kind) -> Blocker {
        match kind {
            Kind::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&fx.url).await.unwrap();
                sqlx::query("BEGIN IMMEDIATE")
                    .execute(&mut c)
                    .await
                    .unwrap();
                Blocker::Sqlite(c)
            }
            Kind::Postgres => {
                let mut c = sqlx::PgConnection::connect(&fx.url).await.unwrap();
                sqlx::query("BEGIN").execute(&mut c).await.unwrap();
                sqlx::query("LOCK TABLE tasks IN EXCLUSIVE MODE")
                    .execute(&mut c)
                    .await
                    .unwrap();
                Blocker::Postgres(c)
            }
            Kind::Memory => unreachable!("SQL backends only"),
        }
    }

    async fn release(self) {
        match self {
            Blocker::Sqlite(mut c) => {
                sqlx::query("COMMIT").execute(&mut c).await.unwrap();
            }
            Blocker::Postgres(mut c) => {
                sqlx::query("COMMIT").execute(&mut c).await.unwrap();
            }
        }
    }
}

/// Wait (with a deadline) until the store's writer stats satisfy `ok`.
async fn until(store: &SqlStore, what: &str, ok: impl Fn(cadre_store::WriteStats) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
    while !ok(store.write_stats()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {:?}",
            store.write_stats()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

const QUEUED: usize = 20;

async fn a_failed_write_fails_alone_in_its_batch(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = Arc::new(fx.open_sql("n").await);
    let taken = store
        .create(NewTask::new("w", "s", "taken"))
        .await
        .unwrap()
        .id;
    let to_run = store
        .create(NewTask::new("w", "s", "run"))
        .await
        .unwrap()
        .id;
    let before = store.write_stats();
    let blocker = Blocker::hold(&fx, kind).await;
    // The first write waits for the lock, alone; the rest queue behind it.
    let first = {
        let store = store.clone();
        tokio::spawn(async move { store.create(NewTask::new("w", "s", "first")).await })
    };
    until(&store, "the first write started", |s| {
        s.writes == before.writes + 1
    })
    .await;
    let mut creates = Vec::new();
    for i in 0..QUEUED {
        let store = store.clone();
        creates.push(tokio::spawn(async move {
            store
                .create(NewTask::new("w", "s", &format!("queued {i}")))
                .await
        }));
    }
    let duplicate = {
        let (store, mut t) = (store.clone(), NewTask::new("w", "s", "again"));
        t.id = taken.clone();
        tokio::spawn(async move { store.create(t).await })
    };
    let running = {
        let (store, id) = (store.clone(), to_run.clone());
        tokio::spawn(async move { store.transition(&id, Transition::running()).await })
    };
    until(&store, "the writes queued", |s| {
        s.queued == QUEUED as u64 + 2
    })
    .await;
    blocker.release().await;

    first.await.unwrap().unwrap();
    let mut ids = Vec::new();
    for c in creates {
        ids.push(c.await.unwrap().expect("a queued create").id);
    }
    match duplicate.await.unwrap() {
        Err(StoreError::DuplicateTask(id)) => assert_eq!(id, taken),
        other => panic!("the duplicate create: {other:?}"),
    }
    running.await.unwrap().unwrap();
    // They were one batch, rolled back for the duplicate and run again one by one.
    assert!(
        store.write_stats().largest_batch >= QUEUED as u64 + 2,
        "{:?}",
        store.write_stats()
    );
    for id in &ids {
        assert!(store.get(id).await.unwrap().is_some(), "{id} lost");
    }
    assert_eq!(store.list_by_session("s").await.unwrap().len(), QUEUED + 3);
    let run = store.get(&to_run).await.unwrap().unwrap();
    assert_eq!(run.status, TaskStatus::Running);
    assert_eq!(
        store.get(&taken).await.unwrap().unwrap().prompt,
        "taken",
        "the duplicate wrote nothing"
    );
}

sql_backends!(a_failed_write_fails_alone_in_its_batch);
