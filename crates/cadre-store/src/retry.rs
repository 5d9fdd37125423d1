//! Writes of a task's life that must land: a transient store failure (the database
//! restarting, a dropped connection) is waited out with bounded backoff instead of being
//! taken for an answer. Only the state rules' refusal, a cancel requested, is an answer.
//! Creating a task is tried again the same way, for a shorter time: its caller waits.

use crate::error::{StoreError, StoreResult};
use crate::model::{LiveChildEntry, NewTask, TaskRecord, Transition};
use crate::store::TaskStore;
use std::time::Duration;

/// The first pause after a transient failure; each further pause doubles, up to
/// [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause between two tries.
const MAX_PAUSE: Duration = Duration::from_secs(2);
/// How long a write is tried by default before its last error is returned (`[store]
/// write_retry_secs`): long enough for a database restart, bounded so a store that is gone
/// for good does not hold a task forever.
pub const RETRY_FOR: Duration = Duration::from_secs(crate::config::DEFAULT_WRITE_RETRY_SECS);

/// Write `t` to task `id`, trying again over transient failures for up to `within`.
/// Returns the first answer (success, or a refusal by the state rules) or the last error.
pub async fn transition_retrying(
    store: &dyn TaskStore,
    id: &str,
    t: Transition,
    within: Duration,
) -> StoreResult<()> {
    retrying_transition(store, id, t, within, false)
        .await
        .map(|_| ())
}

/// [`transition_retrying`] by [`TaskStore::transition_returning`]: the task as stored
/// after the write, when the store has it at hand.
pub async fn transition_returning_retrying(
    store: &dyn TaskStore,
    id: &str,
    t: Transition,
    within: Duration,
) -> StoreResult<Option<TaskRecord>> {
    retrying_transition(store, id, t, within, true).await
}

/// The loop of both: `returning` picks the store's method.
async fn retrying_transition(
    store: &dyn TaskStore,
    id: &str,
    t: Transition,
    within: Duration,
    returning: bool,
) -> StoreResult<Option<TaskRecord>> {
    let give_up = tokio::time::Instant::now() + within;
    let mut pause = FIRST_PAUSE;
    loop {
        let written = if returning {
            store.transition_returning(id, t.clone()).await
        } else {
            store.transition(id, t.clone()).await.map(|()| None)
        };
        match written {
            Err(e) if e.is_transient() && tokio::time::Instant::now() + pause < give_up => {
                tracing::warn!(task = %id, to = %t.to, error = %e, "store: writing the task failed; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
            other => return other,
        }
    }
}

/// How long [`create_retrying`] is tried by default: a database restart takes seconds, and
/// the caller (a parent's tool call, a `cadre serve` submission) is waiting.
pub const CREATE_RETRY_FOR: Duration = Duration::from_secs(10);

/// Create `task`, trying again over transient failures for up to `within`. A try that
/// finds the task already there after a failed one means the failed one was committed
/// (only its answer was lost): the stored record is returned.
pub async fn create_retrying(
    store: &dyn TaskStore,
    task: &NewTask,
    within: Duration,
) -> StoreResult<TaskRecord> {
    // Boxed: a fan-out's calls each wait here, and the loop's state is larger than a task.
    // The task is borrowed: taken by value, an async fn keeps it twice while it waits.
    Box::pin(retrying_create(store, &task.id, within, || {
        store.create(task)
    }))
    .await
}

/// [`create_retrying`] for a live child and its first task ([`TaskStore::create_live`]):
/// a try that finds the child or the task there after a failed one means the failed one was
/// committed, and the stored task is returned.
pub async fn create_live_retrying(
    store: &dyn TaskStore,
    child: &LiveChildEntry,
    task: &NewTask,
    within: Duration,
) -> StoreResult<TaskRecord> {
    Box::pin(retrying_create(store, &task.id, within, || {
        store.create_live(child, task)
    }))
    .await
}

/// The loop of both: `attempt` creates task `id`.
async fn retrying_create<'a, F, Fut>(
    store: &dyn TaskStore,
    id: &str,
    within: Duration,
    attempt: F,
) -> StoreResult<TaskRecord>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = StoreResult<TaskRecord>> + 'a,
{
    let give_up = tokio::time::Instant::now() + within;
    let mut pause = FIRST_PAUSE;
    let mut failed_once = false;
    loop {
        // Only the error is kept across the waits below: a fan-out's calls each wait here
        // for their create, and a record held in the future cost 600 B a call.
        let e = match attempt().await {
            Ok(record) => return Ok(record),
            Err(e) => e,
        };
        if e.is_transient() && tokio::time::Instant::now() + pause < give_up {
            tracing::warn!(task = %id, error = %e, "store: creating the task failed; trying again");
            failed_once = true;
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
            continue;
        }
        return match e {
            StoreError::DuplicateTask(_) | StoreError::DuplicateLiveChild(_) if failed_once => {
                match store.get(id).await? {
                    Some(record) => Ok(record),
                    None => Err(e),
                }
            }
            e => Err(e),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creating_a_task_holds_no_record_while_it_waits() {
        // A fan-out's `task` calls each wait in this future for their create.
        let store = crate::MemoryStore::new(crate::NodeId::new("n"));
        let task = NewTask::new("a", "s", "p");
        let creating = create_retrying(&store, &task, Duration::ZERO);
        let size = std::mem::size_of_val(&creating);
        // Its caller holds the task; this future, the boxed loop and its arguments.
        assert!(
            size < std::mem::size_of::<NewTask>() / 2,
            "creating a task holds {size} bytes"
        );
    }
}
