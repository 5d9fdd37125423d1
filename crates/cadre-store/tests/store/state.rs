//! The state machine, checked in SQL: an exhaustive (from, to, cancel flag) table, plus
//! queries, schema shape and the small single-field updates.

use crate::common::{Fixture, Kind};
use crate::{both_backends, sql_backends};
use cadre_store::{
    NewTask, StoreError, TaskFilter, TaskStatus, TaskStatus::*, TaskStore, Transition,
};
use std::time::Duration;

/// The accepted transitions; every other (from, to, cancel) combination is refused.
const ACCEPTED: &[(TaskStatus, TaskStatus, bool)] = &[
    (Pending, Running, false),
    (Pending, Completed, false),
    (Pending, Failed, false),
    (Pending, Cancelled, false),
    (Pending, Completed, true),
    (Pending, Failed, true),
    (Pending, Cancelled, true),
    (Running, Completed, false),
    (Running, Failed, false),
    (Running, Cancelled, false),
    (Running, Completed, true),
    (Running, Failed, true),
    (Running, Cancelled, true),
];

/// A task in state `from` with the cancel flag as asked.
async fn task_in(store: &dyn TaskStore, from: TaskStatus, cancel: bool) -> String {
    let id = store.create(&NewTask::new("a", "s", "p")).await.unwrap().id;
    if from == Running {
        store.transition(&id, Transition::running()).await.unwrap();
    }
    if cancel {
        store.request_cancel(&id).await.unwrap();
    }
    if from.is_terminal() {
        store.transition(&id, Transition::to(from)).await.unwrap();
    }
    let rec = store.get(&id).await.unwrap().unwrap();
    assert_eq!((rec.status, rec.cancel_requested), (from, cancel));
    id
}

