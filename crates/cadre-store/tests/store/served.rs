//! What `cadre serve` keeps of its tasks: the turns of a served task and the caller's id,
//! read back by another node; the question a task waits on, answered from another node by
//! compare and set, and never on a task that has ended.

use crate::both_backends;
use crate::common::{Fixture, Kind};
use cadre_store::{NewTask, ServedTurn, StoreError, TaskFilter, Transition};

fn turn(of: &str, n: u64, message: &str, caller: Option<&str>) -> ServedTurn {
    ServedTurn {
        task_id: of.to_string(),
        turn: n,
        message_id: Some(message.to_string()),
        caller_id: caller.map(str::to_string),
    }
}

async fn turns_and_caller_ids_are_read_back_elsewhere(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    let first = a
        .create(&NewTask::new("w", "serve-1", "one"))
        .await
        .unwrap()
        .id;
    let other = a
        .create(&NewTask::new("w", "serve-1", "x"))
        .await
        .unwrap()
        .id;
    let second = a
        .create(&NewTask::new("w", "serve-1", "two"))
        .await
        .unwrap()
        .id;
    assert!(
        a.set_served(&first, &turn(&first, 0, "m1", Some("job-1")))
            .await
            .unwrap()
    );
    assert!(
        a.set_served(&other, &turn(&other, 0, "m9", None))
            .await
            .unwrap()
    );
    assert!(
        a.set_served(&second, &turn(&first, 1, "m2", None))
            .await
            .unwrap()
    );
    let e = a.set_served("task_nope", &turn("x", 0, "m", None)).await;
    assert!(matches!(e, Err(StoreError::NotFound(_))), "{e:?}");

    let got = b.get(&second).await.unwrap().unwrap();
    assert_eq!(got.served, Some(turn(&first, 1, "m2", None)));
    let turns = b
        .list(&TaskFilter {
            served_task: Some(first.clone()),
            ..TaskFilter::default()
        })
        .await
        .unwrap();
    let ids: Vec<&str> = turns.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, [first.as_str(), second.as_str()], "in turn order");
    let by_caller = b
        .list(&TaskFilter {
            caller_id: Some("job-1".into()),
            ..TaskFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(by_caller.len(), 1);
    assert_eq!(by_caller[0].id, first);
    assert_eq!(
        by_caller[0].served,
        Some(turn(&first, 0, "m1", Some("job-1")))
    );
    // A task nobody served has none of it.
    let plain = a.create(&NewTask::new("w", "s", "p")).await.unwrap();
    assert_eq!(
        (plain.served, plain.question, plain.answer),
        (None, None, None)
    );
}

async fn a_question_is_answered_once_from_another_node(kind: Kind) {
    let Some(fx) = Fixture::new(kind).await else {
        return;
    };
    let a = fx.open("node-a").await;
    let b = fx.open("node-b").await;
    let id = a
        .create(&NewTask::new("w", "serve-1", "p"))
        .await
        .unwrap()
        .id;
    a.transition(&id, Transition::running()).await.unwrap();
    // Nothing asked: nothing to answer, nothing to clear.
    assert!(!b.answer_question(&id, "q1", "yes").await.unwrap());
    assert!(!a.set_question(&id, None).await.unwrap());

    assert!(a.set_question(&id, Some("q1")).await.unwrap());
    let asked = b.get(&id).await.unwrap().unwrap();
    assert_eq!(asked.question.as_deref(), Some("q1"));
    // Only the question that is asked can be answered, and only once.
    assert!(!b.answer_question(&id, "q0", "yes").await.unwrap());
    assert!(b.answer_question(&id, "q1", "no").await.unwrap());
    assert!(!b.answer_question(&id, "q1", "yes").await.unwrap());
    let answered = a.get(&id).await.unwrap().unwrap();
    assert_eq!(answered.answer.as_deref(), Some("no"));
    assert!(answered.updated_at >= asked.updated_at);
    // The next question drops the old answer; clearing drops both.
    assert!(a.set_question(&id, Some("q2")).await.unwrap());
    assert_eq!(a.get(&id).await.unwrap().unwrap().answer, None);
    assert!(b.answer_question(&id, "q2", "yes").await.unwrap());
    assert!(a.set_question(&id, None).await.unwrap());
    let cleared = b.get(&id).await.unwrap().unwrap();
    assert_eq!((cleared.question, cleared.answer), (None, None));

    // A task that has ended is asked nothing and answers nothing.
    assert!(a.set_question(&id, Some("q3")).await.unwrap());
    a.transition(&id, Transition::completed("done"))
        .await
        .unwrap();
    assert!(!b.answer_question(&id, "q3", "yes").await.unwrap());
    assert!(!a.set_question(&id, Some("q4")).await.unwrap());
    let e = a.set_question("task_nope", Some("q")).await;
    assert!(matches!(e, Err(StoreError::NotFound(_))), "{e:?}");
}

both_backends!(
    turns_and_caller_ids_are_read_back_elsewhere,
    a_question_is_answered_once_from_another_node
);
