//! Checkpoints: a child's conversation appended at each turn boundary, one statement per
//! append (on PostgreSQL, one for the appends queued together), and read back whole by
//! whichever node continues the task. An ended task's checkpoint is no longer read, and the
//! sweep deletes it.

use super::conn::{Arg, Shared};
use super::{Backend, SqlStore};
use crate::error::{StoreError, StoreResult};
use crate::model::Checkpoint;
use cadre_types::{Message, Usage};
use std::borrow::Cow;
use std::sync::LazyLock;

/// Messages per statement (on SQLite each binds one parameter).
const CHUNK: usize = 500;

/// SQLite's append of `n` messages as one `INSERT … SELECT`: it writes all of them or
/// nothing.
/// The rows are written only when the task is active, no newer generation is stored, and
/// the append starts where the stored generation ends (the row before it exists; the
/// primary key refuses a start inside it), and the writer holds the task's owner epoch.
/// `$1` task, `$2` generation, `$3` start, `$4` usage, `$5` epoch, `$6…` the messages.
fn append_sql(n: usize) -> String {
    let rows = (0..n)
        .map(|k| {
            if k == 0 {
                "SELECT 0 AS k, $6 AS m".to_string()
            } else {
                format!("SELECT {k}, ${}", k + 6)
            }
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    format!(
        "INSERT INTO task_checkpoints (task_id, generation, seq, message, usage) \
         SELECT $1, $2, $3 + v.k, v.m, $4 FROM ({rows}) AS v \
         WHERE EXISTS (SELECT 1 FROM tasks WHERE id = $1 AND owner_epoch = $5 \
                         AND status IN ('pending', 'running')) \
           AND NOT EXISTS (SELECT 1 FROM task_checkpoints c \
                           WHERE c.task_id = $1 AND c.generation > $2) \
           AND ($3 = 0 OR EXISTS (SELECT 1 FROM task_checkpoints c \
                                  WHERE c.task_id = $1 AND c.generation = $2 AND c.seq = $3 - 1))"
    )
}

/// PostgreSQL's append, from the rows `a` of `$src` (an append each: `task_id`,
/// `generation`, `start`, `usage`, `epoch`, and `messages`, a JSON array of each message's
/// JSON text), written on the conditions of [`append_sql`] for each append.
macro_rules! append_pg {
    ($src:literal, $returning:literal) => {
        concat!(
            "INSERT INTO task_checkpoints (task_id, generation, seq, message, usage) \
             SELECT a.task_id, a.generation, a.start + m.k - 1, m.message, a.usage ",
            $src,
            " CROSS JOIN LATERAL json_array_elements_text(a.messages::json) \
                 WITH ORDINALITY AS m(message, k) \
             WHERE EXISTS (SELECT 1 FROM tasks t WHERE t.id = a.task_id \
                             AND t.owner_epoch = a.epoch AND t.status IN ('pending', 'running')) \
               AND NOT EXISTS (SELECT 1 FROM task_checkpoints c \
                               WHERE c.task_id = a.task_id AND c.generation > a.generation) \
               AND (a.start = 0 OR EXISTS (SELECT 1 FROM task_checkpoints c \
                                           WHERE c.task_id = a.task_id \
                                             AND c.generation = a.generation \
                                             AND c.seq = a.start - 1))",
            $returning
        )
    };
}

/// PostgreSQL's append of one chunk: `$1` task, `$2` generation, `$3` start, `$4` usage,
/// `$5` epoch, `$6` the messages. The appends of several children queued together (their
/// turns end together in a fan-out) are one statement, a round trip for all of them.
static APPEND_PG: Shared = Shared {
    one: append_pg!(
        "FROM (SELECT $1::text, $2::int8, $3::int8, $4::text, $5::int8, $6::text) \
           AS a(task_id, generation, start, usage, epoch, messages)",
        ""
    ),
    many: append_pg!(
        "FROM unnest($1::text[], $2::int8[], $3::int8[], $4::text[], $5::int8[], $6::text[]) \
           AS a(task_id, generation, start, usage, epoch, messages)",
        " RETURNING task_id"
    ),
};

/// Messages an append usually holds: a reply (with the prompt, the first time) or a turn's
/// tool results.
const USUAL: usize = 4;

/// The appends of 1 to [`USUAL`] messages, built once.
static APPENDS: LazyLock<Vec<String>> = LazyLock::new(|| (1..=USUAL).map(append_sql).collect());

/// The statement appending `n` messages.
fn append_of(n: usize) -> Cow<'static, str> {
    match APPENDS.get(n.wrapping_sub(1)) {
        Some(sql) => Cow::Borrowed(sql.as_str()),
        None => Cow::Owned(append_sql(n)),
    }
}

/// The appends SQLite's writer prepares as it opens: each child's first checkpoints
/// otherwise paid for parsing them (a statement with three subqueries) within its turn.
pub(super) fn hot_writes_sqlite() -> Vec<String> {
    APPENDS.clone()
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn json<T: serde::Serialize>(id: &str, what: &str, v: &T) -> StoreResult<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt {
        id: id.to_string(),
        reason: format!("{what}: {e}"),
    })
}

