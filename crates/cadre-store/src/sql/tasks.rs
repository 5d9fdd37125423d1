//! Task records: creation, queries, the state machine's conditional `UPDATE`, cancellation
//! requests and delivery bookkeeping.

use super::conn::{Arg, Row, Shared};
use super::rows::{TASK_COLS, tasks_sorted};
use super::{Db, SqlStore, now_ms};
use crate::error::{StoreError, StoreResult};
use crate::model::{BackgroundSummary, NewTask, TaskFilter, TaskRecord, Transition};
use cadre_types::TaskStatus;
use std::sync::LazyLock;

/// The state rules as one conditional update. `$2` is the requested status.
///
/// - terminal states never change: only `pending`/`running` rows match;
/// - `pending → running`, and `pending | running →` any terminal state;
/// - once `cancel_requested` is set, only terminal states may be written;
/// - every accepted transition bumps `updated_at`;
/// - a fenced write (`$13`) is accepted only at the task's owner epoch;
/// - `$14` marks the result delivered with the write (its waiting parent takes it).
///
/// Fields bound as NULL keep their stored value. The sets of states are spelled as `OR`s,
/// not `IN (…)` lists: SQLite builds a temporary b-tree for a constant `IN` list at each
/// execution, which cost this statement, run twice per task, a sixth of its time.
///
/// `many` is the same rule for many rows (PostgreSQL), their values unnested as `u`.
static TRANSITION: Shared = Shared {
    one: "UPDATE tasks SET status = $2, updated_at = $3, \
           result = COALESCE($4, result), error = COALESCE($5, error), \
           end_state = COALESCE($6, end_state), input_tokens = COALESCE($7, input_tokens), \
           output_tokens = COALESCE($8, output_tokens), \
           cached_input_tokens = COALESCE($9, cached_input_tokens), \
           cache_write_tokens = COALESCE($10, cache_write_tokens), \
           cost_nano_usd = COALESCE($11, cost_nano_usd), \
           unpriced_calls = COALESCE($12, unpriced_calls), \
           delivered = CASE WHEN $14 THEN TRUE ELSE delivered END, \
           turns = COALESCE($15, turns) \
         WHERE id = $1 \
           AND ($13 IS NULL OR owner_epoch = $13) \
           AND (status = 'pending' OR status = 'running') \
           AND (($2 = 'running' AND status = 'pending') \
                OR $2 = 'completed' OR $2 = 'failed' OR $2 = 'cancelled') \
           AND (NOT cancel_requested OR $2 = 'completed' OR $2 = 'failed' OR $2 = 'cancelled')",
    many: "UPDATE tasks t SET status = u.status, updated_at = u.at, \
           result = COALESCE(u.result, t.result), error = COALESCE(u.error, t.error), \
           end_state = COALESCE(u.end_state, t.end_state), \
           input_tokens = COALESCE(u.input_tokens, t.input_tokens), \
           output_tokens = COALESCE(u.output_tokens, t.output_tokens), \
           cached_input_tokens = COALESCE(u.cached_input_tokens, t.cached_input_tokens), \
           cache_write_tokens = COALESCE(u.cache_write_tokens, t.cache_write_tokens), \
           cost_nano_usd = COALESCE(u.cost_nano_usd, t.cost_nano_usd), \
           unpriced_calls = COALESCE(u.unpriced_calls, t.unpriced_calls), \
           delivered = CASE WHEN u.deliver THEN TRUE ELSE t.delivered END, \
           turns = COALESCE(u.turns, t.turns) \
         FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::text[], $6::text[], \
                     $7::int8[], $8::int8[], $9::int8[], $10::int8[], $11::int8[], $12::int8[], \
                     $13::int8[], $14::bool[], $15::int8[]) \
           AS u(id, status, at, result, error, end_state, input_tokens, output_tokens, \
                cached_input_tokens, cache_write_tokens, cost_nano_usd, unpriced_calls, epoch, \
                deliver, turns) \
         WHERE t.id = u.id \
           AND (u.epoch IS NULL OR t.owner_epoch = u.epoch) \
           AND (t.status = 'pending' OR t.status = 'running') \
           AND ((u.status = 'running' AND t.status = 'pending') \
                OR u.status IN ('completed', 'failed', 'cancelled')) \
           AND (NOT t.cancel_requested OR u.status IN ('completed', 'failed', 'cancelled')) \
         RETURNING t.id",
};