async fn state_table(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = fx.open("node-a").await;
    let mut checked = 0;
    for from in TaskStatus::ALL {
        for to in TaskStatus::ALL {
            for cancel in [false, true] {
                let expected = ACCEPTED.contains(&(from, to, cancel));
                assert_eq!(
                    from.can_become(to, cancel),
                    expected,
                    "{from}->{to} {cancel}"
                );
                let id = task_in(store.as_ref(), from, cancel).await;
                let before = store.get(&id).await.unwrap().unwrap();
                crate::common::clock_ticks().await;
                let res = store
                    .transition(&id, Transition::to(to).with_result("r"))
                    .await;
                let after = store.get(&id).await.unwrap().unwrap();
                if expected {
                    res.unwrap_or_else(|e| panic!("{from}->{to} cancel={cancel}: {e}"));
                    assert_eq!(after.status, to);
                    assert!(
                        after.updated_at > before.updated_at,
                        "updated_at not bumped"
                    );
                    assert_eq!(after.result.as_deref(), Some("r"));
                } else {
                    match res {
                        Err(StoreError::Refused {
                            from: f,
                            to: t,
                            cancel_requested,
                            ..
                        }) => assert_eq!((f, t, cancel_requested), (from, to, cancel)),
                        other => panic!("{from}->{to} cancel={cancel}: {other:?}"),
                    }
                    assert_eq!(after, before, "a refused write changed the record");
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 50);
}

/// A transition that returns the task follows the same rules as one that does not, and
/// what it returns is what the store then holds (the store that has it at hand: SQLite
/// and memory; PostgreSQL returns none). A refused or fenced one returns the same error.
async fn transition_returning(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = fx.open("node-a").await;
    for from in TaskStatus::ALL {
        for to in TaskStatus::ALL {
            for cancel in [false, true] {
                let id = task_in(store.as_ref(), from, cancel).await;
                let before = store.get(&id).await.unwrap().unwrap();
                let res = store
                    .transition_returning(&id, Transition::to(to).with_result("r"))
                    .await;
                let after = store.get(&id).await.unwrap().unwrap();
                if from.can_become(to, cancel) {
                    let returned = res.unwrap_or_else(|e| panic!("{from}->{to} {cancel}: {e}"));
                    assert_eq!(after.status, to);
                    match kind {
                        Kind::Postgres => assert_eq!(returned, None),
                        _ => assert_eq!(returned.as_ref(), Some(&after), "{from}->{to}"),
                    }
                } else {
                    match res {
                        Err(StoreError::Refused { from: f, to: t, .. }) => {
                            assert_eq!((f, t), (from, to))
                        }
                        other => panic!("{from}->{to} cancel={cancel}: {other:?}"),
                    }
                    assert_eq!(after, before, "a refused write changed the record");
                }
            }
        }
    }
    // At another owner's epoch: fenced, and nothing written.
    let id = task_in(store.as_ref(), Running, false).await;
    let stale = Transition::to(Completed).fenced(7);
    match store.transition_returning(&id, stale).await {
        Err(StoreError::Fenced { epoch: 7, .. }) => {}
        other => panic!("a stale owner's end: {other:?}"),
    }
    assert_eq!(store.get(&id).await.unwrap().unwrap().status, Running);
    match store
        .transition_returning("no-such-task", Transition::to(Completed))
        .await
    {
        Err(StoreError::NotFound(_)) => {}
        other => panic!("an unknown task: {other:?}"),
    }
}

/// An end written `delivering` is taken with it: the parent waiting for it has it, and no
/// later delivery hands it out again. A refused one marks nothing.
async fn a_delivering_end_is_taken_with_it(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = fx.open("node-a").await;
    let mut t = NewTask::new("a", "s-take", "p");
    t.background = true;
    let id = store.create(&t).await.unwrap().id;
    let end = Transition::completed("r").delivering();
    let returned = store.transition_returning(&id, end.clone()).await.unwrap();
    if kind != Kind::Postgres {
        assert!(returned.unwrap().delivered);
    }
    assert!(store.get(&id).await.unwrap().unwrap().delivered);
    assert!(
        store
            .undelivered_finished("s-take")
            .await
            .unwrap()
            .is_empty()
    );

    // Refused (the task ended already): the next task's delivery is not marked.
    let mut t = NewTask::new("a", "s-take", "p2");
    t.background = true;
    let other = store.create(&t).await.unwrap().id;
    store
        .transition(&other, Transition::failed("lost"))
        .await
        .unwrap();
    assert!(store.transition(&other, end).await.is_err());
    let taken = store.undelivered_finished("s-take").await.unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].id, other);

    // Many at once (one statement for all on PostgreSQL): each as its own write says.
    let ids = crate::common::create_batch(store.as_ref(), "s-many", 20).await;
    let ends = ids.iter().enumerate().map(|(i, id)| {
        let end = Transition::completed("r");
        let end = if i % 2 == 0 { end.delivering() } else { end };
        let store = store.clone();
        async move { store.transition(id, end).await }
    });
    for r in futures::future::join_all(ends).await {
        r.unwrap();
    }
    let taken = store.undelivered_finished("s-many").await.unwrap();
    let odd: std::collections::BTreeSet<&String> = ids.iter().skip(1).step_by(2).collect();
    let got: std::collections::BTreeSet<&String> = taken.iter().map(|r| &r.id).collect();
    assert_eq!(got, odd);
}

/// A task created `running` (its child had a slot) is stored so, however many are created
/// at once (one statement for many rows on PostgreSQL), and goes on from there: `running`
/// again is refused, its end is taken.
async fn created_running(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = fx.open("node-a").await;
    let tasks: Vec<NewTask> = (0..16)
        .map(|i| {
            let mut t = NewTask::new("a", "s", &format!("p{i}"));
            t.running = i % 2 == 0;
            t
        })
        .collect();
    let creates = tasks.iter().map(|t| store.create(t));
    let created = futures::future::join_all(creates).await;
    for (i, c) in created.into_iter().enumerate() {
        let c = c.unwrap();
        let want = if i % 2 == 0 { Running } else { Pending };
        assert_eq!(c.status, want, "as created, task {i}");
        let stored = store.get(&c.id).await.unwrap().unwrap();
        assert_eq!(stored, c, "as stored, task {i}");
        if want == Running {
            let again = store.transition(&c.id, Transition::running()).await;
            assert!(
                matches!(again, Err(StoreError::Refused { from: Running, .. })),
                "{again:?}"
            );
            store
                .transition(&c.id, Transition::to(Completed).with_result("r"))
                .await
                .unwrap();
            let done = store.get(&c.id).await.unwrap().unwrap();
            assert_eq!(
                (done.status, done.result.as_deref()),
                (Completed, Some("r"))
            );
        }
    }
}

async fn cancel_and_unknown(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = fx.open("node-a").await;
    assert!(matches!(
        store.transition("task_nope", Transition::running()).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.request_cancel("task_nope").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(store.get("task_nope").await.unwrap().is_none());
    let id = task_in(store.as_ref(), Running, false).await;
    assert_eq!(store.request_cancel(&id).await.unwrap(), Running);
    assert_eq!(store.request_cancel(&id).await.unwrap(), Running);
    store
        .transition(&id, Transition::cancelled())
        .await
        .unwrap();
    // Terminal: the flag is not set again and the status is reported.
    let done = task_in(store.as_ref(), Completed, false).await;
    assert_eq!(store.request_cancel(&done).await.unwrap(), Completed);
    assert!(!store.get(&done).await.unwrap().unwrap().cancel_requested);
    // Duplicate ids are refused.
    let mut dup = NewTask::new("a", "s", "p");
    dup.id = id.clone();
    assert!(matches!(
        store.create(&dup).await,
        Err(StoreError::DuplicateTask(_))
    ));
}

#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
async fn fields_and_queries(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = fx.open("node-a").await;
    let mut t = NewTask::new("explorer", "s-1", "look around");
    t.parent_agent_id = Some("planner".into());
    t.child_session_id = Some("sub-1".into());
    t.user_id = Some("u1".into());
    t.description = "explore".into();
    t.depth = 3;
    t.parent_call_id = Some("call_7".into());
    let rec = store.create(&t).await.unwrap();
    assert_eq!(rec.depth, Some(3));
    // The parent finds its interrupted call's task by it after a crash.
    assert_eq!(rec.parent_call_id.as_deref(), Some("call_7"));
    assert_eq!(store.get(&rec.id).await.unwrap().unwrap(), rec);
    assert_eq!(rec.owner_node, "node-a");
    assert!(!rec.delivered || !rec.background);
    store
        .transition(&rec.id, Transition::running())
        .await
        .unwrap();
    assert!(
        store
            .set_end_state(&rec.id, "limit_reached:max_turns")
            .await
            .unwrap()
    );
    assert!(!store.set_end_state(&rec.id, "completed").await.unwrap());
    assert!(store.set_remote_task_id(&rec.id, "r-9").await.unwrap());
    let usage = cadre_types::Usage {
        input_tokens: 10,
        output_tokens: 5,
        cached_input_tokens: 3,
        cache_write_tokens: 2,
        ..Default::default()
    }
    .priced(Some(0.000_123_456_789));
    let t = Transition::to(Failed)
        .with_error("boom")
        .with_usage(usage)
        .with_turns(4);
    store.transition(&rec.id, t).await.unwrap();
    let got = store.get(&rec.id).await.unwrap().unwrap();
    assert_eq!(got.end_state.as_deref(), Some("limit_reached:max_turns"));
    assert_eq!(got.error.as_deref(), Some("boom"));
    assert_eq!(got.usage, usage);
    assert_eq!(got.turns, Some(4));
    assert_eq!(got.usage.cost_nano_usd, 123_457, "nano-dollars, exact");
    // An unknown price stays unknown through the store.
    let unknown = cadre_types::Usage {
        input_tokens: 1,
        ..Default::default()
    }
    .priced(None);
    let other = store.create(&NewTask::new("a", "s-3", "p")).await.unwrap();
    store
        .transition(&other.id, Transition::completed("r").with_usage(unknown))
        .await
        .unwrap();
    let unpriced = store.get(&other.id).await.unwrap().unwrap();
    assert_eq!(unpriced.usage.cost_usd(), None);
    // An end that does not say how many turns leaves them unknown.
    assert_eq!(unpriced.turns, None);
    assert_eq!(got.remote_task_id.as_deref(), Some("r-9"));
    assert_eq!(got.parent_agent_id.as_deref(), Some("planner"));

    for i in 0..5 {
        store
            .create(&NewTask::new("a", "s-2", &i.to_string()))
            .await
            .unwrap();
        crate::common::clock_ticks().await;
    }
    let s2 = store.list_by_session("s-2").await.unwrap();
    let prompts: Vec<_> = s2.iter().map(|r| r.prompt.as_str()).collect();
    assert_eq!(prompts, ["0", "1", "2", "3", "4"]);
    let filter = TaskFilter {
        session: Some("s-2".into()),
        status: Some(Pending),
        limit: Some(2),
        ..Default::default()
    };
    assert_eq!(store.list(&filter).await.unwrap().len(), 2);
    let newest = TaskFilter {
        session: Some("s-2".into()),
        limit: Some(2),
        newest_first: true,
        ..Default::default()
    };
    let prompts: Vec<_> = store.list(&newest).await.unwrap();
    let prompts: Vec<_> = prompts.iter().map(|r| r.prompt.as_str()).collect();
    assert_eq!(prompts, ["4", "3"]);
    let planned = TaskFilter {
        parent_agent: Some("planner".into()),
        ..Default::default()
    };
    let planned = store.list(&planned).await.unwrap();
    assert_eq!(planned.len(), 1);
    assert_eq!(planned[0].id, got.id);
    let failed = TaskFilter {
        status: Some(Failed),
        ..Default::default()
    };
    assert_eq!(store.list(&failed).await.unwrap().len(), 1);
    assert_eq!(store.list(&TaskFilter::default()).await.unwrap().len(), 7);
}

async fn schema_is_identical(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let store = fx.open_sql("node-a").await;
    let tasks = store.table_columns("tasks").await.unwrap();
    let expected = "id agent_id parent_agent_id parent_session_id child_session_id user_id \
         status prompt description result error end_state cancel_requested background \
         delivered created_at updated_at heartbeat_at owner_node owner_instance transport \
         remote_task_id remote_headers input_tokens output_tokens cached_input_tokens \
         cache_write_tokens cost_nano_usd unpriced_calls owner_epoch on_orphan resumes \
         served_task_id served_turn served_message_id caller_task_id question answer depth \
         parent_call_id turns trace_parent";
    assert_eq!(tasks, expected.split_whitespace().collect::<Vec<_>>());
    let checkpoints = store.table_columns("task_checkpoints").await.unwrap();
    assert_eq!(
        checkpoints,
        ["task_id", "generation", "seq", "message", "usage"]
    );
    let live = store.table_columns("live_children").await.unwrap();
    assert_eq!(
        live,
        [
            "agent_key",
            "parent_session_id",
            "label",
            "agent_id",
            "child_session_id",
            "depth",
            "created_at"
        ]
    );
    // Reopening applies nothing twice.
    drop(store);
    let again = fx.open_sql("node-b").await;
    assert_eq!(again.table_columns("tasks").await.unwrap().len(), 42);
}

async fn concurrent_first_open(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let fx = std::sync::Arc::new(fx);
    let opens: Vec<_> = (0..8)
        .map(|i| {
            let fx = fx.clone();
            tokio::spawn(async move {
                let s = fx.open(&format!("node-{i}")).await;
                s.create(&NewTask::new("a", "s", "p")).await.unwrap();
            })
        })
        .collect();
    for o in opens {
        o.await.unwrap();
    }
    let s = fx.open("check").await;
    assert_eq!(s.list_by_session("s").await.unwrap().len(), 8);
}

both_backends!(
    state_table,
    transition_returning,
    a_delivering_end_is_taken_with_it,
    cancel_and_unknown,
    fields_and_queries,
    created_running
);
sql_backends!(concurrent_first_open, schema_is_identical);

/// A database written by a build before costs existed gets the new columns, and the cost of
/// its tasks that used tokens reads as unknown, not as $0.
#[tokio::test]
async fn a_version_1_database_is_migrated_and_its_old_costs_are_unknown() {
    use sqlx::{Connection, Executor};
    let Some(fx) = Fixture::new(Kind::Sqlite).await else {
        return;
    };
    let path = fx.path.clone().unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut conn =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=rwc", path.display()))
            .await
            .unwrap();
    conn.execute(include_str!("../../migrations/0001_init.sql"))
        .await
        .unwrap();
    conn.execute(
        "CREATE TABLE cadre_schema (version BIGINT PRIMARY KEY NOT NULL, name TEXT NOT NULL, \
         applied_at BIGINT NOT NULL); INSERT INTO cadre_schema VALUES (1, 'init', 0); \
         INSERT INTO tasks (id, agent_id, parent_session_id, status, prompt, created_at, \
         updated_at, owner_node, input_tokens, output_tokens) VALUES \
         ('task_old', 'a', 's', 'completed', 'p', 1, 1, 'n', 10, 5), \
         ('task_idle', 'a', 's', 'pending', 'p', 1, 1, 'n', 0, 0)",
    )
    .await
    .unwrap();
    conn.close().await.unwrap();
    let store = fx.open("n").await;
    let old = store.get("task_old").await.unwrap().unwrap();
    assert_eq!((old.usage.input_tokens, old.usage.output_tokens), (10, 5));
    assert_eq!(old.usage.cost_usd(), None);
    let idle = store.get("task_idle").await.unwrap().unwrap();
    assert_eq!(idle.usage.cost_usd(), Some(0.0), "no calls, no cost");
}

/// A database at version 9 is rebuilt by version 10 (its status checks as `OR`s) with every
/// row kept: tasks, their checkpoints and owners, which reference the tasks and would go if
/// the rebuild dropped `tasks` with foreign keys on. The rules hold as before.
#[tokio::test]
async fn a_version_9_database_keeps_its_rows_and_rules_through_the_rebuild() {
    use sqlx::{Connection, Executor, Row};
    let Some(fx) = Fixture::new(Kind::Sqlite).await else {
        return;
    };
    let path = fx.path.clone().unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    conn.execute(
        "PRAGMA foreign_keys = ON; CREATE TABLE cadre_schema (version BIGINT PRIMARY KEY \
         NOT NULL, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
    )
    .await
    .unwrap();
    for m in cadre_store::SQLITE_MIGRATIONS
        .iter()
        .filter(|m| m.version <= 9)
    {
        conn.execute(m.sql).await.unwrap();
        sqlx::query("INSERT INTO cadre_schema VALUES ($1, $2, 0)")
            .bind(m.version)
            .bind(m.name)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    conn.execute(
        "INSERT INTO tasks (id, agent_id, parent_session_id, status, prompt, created_at, \
         updated_at, owner_node, owner_epoch, resumes, depth) VALUES \
         ('task_run', 'a', 's', 'running', 'p', 1, 1, 'n', 1, 1, 2), \
         ('task_done', 'a', 's', 'completed', 'q', 2, 2, 'n', 0, 0, 1); \
         INSERT INTO task_checkpoints VALUES ('task_run', 0, 0, '{}', '{}'), \
         ('task_run', 0, 1, '{}', '{}'); \
         INSERT INTO task_owners VALUES ('task_run', 0, 'm', NULL, 1), ('task_run', 1, 'n', NULL, 5)",
    )
    .await
    .unwrap();
    conn.close().await.unwrap();

    let store = fx.open("n").await;
    let run = store.get("task_run").await.unwrap().unwrap();
    assert_eq!((run.status, run.resumes, run.depth), (Running, 1, Some(2)));
    assert_eq!(store.list_by_session("s").await.unwrap().len(), 2);
    let owners = store.owners("task_run").await.unwrap();
    assert_eq!(owners.iter().map(|o| o.epoch).collect::<Vec<_>>(), [0, 1]);

    let mut raw = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let count = |sql: &'static str| sqlx::query(sql);
    let checkpoints = "SELECT count(*) FROM task_checkpoints WHERE task_id = 'task_run'";
    let n: i64 = count(checkpoints).fetch_one(&mut raw).await.unwrap().get(0);
    assert_eq!(n, 2, "the checkpoint survived the rebuild");
    // The task's end makes its checkpoint unreadable at once, and the next sweep deletes it
    // (version 11 dropped the trigger the rebuild made again).
    store
        .transition("task_run", Transition::completed("done").fenced(1))
        .await
        .unwrap();
    assert_eq!(store.read_checkpoint("task_run").await.unwrap(), None);
    store
        .sweep(std::time::Duration::from_secs(3600))
        .await
        .unwrap();
    let n: i64 = count(checkpoints).fetch_one(&mut raw).await.unwrap().get(0);
    assert_eq!(n, 0, "the checkpoint of an ended task is removed");
    // The status check still refuses what it refused.
    let bogus = raw
        .execute(
            "INSERT INTO tasks (id, agent_id, parent_session_id, status, prompt, created_at, \
             updated_at, owner_node) VALUES ('task_x', 'a', 's', 'bogus', 'p', 1, 1, 'n')",
        )
        .await
        .unwrap_err();
    assert!(bogus.to_string().contains("CHECK"), "{bogus}");
    let ddl: String = sqlx::query("SELECT sql FROM sqlite_master WHERE name = 'tasks'")
        .fetch_one(&mut raw)
        .await
        .unwrap()
        .get(0);
    assert!(!ddl.contains("status IN"), "{ddl}");
}

/// A closed store has closed every connection to its file: SQLite removes the write-ahead
/// log when the last one closes. (The reader threads used to be told to close, and
/// `close` returned before they had.)
#[tokio::test]
async fn a_closed_sqlite_store_has_let_go_of_its_file() {
    let Some(fx) = Fixture::new(Kind::Sqlite).await else {
        return;
    };
    let path = fx.path.clone().unwrap();
    let store = fx.open_sql("n").await;
    let id = store.create(&NewTask::new("a", "s", "p")).await.unwrap().id;
    assert!(store.get(&id).await.unwrap().is_some());
    let wal = path.with_file_name(format!(
        "{}-wal",
        path.file_name().unwrap().to_string_lossy()
    ));
    assert!(
        wal.exists(),
        "the open store writes through {}",
        wal.display()
    );
    store.close().await;
    assert!(
        !wal.exists(),
        "{} is still there after close",
        wal.display()
    );
}

/// A PostgreSQL store opens its pool's connections as it opens (on a loaded machine the
/// last may open just after): a fan-out does not wait for new server connections. (They
/// used to be opened on first use, inside the first fan-out.)
#[tokio::test]
async fn a_postgres_store_opens_its_connections_after_it_opens() {
    use sqlx::Connection;
    let Some(fx) = Fixture::new(Kind::Postgres).await else {
        return;
    };
    let store = fx.open_sql("n").await;
    let mut probe = sqlx::PgConnection::connect(&fx.url).await.unwrap();
    let probe = tokio::sync::Mutex::new(&mut probe);
    cadre_testkit::eventually(
        "the pool's 8 connections to open, before any write or read",
        Duration::from_secs(10),
        || async {
            let (open,): (i64,) = sqlx::query_as(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .fetch_one(&mut **probe.lock().await)
            .await
            .unwrap();
            open == 8
        },
    )
    .await;
    // They serve writes and reads.
    let id = store.create(&NewTask::new("a", "s", "p")).await.unwrap().id;
    assert!(store.get(&id).await.unwrap().is_some());
    store.close().await;
}

/// A PostgreSQL server that lets the store's user have only a few connections still serves
/// the store: opening neither waits long nor fails for the connections it cannot have. (An
/// earlier version of the warm-up, sqlx's `min_connections`, failed to open there.)
#[tokio::test]
async fn a_postgres_store_opens_on_a_server_with_few_free_connections() {
    use sqlx::{Connection, Executor};
    let Some(fx) = Fixture::new(Kind::Postgres).await else {
        return;
    };
    let db = fx.url.rsplit('/').next().unwrap().to_string();
    let role = format!("few_{db}");
    let mut admin = sqlx::PgConnection::connect(&fx.url).await.unwrap();
    admin
        .execute(format!("CREATE ROLE {role} LOGIN CONNECTION LIMIT 3").as_str())
        .await
        .unwrap();
    admin
        .execute(format!("ALTER DATABASE {db} OWNER TO {role}").as_str())
        .await
        .unwrap();
    let url = fx.url.replacen("postgres@", &format!("{role}@"), 1);
    let started = std::time::Instant::now();
    let store = cadre_store::open(&url, cadre_store::NodeId::new("n"))
        .await
        .unwrap_or_else(|e| panic!("open {url}: {e}"));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "opening waited {:?}",
        started.elapsed()
    );
    let id = store.create(&NewTask::new("a", "s", "p")).await.unwrap().id;
    assert!(store.get(&id).await.unwrap().is_some());
    store.close().await;
}
