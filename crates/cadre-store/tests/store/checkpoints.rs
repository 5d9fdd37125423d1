//! Checkpoints: appended in order and read back whole by another node, refused when they do
//! not continue what is stored or the task has ended, replaced by a compaction's generation,
//! unreadable once the task ends (whoever ends it), and deleted by the next sweep.

use crate::common::{Fixture, Kind};
use crate::{both_backends, sql_backends};
use cadre_store::{NewTask, NodeId, StoreError, Transition};
use cadre_types::{Message, ToolCall, Usage};

fn usage(input: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: 7,
        ..Usage::default()
    }
}

fn turn_one() -> Vec<Message> {
    vec![
        Message::Assistant {
            content: "looking".into(),
            thinking: None,
            thinking_signature: None,
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a.txt"}"#.into(),
            }],
        },
        Message::Tool {
            tool_call_id: "c1".into(),
            name: "read_file".into(),
            content: "Output too long; saved to .cadre/tool-outputs/s/1-c1-ab.txt".into(),
            is_error: false,
            images: Vec::new(),
        },
    ]
}

fn refused(e: StoreError) -> (u64, u64) {
    match e {
        StoreError::CheckpointRefused {
            generation, start, ..
        } => (generation, start),
        other => panic!("expected a refusal, got {other}"),
    }
}

async fn checkpoints_append_in_order(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    let id = a.create(&NewTask::new("w", "s", "p")).await.unwrap().id;
    a.transition(&id, Transition::running()).await.unwrap();
    assert_eq!(b.read_checkpoint(&id).await.unwrap(), None);

    let prompt = [Message::user("do the thing")];
    a.append_checkpoint(&id, 0, 0, 0, &prompt, usage(0))
        .await
        .unwrap();
    a.append_checkpoint(&id, 0, 0, 1, &turn_one(), usage(10))
        .await
        .unwrap();
    // Nothing is a no-op, wherever it claims to start.
    a.append_checkpoint(&id, 0, 0, 99, &[], usage(99))
        .await
        .unwrap();

    let mut expected = prompt.to_vec();
    expected.extend(turn_one());
    let cp = b.read_checkpoint(&id).await.unwrap().expect("stored");
    assert_eq!(
        (cp.generation, &cp.messages, cp.usage),
        (0, &expected, usage(10))
    );

    // An append that overlaps what is stored, leaves a gap or goes to an older generation
    // writes nothing.
    let more = [Message::user("more")];
    let e = a
        .append_checkpoint(&id, 0, 0, 1, &more, usage(1))
        .await
        .unwrap_err();
    assert_eq!(refused(e), (0, 1));
    let e = a
        .append_checkpoint(&id, 0, 0, 5, &more, usage(1))
        .await
        .unwrap_err();
    assert_eq!(refused(e), (0, 5));
    assert_eq!(
        b.read_checkpoint(&id).await.unwrap().unwrap().messages,
        expected
    );

    // A compaction starts generation 1 with the whole conversation; it replaces generation 0.
    let compacted = vec![
        Message::user("summary of the work so far"),
        Message::user("next"),
    ];
    a.append_checkpoint(&id, 0, 1, 0, &compacted, usage(20))
        .await
        .unwrap();
    let e = a
        .append_checkpoint(&id, 0, 0, 3, &more, usage(1))
        .await
        .unwrap_err();
    assert_eq!(refused(e), (0, 3));
    let e = a
        .append_checkpoint(&id, 0, 0, 0, &more, usage(1))
        .await
        .unwrap_err();
    assert_eq!(refused(e), (0, 0));
    a.append_checkpoint(&id, 0, 1, 2, &more, usage(30))
        .await
        .unwrap();
    let cp = b.read_checkpoint(&id).await.unwrap().unwrap();
    let mut want = compacted.clone();
    want.extend(more.clone());
    assert_eq!((cp.generation, cp.messages, cp.usage), (1, want, usage(30)));

    // An ended task has no checkpoint and takes none.
    a.transition(&id, Transition::completed("done"))
        .await
        .unwrap();
    assert_eq!(b.read_checkpoint(&id).await.unwrap(), None);
    let e = a
        .append_checkpoint(&id, 0, 1, 3, &more, usage(1))
        .await
        .unwrap_err();
    assert_eq!(refused(e), (1, 3));
    let e = a
        .append_checkpoint("task_unknown", 0, 0, 0, &more, usage(1))
        .await
        .unwrap_err();
    assert_eq!(refused(e), (0, 0));
}

