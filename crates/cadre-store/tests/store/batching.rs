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
    until_stats(|| store.write_stats(), what, ok).await;
}

/// Wait (with a deadline) until the stats `read` gives satisfy `ok`.
async fn until_stats<S: std::fmt::Debug>(read: impl Fn() -> S, what: &str, ok: impl Fn(S) -> bool) {
    cadre_testkit::eventually(what, Duration::from_secs(4), || {
        let done = ok(read());
        async move { done }
    })
    .await;
}

/// Hold the database's write lock from another connection and start `first`, a write that
/// then waits for the lock on the store's writer, alone: the writes queued from now on run
/// as one batch once the blocker is released.
async fn behind_a_lock<T: Send + 'static>(
    fx: &Fixture,
    kind: Kind,
    store: &SqlStore,
    first: impl std::future::Future<Output = T> + Send + 'static,
) -> (Blocker, tokio::task::JoinHandle<T>) {
    let before = store.write_stats();
    let blocker = Blocker::hold(fx, kind).await;
    let first = tokio::spawn(first);
    until(store, "the first write started", |s| {
        s.writes == before.writes + 1
    })
    .await;
    (blocker, first)
}

/// The create of a task "first" in session `s`, to start [`behind_a_lock`].
fn first_create(
    store: &Arc<SqlStore>,
) -> impl std::future::Future<Output = Result<cadre_store::TaskRecord, StoreError>> + Send + 'static
{
    let store = store.clone();
    async move { store.create(&NewTask::new("w", "s", "first")).await }
}

const QUEUED: usize = 20;