impl SqlStore {
    pub(super) async fn append_checkpoint_rows(
        &self,
        id: &str,
        epoch: u64,
        generation: u64,
        start: u64,
        messages: &[Message],
        usage: Usage,
    ) -> StoreResult<()> {
        let usage = json(id, "usage", &usage)?;
        let refused = |at: u64| StoreError::CheckpointRefused {
            id: id.to_string(),
            generation,
            start: at,
        };
        let mut at = start;
        for chunk in messages.chunks(CHUNK) {
            match self
                .append_chunk(id, epoch, generation, at, chunk, &usage)
                .await
            {
                Ok(0) => return Err(refused(at)),
                Ok(_) => {}
                // A start inside the stored generation, or a task that is gone (SQLite checks
                // the foreign key).
                Err(e) if e.is_unique_violation() || e.is_foreign_key_violation() => {
                    return Err(refused(at));
                }
                Err(e) => return Err(e),
            }
            if at == 0 && generation > 0 {
                // The compacted conversation is stored: the generations before it are done.
                let args = vec![Arg::from(id), to_i64(generation).into()];
                on_writer!(&self.db, args, |p, args| p
                    .execute(
                        "DELETE FROM task_checkpoints WHERE task_id = $1 AND generation < $2",
                        args,
                    )
                    .await?)?;
            }
            at += chunk.len() as u64;
        }
        Ok(())
    }

    /// Append `chunk` at `at` in one statement: the rows written, all of the chunk's or none
    /// (the append was refused).
    async fn append_chunk(
        &self,
        id: &str,
        epoch: u64,
        generation: u64,
        at: u64,
        chunk: &[Message],
        usage: &str,
    ) -> StoreResult<u64> {
        let mut args: Vec<Arg> = vec![
            id.into(),
            to_i64(generation).into(),
            to_i64(at).into(),
            usage.into(),
            to_i64(epoch).into(),
        ];
        let messages = chunk.iter().map(|m| json(id, "message", m));
        match self.backend() {
            Backend::Postgres => {
                let messages = messages.collect::<StoreResult<Vec<String>>>()?;
                args.push(json(id, "messages", &messages)?.into());
                self.db.writer().write_row(&APPEND_PG, args).await
            }
            Backend::Sqlite => {
                for m in messages {
                    args.push(m?.into());
                }
                let sql = append_of(chunk.len());
                on_writer!(&self.db, (sql, args), |p, (sql, args)| p
                    .execute(sql, args)
                    .await?)
            }
        }
    }

    /// Delete the checkpoints of ended tasks (the sweep's; an ended task's checkpoint is
    /// never read, and one statement deletes a sweep interval's worth of them). How many
    /// messages went.
    pub(super) async fn purge_ended_checkpoints(&self) -> StoreResult<u64> {
        on_writer!(&self.db, (), |p, _| p
            .execute(
                "DELETE FROM task_checkpoints WHERE NOT EXISTS \
                   (SELECT 1 FROM tasks WHERE id = task_checkpoints.task_id \
                      AND status IN ('pending', 'running'))",
                &[],
            )
            .await?)
    }

    /// [`purge_ended_checkpoints`](Self::purge_ended_checkpoints) beside a sweep or a
    /// recovery: a failure is logged, not reported as theirs (the rows are never read, and
    /// the next sweep deletes them).
    pub(super) async fn purge_ended_checkpoints_logged(&self) {
        if let Err(e) = self.purge_ended_checkpoints().await {
            tracing::warn!(error = %e, "store: ended tasks' checkpoints not deleted; the next sweep tries again");
        }
    }

    pub(super) async fn read_checkpoint_rows(&self, id: &str) -> StoreResult<Option<Checkpoint>> {
        let rows: Vec<(i64, String, String)> = self
            .db
            .fetch(
                "SELECT generation, message, usage FROM task_checkpoints WHERE task_id = $1 \
                   AND generation = (SELECT MAX(generation) FROM task_checkpoints \
                                     WHERE task_id = $1) \
                   AND EXISTS (SELECT 1 FROM tasks WHERE id = $1 \
                                 AND status IN ('pending', 'running')) \
                 ORDER BY seq",
                vec![id.into()],
            )
            .await?
            .iter()
            .map(|r| Ok::<_, StoreError>((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .collect::<Result<_, _>>()?;
        let corrupt = |reason: String| StoreError::Corrupt {
            id: id.to_string(),
            reason,
        };
        let mut cp = Checkpoint::default();
        for (i, (generation, message, usage)) in rows.iter().enumerate() {
            cp.generation = u64::try_from(*generation).unwrap_or(0);
            cp.messages.push(
                serde_json::from_str(message)
                    .map_err(|e| corrupt(format!("checkpoint message {i}: {e}")))?,
            );
            if i + 1 == rows.len() {
                cp.usage = serde_json::from_str(usage)
                    .map_err(|e| corrupt(format!("checkpoint usage: {e}")))?;
            }
        }
        Ok(Some(cp).filter(|c| !c.messages.is_empty()))
    }
}
