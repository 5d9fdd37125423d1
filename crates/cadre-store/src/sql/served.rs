//! What `cadre serve` keeps of the tasks it serves: the served task a row is a turn of, the
//! caller's ids, and the approval question the task waits on with an answer another node
//! stored for it.

use super::conn::Arg;
use super::{SqlStore, now_ms};
use crate::error::{StoreError, StoreResult};
use crate::model::ServedTurn;

impl SqlStore {
    /// Run a one-row update binding `id` first, then `args`; true when a row changed,
    /// `NotFound` when the task does not exist.
    async fn served_update(
        &self,
        sql: &'static str,
        id: &str,
        args: &[Option<&str>],
    ) -> StoreResult<bool> {
        let args: Vec<Arg> = [Arg::from(id), now_ms().into()]
            .into_iter()
            .chain(args.iter().map(|a| Arg::from(*a)))
            .collect();
        let affected = on_writer!(&self.db, args, |p, args| p.execute(sql, args).await?)?;
        if affected > 0 {
            return Ok(true);
        }
        match self.get_task(id).await? {
            Some(_) => Ok(false),
            None => Err(StoreError::NotFound(id.to_string())),
        }
    }

    pub(super) async fn set_served_task(&self, id: &str, s: &ServedTurn) -> StoreResult<bool> {
        // The turn is bound as text and cast, so that every argument is a string.
        self.served_update(
            "UPDATE tasks SET served_task_id = $3, served_turn = CAST($4 AS BIGINT), \
               served_message_id = $5, caller_task_id = $6, updated_at = $2 WHERE id = $1",
            id,
            &[
                Some(&s.task_id),
                Some(&s.turn.to_string()),
                s.message_id.as_deref(),
                s.caller_id.as_deref(),
            ],
        )
        .await
    }

    pub(super) async fn set_question_task(
        &self,
        id: &str,
        question: Option<&str>,
    ) -> StoreResult<bool> {
        match question {
            Some(q) => {
                self.served_update(
                    "UPDATE tasks SET question = $3, answer = NULL, updated_at = $2 \
                     WHERE id = $1 AND status IN ('pending', 'running')",
                    id,
                    &[Some(q)],
                )
                .await
            }
            None => {
                self.served_update(
                    "UPDATE tasks SET question = NULL, answer = NULL, updated_at = $2 \
                     WHERE id = $1 AND question IS NOT NULL",
                    id,
                    &[],
                )
                .await
            }
        }
    }

    pub(super) async fn answer_question_task(
        &self,
        id: &str,
        question: &str,
        answer: &str,
    ) -> StoreResult<bool> {
        self.served_update(
            "UPDATE tasks SET answer = $4, updated_at = $2 \
             WHERE id = $1 AND question = $3 AND answer IS NULL \
               AND status IN ('pending', 'running')",
            id,
            &[Some(question), Some(answer)],
        )
        .await
    }
}