async fn a_failed_write_fails_alone_in_its_batch(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = Arc::new(fx.open_sql("n").await);
    let taken = store
        .create(&NewTask::new("w", "s", "taken"))
        .await
        .unwrap()
        .id;
    let to_run = store
        .create(&NewTask::new("w", "s", "run"))
        .await
        .unwrap()
        .id;
    // The first write waits for the lock, alone; the rest queue behind it.
    let (blocker, first) = behind_a_lock(&fx, kind, &store, first_create(&store)).await;
    let mut creates = Vec::new();
    for i in 0..QUEUED {
        let store = store.clone();
        creates.push(tokio::spawn(async move {
            store
                .create(&NewTask::new("w", "s", &format!("queued {i}")))
                .await
        }));
    }
    let duplicate = {
        let (store, mut t) = (store.clone(), NewTask::new("w", "s", "again"));
        t.id = taken.clone();
        tokio::spawn(async move { store.create(&t).await })
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

/// Queue the write `op` starts behind the writes queued already (its place in the batch is
/// known), and return where its answer comes.
async fn queue_next<T: Send + 'static>(
    store: &Arc<SqlStore>,
    op: impl std::future::Future<Output = T> + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    let queued = store.write_stats().queued;
    let handle = tokio::spawn(op);
    until(store, "the write queued", |s| s.queued == queued + 1).await;
    handle
}

#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
async fn rows_written_together_share_one_statement_on_postgres(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = Arc::new(fx.open_sql("n").await);
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(
            store
                .create(&NewTask::new("w", "s", &format!("t{i}")))
                .await
                .unwrap()
                .id,
        );
    }
    let done = store
        .create(&NewTask::new("w", "s", "done"))
        .await
        .unwrap()
        .id;
    store
        .transition(&done, Transition::completed("before"))
        .await
        .unwrap();
    let cancelled = store
        .create(&NewTask::new("w", "s", "cancel"))
        .await
        .unwrap()
        .id;
    store.request_cancel(&cancelled).await.unwrap();
    let fenced = store
        .create(&NewTask::new("w", "s", "fenced"))
        .await
        .unwrap()
        .id;

    let before = store.write_stats();
    let (blocker, first) = behind_a_lock(&fx, kind, &store, first_create(&store)).await;
    // In this order: five creates, twenty transitions to running, three transitions the
    // rule refuses (each for its own reason), and a second transition of the first task.
    let mut creates = Vec::new();
    for i in 0..5 {
        let s = store.clone();
        let t = NewTask::new("w", "s", &format!("new {i}"));
        creates.push(queue_next(&store, async move { s.create(&t).await }).await);
    }
    let mut runs = Vec::new();
    for id in &ids {
        let (s, id) = (store.clone(), id.clone());
        runs.push(
            queue_next(&store, async move {
                s.transition(&id, Transition::running()).await
            })
            .await,
        );
    }
    let transition = |id: &String, t: Transition| {
        let (s, id) = (store.clone(), id.clone());
        async move { s.transition(&id, t).await }
    };
    let refused = queue_next(&store, transition(&done, Transition::running())).await;
    let after_cancel = queue_next(&store, transition(&cancelled, Transition::running())).await;
    let stale = queue_next(&store, transition(&fenced, Transition::running().fenced(3))).await;
    let again = queue_next(
        &store,
        transition(&ids[0], Transition::completed("answer").with_turns(3)),
    )
    .await;
    blocker.release().await;

    first.await.unwrap().unwrap();
    for c in creates {
        c.await.unwrap().expect("a queued create");
    }
    for r in runs {
        r.await.unwrap().expect("a queued transition to running");
    }
    match refused.await.unwrap() {
        Err(StoreError::Refused {
            from: TaskStatus::Completed,
            ..
        }) => {}
        other => panic!("running after completed: {other:?}"),
    }
    match after_cancel.await.unwrap() {
        Err(StoreError::Refused {
            cancel_requested: true,
            ..
        }) => {}
        other => panic!("running after a cancel request: {other:?}"),
    }
    match stale.await.unwrap() {
        Err(StoreError::Fenced {
            epoch: 3,
            current: 0,
            ..
        }) => {}
        other => panic!("a write at another epoch: {other:?}"),
    }
    again
        .await
        .unwrap()
        .expect("completed after running, in the same batch");

    let first_task = store.get(&ids[0]).await.unwrap().unwrap();
    assert_eq!(first_task.status, TaskStatus::Completed);
    assert_eq!(first_task.result.as_deref(), Some("answer"));
    // Written by the batched statement too.
    assert_eq!(first_task.turns, Some(3));
    for id in &ids[1..] {
        assert_eq!(
            store.get(id).await.unwrap().unwrap().status,
            TaskStatus::Running
        );
    }
    assert_eq!(
        store.get(&done).await.unwrap().unwrap().result.as_deref(),
        Some("before")
    );
    assert_eq!(
        store.get(&cancelled).await.unwrap().unwrap().status,
        TaskStatus::Pending
    );
    assert_eq!(
        store.get(&fenced).await.unwrap().unwrap().status,
        TaskStatus::Pending
    );
    assert_eq!(
        store.list_by_session("s").await.unwrap().len(),
        20 + 3 + 1 + 5
    );
    let after = store.write_stats();
    // Each refusal reads the task's state on the writer, after the batch.
    let refusal_reads = 3;
    assert_eq!(
        after.writes - before.writes,
        1 + 5 + 20 + 4 + refusal_reads,
        "{after:?}"
    );
    // The first write alone, then one batch: on PostgreSQL one statement for the creates,
    // one for the transitions up to the first task's second one, which starts another;
    // SQLite runs each row's statement.
    let batch_runs = match kind {
        Kind::Postgres => 3,
        _ => 5 + 20 + 4,
    };
    assert_eq!(
        after.runs - before.runs,
        1 + batch_runs + refusal_reads,
        "{after:?}"
    );
}

sql_backends!(rows_written_together_share_one_statement_on_postgres);