/// [`TRANSITION`] on SQLite, the task's row returned as it stands after the write: what a
/// waiter for the task's end would otherwise read back at once.
static TRANSITION_RETURNING: LazyLock<String> =
    LazyLock::new(|| format!("{} RETURNING {TASK_COLS}", TRANSITION.one));

/// A new task, `pending` or `running`; `many` the same for many rows (PostgreSQL).
pub(super) static INSERT: Shared = Shared {
    one: "INSERT INTO tasks (id, agent_id, parent_agent_id, parent_session_id, \
           child_session_id, user_id, status, prompt, description, cancel_requested, background, \
           delivered, created_at, updated_at, owner_node, owner_instance, transport, \
           remote_headers, on_orphan, depth, parent_call_id, trace_parent) \
         VALUES ($1, $2, $3, $4, $5, $6, $18, $7, $8, FALSE, $9, $10, $11, $11, $12, $13, \
           $14, $15, $16, $17, $19, $20)",
    many: "INSERT INTO tasks (id, agent_id, parent_agent_id, parent_session_id, \
           child_session_id, user_id, status, prompt, description, cancel_requested, background, \
           delivered, created_at, updated_at, owner_node, owner_instance, transport, \
           remote_headers, on_orphan, depth, parent_call_id, trace_parent) \
         SELECT u.id, u.agent_id, u.parent_agent_id, u.parent_session_id, u.child_session_id, \
           u.user_id, u.status, u.prompt, u.description, FALSE, u.background, u.delivered, \
           u.at, u.at, u.owner_node, u.owner_instance, u.transport, u.remote_headers, \
           u.on_orphan, u.depth, u.parent_call_id, u.trace_parent \
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
                     $7::text[], $8::text[], $9::bool[], $10::bool[], $11::int8[], $12::text[], \
                     $13::text[], $14::text[], $15::text[], $16::text[], $17::int8[], $18::text[], \
                     $19::text[], $20::text[]) \
           AS u(id, agent_id, parent_agent_id, parent_session_id, child_session_id, user_id, \
                prompt, description, background, delivered, at, owner_node, owner_instance, \
                transport, remote_headers, on_orphan, depth, status, parent_call_id, \
                trace_parent) \
         RETURNING id",
};

/// A task's result delivered to its parent (each task's on its own: the parent of a live
/// child reads its answer by itself).
static DELIVERED: Shared = Shared {
    one: "UPDATE tasks SET delivered = TRUE WHERE id = $1 AND NOT delivered",
    many: "UPDATE tasks t SET delivered = TRUE FROM unnest($1::text[]) AS u(id) \
           WHERE t.id = u.id AND NOT t.delivered RETURNING t.id",
};

/// A task by id. The statements that name [`TASK_COLS`] are made once, not at each call.
pub(super) static GET: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {TASK_COLS} FROM tasks WHERE id = $1"));

/// Tasks by id, the ids as an array (PostgreSQL's coalesced reads, [`super::gets`]).
pub(super) static GET_MANY: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {TASK_COLS} FROM tasks WHERE id = ANY($1::text[])"));

/// The same on SQLite, the ids as a JSON array.
pub(super) static GET_MANY_SQLITE: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {TASK_COLS} FROM tasks WHERE id IN (SELECT value FROM json_each($1))")
});