async fn long_checkpoints_keep_their_order(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let id = a.create(&NewTask::new("w", "s", "p")).await.unwrap().id;
    // More messages than one statement takes: split, in order, nothing lost.
    let many: Vec<Message> = (0..1203).map(|i| Message::user(format!("m{i}"))).collect();
    a.append_checkpoint(&id, 0, 0, 0, &many, usage(1))
        .await
        .unwrap();
    a.append_checkpoint(&id, 0, 0, 1203, &many[..2], usage(2))
        .await
        .unwrap();
    let cp = a.read_checkpoint(&id).await.unwrap().unwrap();
    assert_eq!(cp.messages.len(), 1205);
    assert_eq!(&cp.messages[..1203], many.as_slice());
    assert_eq!(&cp.messages[1203..], &many[..2]);
    a.transition(&id, Transition::failed("x")).await.unwrap();
    assert_eq!(a.read_checkpoint(&id).await.unwrap(), None);
}

/// The rows of task `id`'s checkpoint in the SQL database of `fx`.
async fn checkpoint_rows(fx: &Fixture, id: &str) -> i64 {
    use sqlx::Connection;
    let sql = "SELECT count(*) FROM task_checkpoints WHERE task_id = $1";
    let rows = if fx.path.is_some() {
        let mut c = sqlx::SqliteConnection::connect(&fx.url).await.unwrap();
        sqlx::query_scalar(sql).bind(id).fetch_one(&mut c).await
    } else {
        let mut c = sqlx::PgConnection::connect(&fx.url).await.unwrap();
        sqlx::query_scalar(sql).bind(id).fetch_one(&mut c).await
    };
    rows.unwrap()
}

/// An ended task's checkpoint is unreadable at once and its rows go with the next sweep (or
/// the next start's recovery); an active task's stay.
async fn a_sweep_deletes_the_checkpoints_of_ended_tasks(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let ended = a.create(&NewTask::new("w", "s", "p")).await.unwrap().id;
    let active = a.create(&NewTask::new("w", "s", "q")).await.unwrap().id;
    for id in [&ended, &active] {
        a.transition(id, Transition::running()).await.unwrap();
        a.append_checkpoint(id, 0, 0, 0, &turn_one(), usage(1))
            .await
            .unwrap();
    }
    a.transition(&ended, Transition::completed("done"))
        .await
        .unwrap();
    assert_eq!(a.read_checkpoint(&ended).await.unwrap(), None);

    a.sweep(std::time::Duration::from_secs(3600)).await.unwrap();
    assert_eq!(checkpoint_rows(&fx, &ended).await, 0);
    assert_eq!(checkpoint_rows(&fx, &active).await, turn_one().len() as i64);
    let cp = a.read_checkpoint(&active).await.unwrap().expect("kept");
    assert_eq!(cp.messages, turn_one());

    // A start's recovery deletes them too.
    a.transition(&active, Transition::failed("x"))
        .await
        .unwrap();
    a.recover_node(&NodeId::new("node-a")).await.unwrap();
    assert_eq!(checkpoint_rows(&fx, &active).await, 0);
}

both_backends!(
    checkpoints_append_in_order,
    long_checkpoints_keep_their_order
);

sql_backends!(a_sweep_deletes_the_checkpoints_of_ended_tasks);