async fn deliveries_and_live_children_written_together_share_one_statement_on_postgres(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = Arc::new(fx.open_sql("n").await);
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut t = NewTask::new("w", "s", &format!("t{i}"));
        // A background task's result waits for delivery.
        t.background = true;
        let id = store.create(&t).await.unwrap().id;
        store
            .transition(&id, Transition::completed("r"))
            .await
            .unwrap();
        ids.push(id);
    }
    store.mark_delivered(&ids[4]).await.unwrap();

    let before = store.write_stats();
    let (blocker, first) = {
        let (s, id) = (store.clone(), ids[0].clone());
        behind_a_lock(
            &fx,
            kind,
            &store,
            async move { s.mark_delivered(&id).await },
        )
        .await
    };
    let mut delivered = Vec::new();
    for id in &ids[1..] {
        let (s, id) = (store.clone(), id.clone());
        delivered.push(queue_next(&store, async move { s.mark_delivered(&id).await }).await);
    }
    let mut children = Vec::new();
    for (key, label) in [
        ("a", Some("one")),
        ("b", Some("two")),
        ("c", Some("ONE")),
        ("d", None),
    ] {
        let (s, c) = (store.clone(), crate::delivery::child(key, "s", label, 1));
        children.push(queue_next(&store, async move { s.insert_live_child(&c).await }).await);
    }
    blocker.release().await;

    assert!(first.await.unwrap().unwrap());
    let delivered: Vec<bool> = futures_results(delivered).await;
    assert_eq!(
        delivered,
        [true, true, true, false],
        "the last was delivered before"
    );
    let mut inserted = Vec::new();
    for c in children {
        inserted.push(c.await.unwrap());
    }
    assert!(inserted[0].is_ok() && inserted[1].is_ok() && inserted[3].is_ok());
    match &inserted[2] {
        Err(StoreError::LabelInUse(label)) => assert_eq!(label, "ONE"),
        other => panic!("a label in use, in the same batch: {other:?}"),
    }
    let mut keys: Vec<String> = store
        .live_children("s")
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.agent_key)
        .collect();
    keys.sort();
    assert_eq!(keys, ["a", "b", "d"]);
    for id in &ids {
        assert!(store.get(id).await.unwrap().unwrap().delivered, "{id}");
    }
    let after = store.write_stats();
    // The batch up to its failure: on PostgreSQL one statement for the deliveries and one
    // for the children, which fails (a label in use); SQLite runs each row's statement, up
    // to the third child's. The batch is rolled back, and its eight writes run again alone.
    let until_failure = match kind {
        Kind::Postgres => 2,
        _ => 4 + 3,
    };
    // After it, on the writer: the label in use is looked up, and so is the task whose
    // delivery changed nothing.
    let lookups = 2;
    assert_eq!(
        after.runs - before.runs,
        1 + until_failure + 8 + lookups,
        "{after:?}"
    );
}

/// The answers of queued writes, each expected to succeed.
async fn futures_results<T: Send + 'static>(
    handles: Vec<tokio::task::JoinHandle<Result<T, StoreError>>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap().expect("a queued write"));
    }
    out
}

sql_backends!(deliveries_and_live_children_written_together_share_one_statement_on_postgres);

/// A message whose JSON has what a statement carrying it must keep exactly: quotes,
/// backslashes, a newline, non-ASCII text.
fn odd_message(i: usize) -> cadre_types::Message {
    cadre_types::Message::user(format!("m{i} \"q\" \\ back\\slash\nline é ✓ {{}}"))
}