/// A session's background totals: open, finished, finished and not delivered.
const SUMMARY_COUNTS: &str = "SELECT \
       COALESCE(SUM(CASE WHEN status IN ('pending', 'running') THEN 1 ELSE 0 END), 0), \
       COALESCE(SUM(CASE WHEN status IN ('pending', 'running') THEN 0 ELSE 1 END), 0), \
       COALESCE(SUM(CASE WHEN status IN ('pending', 'running') OR delivered THEN 0 ELSE 1 END), 0) \
     FROM tasks WHERE parent_session_id = $1 AND background";

/// A session's finished background tasks not delivered yet (read only: the parent marks
/// them delivered once its session records them).
static UNDELIVERED_FINISHED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {TASK_COLS} FROM tasks \
         WHERE parent_session_id = $1 AND background AND NOT delivered \
           AND (status = 'completed' OR status = 'failed' OR status = 'cancelled')"
    )
});

/// One finished task of a session whose result was not delivered yet, marked delivered
/// (SQLite; PostgreSQL reads it and joins the delivery to its batch's shared statement).
static TAKE_ONE_FINISHED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE tasks SET delivered = TRUE \
         WHERE id = $1 AND parent_session_id = $2 AND NOT delivered \
           AND (status = 'completed' OR status = 'failed' OR status = 'cancelled') \
         RETURNING {TASK_COLS}"
    )
});

/// One finished task of a session, marked delivered whether or not it was, as stored
/// (SQLite; PostgreSQL reads it and joins a delivery to its batch's shared statement).
static DELIVER_FINISHED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE tasks SET delivered = TRUE \
         WHERE id = $1 AND parent_session_id = $2 \
           AND (status = 'completed' OR status = 'failed' OR status = 'cancelled') \
         RETURNING {TASK_COLS}"
    )
});

