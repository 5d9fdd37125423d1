//! Two store handles with different node ids on one database, 2 × 1000 tasks driven
//! concurrently while each handle writes conflicting terminal states on the other's tasks.

use crate::both_backends;
use crate::common::{Fixture, Kind, attack, create_batch, drive, verify_wins};
use cadre_store::{TaskFilter, TaskStore};
use std::sync::Arc;

const PER_NODE: usize = 1000;

async fn two_handles_race(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a: Arc<dyn TaskStore> = fx.open("node-a").await;
    let b: Arc<dyn TaskStore> = fx.open("node-b").await;
    let (ids_a, ids_b) = tokio::join!(
        create_batch(a.as_ref(), "s-a", PER_NODE),
        create_batch(b.as_ref(), "s-b", PER_NODE)
    );
    let started = std::time::Instant::now();
    let (ia, ib) = (Arc::new(ids_a), Arc::new(ids_b));
    let jobs = [
        tokio::spawn({
            let (s, ids) = (a.clone(), ia.clone());
            async move { drive(s.as_ref(), &ids).await }
        }),
        tokio::spawn({
            let (s, ids) = (b.clone(), ib.clone());
            async move { drive(s.as_ref(), &ids).await }
        }),
        tokio::spawn({
            let (s, ids) = (b.clone(), ia.clone());
            async move { attack(s.as_ref(), &ids).await }
        }),
        tokio::spawn({
            let (s, ids) = (a.clone(), ib.clone());
            async move { attack(s.as_ref(), &ids).await }
        }),
    ];
    let mut wins = Vec::new();
    let mut per_job = Vec::new();
    for j in jobs {
        let w = j.await.unwrap();
        per_job.push(w.len());
        wins.extend(w);
    }
    eprintln!(
        "{kind:?}: wins drive-a {} drive-b {} attack-on-a {} attack-on-b {} in {:?}",
        per_job[0],
        per_job[1],
        per_job[2],
        per_job[3],
        started.elapsed()
    );
    let all: Vec<String> = ia.iter().chain(ib.iter()).cloned().collect();
    verify_wins(a.as_ref(), &all, &wins).await;
    let listed = a.list(&TaskFilter::default()).await.unwrap();
    assert_eq!(listed.len(), 2 * PER_NODE, "tasks lost");
    assert!(listed.iter().all(|r| r.status.is_terminal()));
    assert!(
        listed
            .iter()
            .filter(|r| r.parent_session_id == "s-a")
            .all(|r| r.owner_node == "node-a")
    );
}

both_backends!(two_handles_race);