/// Checkpoint appends queued together: on PostgreSQL one statement for all of them up to a
/// task appended twice (the second starts another), each append still written whole or
/// refused on its own conditions; SQLite runs each append's statement.
async fn checkpoint_appends_written_together_share_one_statement_on_postgres(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = Arc::new(fx.open_sql("n").await);
    let mut ids = Vec::new();
    for i in 0..5 {
        let id = store
            .create(&NewTask::new("w", "s", &format!("t{i}")))
            .await
            .unwrap()
            .id;
        store.transition(&id, Transition::running()).await.unwrap();
        ids.push(id);
    }
    let m: Vec<_> = (0..6).map(odd_message).collect();
    let usage = cadre_types::Usage::default();
    store
        .append_checkpoint(&ids[1], 0, 0, 0, &m[..2], usage)
        .await
        .unwrap();
    store
        .transition(&ids[4], Transition::completed("done"))
        .await
        .unwrap();

    let before = store.write_stats();
    let (blocker, first) = behind_a_lock(&fx, kind, &store, first_create(&store)).await;
    let append = |i: usize, epoch: u64, start: u64, msgs: std::ops::Range<usize>| {
        let (s, id, msgs) = (store.clone(), ids[i].clone(), m[msgs].to_vec());
        async move {
            s.append_checkpoint(&id, epoch, 0, start, &msgs, cadre_types::Usage::default())
                .await
        }
    };
    // In this order: a first append, a continuation, one leaving a gap, one at another
    // owner epoch, one for an ended task, and a second append of the first task.
    let fresh = queue_next(&store, append(0, 0, 0, 0..2)).await;
    let continued = queue_next(&store, append(1, 0, 2, 2..3)).await;
    let gap = queue_next(&store, append(2, 0, 5, 0..1)).await;
    let stale = queue_next(&store, append(3, 7, 0, 0..1)).await;
    let ended = queue_next(&store, append(4, 0, 0, 0..1)).await;
    let again = queue_next(&store, append(0, 0, 2, 2..6)).await;
    blocker.release().await;

    first.await.unwrap().unwrap();
    fresh.await.unwrap().expect("a first append");
    continued.await.unwrap().expect("a continuation");
    again
        .await
        .unwrap()
        .expect("a continuation in the same batch");
    for (what, refused) in [("a gap", gap), ("another epoch", stale), ("ended", ended)] {
        match refused.await.unwrap() {
            Err(StoreError::CheckpointRefused { .. }) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
    let read = |i: usize| {
        let (s, id) = (store.clone(), ids[i].clone());
        async move { s.read_checkpoint(&id).await.unwrap().map(|c| c.messages) }
    };
    assert_eq!(read(0).await.as_deref(), Some(&m[..]));
    assert_eq!(read(1).await.as_deref(), Some(&m[..3]));
    assert_eq!(read(2).await, None);
    assert_eq!(read(3).await, None);
    let after = store.write_stats();
    assert_eq!(after.writes - before.writes, 1 + 6, "{after:?}");
    // The first write alone, then one batch: on PostgreSQL one statement for the first
    // five appends and one for the first task's second.
    let batch_runs = match kind {
        Kind::Postgres => 2,
        _ => 6,
    };
    assert_eq!(after.runs - before.runs, 1 + batch_runs, "{after:?}");
}

sql_backends!(checkpoint_appends_written_together_share_one_statement_on_postgres);

const READS: usize = 64;

/// Create `READS / 2` tasks; their ids, and the `READS` ids to read: each task twice, then
/// an unknown id and `odd`, which names no task either.
async fn reads_to_ask(store: &SqlStore, odd: &str) -> (Vec<String>, Vec<String>) {
    let mut ids = Vec::new();
    for i in 0..READS / 2 {
        let t = NewTask::new("w", "s", &format!("t{i}"));
        ids.push(store.create(&t).await.unwrap().id);
    }
    let mut asked: Vec<String> = ids.iter().chain(&ids).cloned().collect();
    asked.truncate(READS - 2);
    asked.extend(["nope-1".to_string(), odd.to_string()]);
    (ids, asked)
}

/// PostgreSQL: reads of a task by id asked for while others are in flight share one
/// statement, and each still gets its own task (or none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_asked_together_share_a_statement_on_postgres() {
    let Some(fx) = Fixture::new(Kind::Postgres).await else {
        return;
    };
    let store = Arc::new(fx.open_sql("n").await);
    // An id PostgreSQL's text cannot hold must not fail the statement it would share.
    let (ids, asked) = reads_to_ask(&store, "nope\0nul").await;

    // Reads wait behind a lock that keeps them from the table until every one is asked.
    let mut blocker = sqlx::PgConnection::connect(&fx.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut blocker).await.unwrap();
    sqlx::query("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE")
        .execute(&mut blocker)
        .await
        .unwrap();
    let before = store.read_stats();
    let reads = spawn_reads(&store, &asked);
    until_stats(
        || store.read_stats(),
        "every read asked",
        |s| s.gets == before.gets + READS as u64,
    )
    .await;
    sqlx::query("COMMIT").execute(&mut blocker).await.unwrap();

    each_got_its_own(&ids, &asked, reads).await;
    // At most the statements in flight when the lock was taken (half the pool) and one
    // for every read queued behind them, where there were one per read.
    let statements = store.read_stats().statements - before.statements;
    assert!(statements <= 5, "{READS} reads in {statements} statements");
    reads_fail_once_closed(&store, &ids[0]).await;
}

type Read = tokio::task::JoinHandle<Result<Option<cadre_store::TaskRecord>, StoreError>>;

/// Read each of `asked` from a task of its own.
fn spawn_reads(store: &Arc<SqlStore>, asked: &[String]) -> Vec<Read> {
    asked
        .iter()
        .map(|id| {
            let (store, id) = (store.clone(), id.clone());
            tokio::spawn(async move { store.get(&id).await })
        })
        .collect()
}

/// Each read of `asked` got the task of its id when it is one of `ids`, else none.
async fn each_got_its_own(ids: &[String], asked: &[String], reads: Vec<Read>) {
    for (id, read) in asked.iter().zip(reads) {
        let got = read.await.unwrap().unwrap();
        match ids.contains(id) {
            true => assert_eq!(got.map(|r| r.id).as_deref(), Some(id.as_str())),
            false => assert!(got.is_none(), "{id}: {got:?}"),
        }
    }
}

/// After `close`, a read by id fails as closed, alone or with others.
async fn reads_fail_once_closed(store: &Arc<SqlStore>, id: &str) {
    store.close().await;
    let reads = (0..8).map(|_| store.get(id));
    for read in futures::future::join_all(reads).await {
        assert!(
            matches!(read, Err(StoreError::Db(sqlx::Error::PoolClosed))),
            "{read:?}"
        );
    }
}

/// SQLite: reads of a task by id asked for at once, some sharing a statement (the ids as a
/// JSON array), each get their own task or none. How many share one depends on how this
/// thread and the store's queue thread are scheduled (a unit test of `gets` queues them all
/// first and sees one statement); here no shared statement fails into reads of their own.
#[tokio::test(flavor = "current_thread")]
async fn reads_asked_together_share_a_statement_on_sqlite() {
    let fx = Fixture::new(Kind::Sqlite).await.unwrap();
    let store = Arc::new(fx.open_sql("n").await);
    let (ids, asked) = reads_to_ask(&store, "it's \"quoted\"").await;
    let before = store.read_stats();
    let reads = spawn_reads(&store, &asked);
    each_got_its_own(&ids, &asked, reads).await;
    let after = store.read_stats();
    assert_eq!(after.gets - before.gets, READS as u64);
    assert!(
        after.statements - before.statements <= READS as u64,
        "{after:?}"
    );
    reads_fail_once_closed(&store, &ids[0]).await;
}

/// SQLite: a store opened in a tokio runtime that has since ended (a library opening it in
/// a short-lived runtime) still reads tasks by id in another, together or alone, and
/// outside any tokio runtime; reads left waiting in a runtime that idles hold up no other.
#[test]
fn reads_by_id_outlive_the_runtime_that_opened_the_store_on_sqlite() {
    let runtime = |threads| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .unwrap()
    };
    let (fx, store, ids, asked) = runtime(1).block_on(async {
        let fx = Fixture::new(Kind::Sqlite).await.unwrap();
        let store = Arc::new(fx.open_sql("n").await);
        let (ids, asked) = reads_to_ask(&store, "x").await;
        (fx, store, ids, asked)
    });
    // As many reads as the store runs at once, asked in a runtime that then idles.
    let idle = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A read is answered by the store's threads, so one whose caller was descheduled
    // between asking and looking for the answer can be ready at its first poll; it is
    // checked then, and the others stay parked (all four ready would take four such pauses).
    let asked_here: Vec<_> = (0..4).map(|_| Box::pin(store.get(&ids[0]))).collect();
    let parked = idle.block_on(async {
        let mut parked = Vec::new();
        for mut read in asked_here {
            match futures::poll!(read.as_mut()) {
                std::task::Poll::Pending => parked.push(read),
                std::task::Poll::Ready(got) => {
                    assert_eq!(got.unwrap().map(|r| r.id), Some(ids[0].clone()));
                }
            }
        }
        parked
    });
    assert!(
        !parked.is_empty(),
        "no read was left waiting in the idle runtime"
    );
    runtime(2).block_on(async {
        let reads = spawn_reads(&store, &asked);
        let all = each_got_its_own(&ids, &asked, reads);
        tokio::time::timeout(Duration::from_secs(20), all)
            .await
            .expect("the reads are answered while the other runtime idles");
    });
    let alone = futures::executor::block_on(store.get(&asked[0])).unwrap();
    assert_eq!(alone.map(|r| r.id), Some(ids[0].clone()));
    for read in parked {
        let got = futures::executor::block_on(read).unwrap();
        assert_eq!(got.map(|r| r.id), Some(ids[0].clone()));
    }
    drop((idle, fx));
}