/// The writes every task makes, prepared on each PostgreSQL connection as it opens: for
/// many rows. (Not for one: PostgreSQL cannot tell some of their values' types before they
/// are bound, as in `$13 IS NULL`.)
pub(super) fn hot_writes_pg() -> Vec<String> {
    [INSERT.many, TRANSITION.many, DELIVERED.many]
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// The reads every task or turn makes, prepared on each PostgreSQL connection as it opens.
pub(super) fn hot_reads_pg() -> Vec<String> {
    vec![
        GET.clone(),
        GET_MANY.clone(),
        SUMMARY_COUNTS.to_owned(),
        UNDELIVERED_FINISHED.clone(),
    ]
}

/// The writes every task makes, prepared by SQLite's writer as it opens: one row each, as
/// SQLite runs them.
pub(super) fn hot_writes_sqlite() -> Vec<String> {
    [INSERT.one, TRANSITION.one, DELIVERED.one]
        .into_iter()
        .map(str::to_owned)
        .chain([TRANSITION_RETURNING.clone(), DELIVER_FINISHED.clone()])
        .chain(super::children::hot_writes_sqlite())
        .chain(super::checkpoints::hot_writes_sqlite())
        .collect()
}

/// The reads every task or turn makes, prepared by each SQLite reader as it opens.
pub(super) fn hot_reads_sqlite() -> Vec<String> {
    vec![
        GET.clone(),
        GET_MANY_SQLITE.clone(),
        SUMMARY_COUNTS.to_owned(),
        UNDELIVERED_FINISHED.clone(),
    ]
}

/// The values [`TRANSITION`]'s statements bind for `t` written to task `id`.
fn transition_args(id: &str, t: Transition) -> Vec<Arg> {
    let u = t.usage;
    vec![
        id.into(),
        t.to.as_str().into(),
        now_ms().into(),
        t.result.into(),
        t.error.into(),
        t.end_state.into(),
        u.map(|u| tokens(u.input_tokens)).into(),
        u.map(|u| tokens(u.output_tokens)).into(),
        u.map(|u| tokens(u.cached_input_tokens)).into(),
        u.map(|u| tokens(u.cache_write_tokens)).into(),
        u.map(|u| tokens(u.cost_nano_usd)).into(),
        u.map(|u| tokens(u.unpriced_calls)).into(),
        t.epoch.map(tokens).into(),
        t.deliver.into(),
        t.turns.map(tokens).into(),
    ]
}

fn tokens(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl SqlStore {
    /// Insert `t`. Only its row's values are held while the write waits (a fan-out's calls
    /// all wait here at once); the record is made once the row is stored.
    pub(super) async fn create_task(&self, t: &NewTask) -> StoreResult<TaskRecord> {
        let now = now_ms();
        match self
            .db
            .writer()
            .write_row(&INSERT, self.insert_args(t, now)?)
            .await
        {
            Ok(_) => Ok(self.created(t, now)),
            Err(e) if e.is_unique_violation() => Err(StoreError::DuplicateTask(t.id.clone())),
            Err(e) => Err(e),
        }
    }

    /// The values [`INSERT`] binds for `t` created at `now`.
    pub(super) fn insert_args(&self, t: &NewTask, now: i64) -> StoreResult<Vec<Arg>> {
        let headers_json =
            serde_json::to_string(&t.stored_headers()).map_err(|e| StoreError::Corrupt {
                id: t.id.clone(),
                reason: format!("remote_headers: {e}"),
            })?;
        Ok(vec![
            (&t.id).into(),
            (&t.agent_id).into(),
            (&t.parent_agent_id).into(),
            (&t.parent_session_id).into(),
            (&t.child_session_id).into(),
            (&t.user_id).into(),
            (&t.prompt).into(),
            (&t.description).into(),
            t.background.into(),
            t.delivered().into(),
            now.into(),
            self.node.as_str().into(),
            (&self.instance).into(),
            t.transport.to_stored().into(),
            headers_json.into(),
            t.on_orphan.as_str().into(),
            i64::from(t.depth).into(),
            t.status().as_str().into(),
            (&t.parent_call_id).into(),
            (&t.trace_parent).into(),
        ])
    }

    /// The record of `t`, stored at `now`.
    pub(super) fn created(&self, t: &NewTask, now: i64) -> TaskRecord {
        t.clone().into_record(
            self.node.as_str(),
            &self.instance,
            u64::try_from(now).unwrap_or(0),
        )
    }

    pub(super) async fn get_task(&self, id: &str) -> StoreResult<Option<TaskRecord>> {
        let row = self.db.gets().get(id).await?;
        row.as_ref().map(Row::task).transpose()
    }

    pub(super) async fn list_tasks(&self, f: &TaskFilter) -> StoreResult<Vec<TaskRecord>> {
        let mut sql = format!("SELECT {TASK_COLS} FROM tasks WHERE 1 = 1");
        let mut n = 0;
        if f.session.is_some() {
            n += 1;
            sql.push_str(&format!(" AND parent_session_id = ${n}"));
        }
        if f.parent_agent.is_some() {
            n += 1;
            sql.push_str(&format!(" AND parent_agent_id = ${n}"));
        }
        if f.status.is_some() {
            n += 1;
            sql.push_str(&format!(" AND status = ${n}"));
        }
        if f.served_task.is_some() {
            n += 1;
            sql.push_str(&format!(" AND served_task_id = ${n}"));
        }
        if f.caller_id.is_some() {
            n += 1;
            sql.push_str(&format!(" AND caller_task_id = ${n}"));
        }
        sql.push_str(if f.newest_first {
            " ORDER BY created_at DESC, id DESC"
        } else {
            " ORDER BY created_at, id"
        });
        if let Some(limit) = f.limit {
            sql.push_str(&format!(" LIMIT {limit}"));
        }
        let args: Vec<Arg> = [
            f.session.as_deref(),
            f.parent_agent.as_deref(),
            f.status.map(TaskStatus::as_str),
            f.served_task.as_deref(),
            f.caller_id.as_deref(),
        ]
        .into_iter()
        .flatten()
        .map(Arg::from)
        .collect();
        tasks_sorted(&self.db.fetch(&sql, args).await?).map(|mut v| {
            f.sort_turns(&mut v);
            if f.newest_first {
                v.reverse();
            }
            v
        })
    }

    /// Two statements: the totals, and the newest open tasks (both on the session index).
    pub(super) async fn summary(
        &self,
        session: &str,
        limit: usize,
    ) -> StoreResult<BackgroundSummary> {
        let open = format!(
            "SELECT {TASK_COLS} FROM tasks WHERE parent_session_id = $1 AND background \
               AND status IN ('pending', 'running') ORDER BY created_at DESC, id DESC LIMIT $2"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let total = |v: i64| usize::try_from(v).unwrap_or(0);
        let counts = self.db.fetch(SUMMARY_COUNTS, vec![session.into()]).await?;
        let row = counts.first().ok_or_else(|| StoreError::Corrupt {
            id: session.to_string(),
            reason: "the summary's totals returned no row".into(),
        })?;
        let rows = self
            .db
            .fetch(&open, vec![session.into(), limit.into()])
            .await?;
        Ok(BackgroundSummary {
            open: rows.iter().map(Row::task).collect::<StoreResult<_>>()?,
            open_total: total(row.try_get(0)?),
            finished_total: total(row.try_get(1)?),
            undelivered: total(row.try_get(2)?),
        })
    }

    /// Status and cancel flag of a task, for explaining a refused write.
    async fn state_of(&self, id: &str) -> StoreResult<Option<(TaskStatus, bool)>> {
        Ok(self.fencing_state_of(id).await?.map(|(s, c, _)| (s, c)))
    }

    /// Status, cancel flag and owner epoch of a task.
    async fn fencing_state_of(&self, id: &str) -> StoreResult<Option<(TaskStatus, bool, u64)>> {
        let row = on_writer!(&self.db, vec![Arg::from(id)], |p, args| {
            let rows = p
                .fetch(
                    "SELECT status, cancel_requested, owner_epoch FROM tasks WHERE id = $1",
                    args,
                )
                .await?;
            rows.first()
                .map(|r| {
                    Ok::<_, StoreError>((
                        r.try_get::<String, _>(0)?,
                        r.try_get::<bool, _>(1)?,
                        r.try_get::<i64, _>(2)?,
                    ))
                })
                .transpose()?
        })?;
        row.map(|(s, c, e)| {
            TaskStatus::parse(&s)
                .map(|st| (st, c, u64::try_from(e).unwrap_or(0)))
                .ok_or_else(|| StoreError::Corrupt {
                    id: id.to_string(),
                    reason: format!("unknown status {s:?}"),
                })
        })
        .transpose()
    }

    pub(super) async fn transition_task(&self, id: &str, t: Transition) -> StoreResult<()> {
        let (to, epoch) = (t.to, t.epoch);
        let affected = self
            .db
            .writer()
            .write_row(&TRANSITION, transition_args(id, t))
            .await?;
        if affected == 1 {
            return Ok(());
        }
        Err(self.refusal(id, to, epoch).await)
    }

    /// [`Self::transition_task`], and the task as stored after it: on SQLite from the
    /// write itself; PostgreSQL, whose writes of a batch share one statement, has none.
    pub(super) async fn transition_task_returning(
        &self,
        id: &str,
        t: Transition,
    ) -> StoreResult<Option<TaskRecord>> {
        if let Db::Postgres { .. } = &self.db {
            return self.transition_task(id, t).await.map(|()| None);
        }
        let (to, epoch) = (t.to, t.epoch);
        let row = self
            .update_returning_task(&TRANSITION_RETURNING, transition_args(id, t))
            .await?;
        match row {
            Some(r) => Ok(Some(r)),
            None => Err(self.refusal(id, to, epoch).await),
        }
    }

    /// Why a transition of task `id` to `to` (fenced at `epoch`) changed nothing.
    async fn refusal(&self, id: &str, to: TaskStatus, epoch: Option<u64>) -> StoreError {
        match self.fencing_state_of(id).await {
            Err(e) => e,
            Ok(None) => StoreError::NotFound(id.to_string()),
            Ok(Some((from, _, current)))
                if !from.is_terminal() && epoch.is_some_and(|e| e != current) =>
            {
                StoreError::Fenced {
                    id: id.to_string(),
                    epoch: epoch.unwrap_or(0),
                    current,
                }
            }
            Ok(Some((from, cancel_requested, _))) => StoreError::Refused {
                id: id.to_string(),
                from,
                to,
                cancel_requested,
            },
        }
    }

    pub(super) async fn request_cancel_task(&self, id: &str) -> StoreResult<TaskStatus> {
        let args = vec![Arg::from(id), now_ms().into()];
        let row = on_writer!(&self.db, args, |p, args| {
            let rows = p
                .fetch(
                    "UPDATE tasks SET cancel_requested = TRUE, updated_at = $2 \
                     WHERE id = $1 AND status IN ('pending', 'running') RETURNING status",
                    args,
                )
                .await?;
            rows.first()
                .map(|r| r.try_get::<String, _>(0))
                .transpose()?
        })?;
        if let Some(s) = row.as_deref().and_then(TaskStatus::parse) {
            return Ok(s);
        }
        // Not updated: the task is terminal (which never changes again) or missing.
        match self.state_of(id).await? {
            Some((st, _)) => Ok(st),
            None => Err(StoreError::NotFound(id.to_string())),
        }
    }

    /// Run a one-row `UPDATE ... WHERE id = $1 ...` binding `id` and `arg`; true when a row
    /// changed, `NotFound` when the task does not exist.
    async fn update_one(
        &self,
        sql: &'static str,
        id: &str,
        arg: Option<&str>,
    ) -> StoreResult<bool> {
        let args: Vec<Arg> = std::iter::once(id.into())
            .chain(arg.map(Arg::from))
            .collect();
        let affected = on_writer!(&self.db, args, |p, args| p.execute(sql, args).await?)?;
        self.changed_or_missing(id, affected).await
    }

    /// Whether an update of task `id` that changed `affected` rows changed it; `NotFound`
    /// when the task does not exist.
    async fn changed_or_missing(&self, id: &str, affected: u64) -> StoreResult<bool> {
        if affected > 0 {
            return Ok(true);
        }
        match self.state_of(id).await? {
            Some(_) => Ok(false),
            None => Err(StoreError::NotFound(id.to_string())),
        }
    }

    pub(super) async fn set_end_state_task(&self, id: &str, end_state: &str) -> StoreResult<bool> {
        self.update_one(
            "UPDATE tasks SET end_state = $2 WHERE id = $1 AND end_state IS NULL",
            id,
            Some(end_state),
        )
        .await
    }

    pub(super) async fn set_remote_id_task(&self, id: &str, remote: &str) -> StoreResult<bool> {
        self.update_one(
            "UPDATE tasks SET remote_task_id = $2 WHERE id = $1 AND remote_task_id IS NULL",
            id,
            Some(remote),
        )
        .await
    }

    pub(super) async fn promote_task(&self, id: &str) -> StoreResult<bool> {
        self.update_one(
            "UPDATE tasks SET background = TRUE, delivered = FALSE WHERE id = $1 AND NOT background",
            id,
            None,
        )
        .await
    }

    pub(super) async fn mark_delivered_task(&self, id: &str) -> StoreResult<bool> {
        let affected = self
            .db
            .writer()
            .write_row(&DELIVERED, vec![id.into()])
            .await?;
        self.changed_or_missing(id, affected).await
    }

    /// One statement per 500 ids.
    pub(super) async fn mark_delivered_tasks(&self, ids: &[String]) -> StoreResult<u64> {
        let mut total = 0;
        for chunk in ids.chunks(super::ID_CHUNK) {
            let sql = format!(
                "UPDATE tasks SET delivered = TRUE WHERE NOT delivered AND id IN ({})",
                super::placeholders(1, chunk.len())
            );
            let args: Vec<Arg> = chunk.iter().map(Arg::from).collect();
            total += on_writer!(&self.db, (sql, args), |p, (sql, args)| p
                .execute(sql, args)
                .await?)?;
        }
        Ok(total)
    }

    /// On SQLite one write where a read and a write were: the task's row comes back from its
    /// update. On PostgreSQL the read runs on the pool, beside the writer, and the delivery
    /// joins the batch's one statement for every delivery: as one write job, each take would
    /// be a round trip of its own on the writer's one connection.
    pub(super) async fn take_finished_one(
        &self,
        id: &str,
        session: &str,
    ) -> StoreResult<Option<TaskRecord>> {
        if let Db::Postgres { .. } = &self.db {
            return crate::store::take_by_reading(self, id, session).await;
        }
        self.update_returning_task(&TAKE_ONE_FINISHED, vec![id.into(), session.into()])
            .await
    }

    /// [`crate::TaskStore::deliver_finished`]: on SQLite one write; on PostgreSQL a read
    /// and, when it was not delivered, the batch's shared delivery.
    pub(super) async fn deliver_finished_one(
        &self,
        id: &str,
        session: &str,
    ) -> StoreResult<Option<TaskRecord>> {
        if let Db::Postgres { .. } = &self.db {
            return crate::store::deliver_by_reading(self, id, session).await;
        }
        self.update_returning_task(&DELIVER_FINISHED, vec![id.into(), session.into()])
            .await
    }

    /// Run an `UPDATE … RETURNING` of one task on the writer: the task as it stands after,
    /// `None` when no row matched.
    async fn update_returning_task(
        &self,
        sql: &'static LazyLock<String>,
        args: Vec<Arg>,
    ) -> StoreResult<Option<TaskRecord>> {
        let sql = sql.as_str();
        on_writer!(&self.db, (sql, args), |p, (sql, args)| {
            p.fetch(sql, args)
                .await?
                .first()
                .map(Row::task)
                .transpose()?
        })
    }

    pub(super) async fn undelivered_finished(&self, session: &str) -> StoreResult<Vec<TaskRecord>> {
        let rows = self
            .db
            .fetch(UNDELIVERED_FINISHED.as_str(), vec![Arg::from(session)])
            .await?;
        tasks_sorted(&rows)
    }
}

#[cfg(test)]
mod tests {
    use crate::{NewTask, NodeId, TaskRecord};

    #[tokio::test]
    async fn creating_a_task_holds_no_record_while_the_write_waits() {
        // A fan-out's `task` calls all wait in this future at once, for the one writer.
        let dir = tempfile::tempdir().unwrap();
        let store = super::super::open_sqlite(&dir.path().join("t.db"), NodeId::new("n"))
            .await
            .unwrap();
        let task = NewTask::new("a", "s", "p");
        let creating = store.create_task(&task);
        let size = std::mem::size_of_val(&creating);
        assert!(
            size < std::mem::size_of::<TaskRecord>(),
            "creating a task holds {size} bytes"
        );
        drop(creating);
        store.close().await;
    }

    #[tokio::test]
    async fn every_statement_sqlite_prepares_ahead_prepares_on_its_schema() {
        // One that did not would be parsed again at each connection's first use, silently.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = super::super::open_sqlite(&path, NodeId::new("n"))
            .await
            .unwrap();
        let conn =
            super::super::conn::SqliteConn::open(&path, std::time::Duration::from_secs(1), 64)
                .unwrap();
        assert_eq!(conn.prepare_ahead(&super::hot_writes_sqlite()), 0);
        assert_eq!(conn.prepare_ahead(&super::hot_reads_sqlite()), 0);
        // And the check can fail: PostgreSQL's statements for many rows are not SQLite's.
        assert_eq!(conn.prepare_ahead(&super::hot_writes_pg()), 3);
        drop(conn);
        store.close().await;
    }
}
