//! Live children: persisted `agent_spawn` children, found by key or (case-insensitive) label.
//! Label uniqueness per parent session is enforced by the unique index
//! `live_children (parent_session_id, lower(label))`.

use super::conn::{Arg, Row, Shared};
use super::rows::LIVE_COLS;
use super::{Db, SqlStore, now_ms};
use crate::error::{StoreError, StoreResult};
use crate::model::{LiveChildEntry, NewTask, TaskRecord};

/// A live child; `many` the same for many rows (PostgreSQL).
static INSERT: Shared = Shared {
    one: "INSERT INTO live_children (agent_key, parent_session_id, label, agent_id, \
           child_session_id, depth, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    many: "INSERT INTO live_children (agent_key, parent_session_id, label, agent_id, \
           child_session_id, depth, created_at) \
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
                              $6::int8[], $7::int8[]) \
         RETURNING agent_key",
};

/// A live child by key: taken back when its first task could not be stored.
const DELETE: &str = "DELETE FROM live_children WHERE agent_key = $1";

/// The writes every `agent_spawn` makes, prepared by SQLite's writer as it opens.
pub(super) fn hot_writes_sqlite() -> [String; 1] {
    [INSERT.one.to_owned()]
}

/// Which row of a live child's creation failed.
enum Failed {
    Child(StoreError),
    Task(StoreError),
}

/// The values [`INSERT`] binds for `c`.
fn child_args(c: &LiveChildEntry) -> Vec<Arg> {
    vec![
        (&c.agent_key).into(),
        (&c.parent_session_id).into(),
        (&c.label).into(),
        (&c.agent_id).into(),
        (&c.child_session_id).into(),
        i64::from(c.depth).into(),
        i64::try_from(c.created_at).unwrap_or(i64::MAX).into(),
    ]
}

impl SqlStore {
    pub(super) async fn insert_child(&self, c: &LiveChildEntry) -> StoreResult<()> {
        match self.db.writer().write_row(&INSERT, child_args(c)).await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.child_refused(c, e).await),
        }
    }

    /// What a failed insert of live child `c` means: a taken label or key, or `e` itself.
    async fn child_refused(&self, c: &LiveChildEntry, e: StoreError) -> StoreError {
        if !e.is_unique_violation() {
            return e;
        }
        match self.child_by_key_any(&c.agent_key).await {
            Ok(true) => StoreError::DuplicateLiveChild(c.agent_key.clone()),
            Ok(false) => StoreError::LabelInUse(c.label.clone().unwrap_or_default()),
            Err(e) => e,
        }
    }

    /// [`crate::TaskStore::create_live`]. On SQLite one write, both rows or neither (a
    /// failed one takes the other back without failing the writer's batch); on
    /// PostgreSQL the two writes, each joining its batch's statement.
    pub(super) async fn insert_child_with_task(
        &self,
        c: &LiveChildEntry,
        t: &NewTask,
    ) -> StoreResult<TaskRecord> {
        if let Db::Postgres { .. } = &self.db {
            return crate::store::create_live_by_steps(self, c, t).await;
        }
        let now = now_ms();
        let args = (child_args(c), self.insert_args(t, now)?);
        let written = on_writer!(&self.db, args, |p, (child, task)| {
            // A refused statement leaves nothing of itself, so only a child whose task was
            // refused is taken back: two statements, where a savepoint made four.
            match p.execute(INSERT.one, child).await {
                Err(e) => Some(Failed::Child(e)),
                Ok(_) => match p.execute(super::tasks::INSERT.one, task).await {
                    Err(e) => {
                        p.execute(DELETE, &child[..1]).await?;
                        Some(Failed::Task(e))
                    }
                    Ok(_) => None,
                },
            }
        })?;
        match written {
            None => Ok(self.created(t, now)),
            Some(Failed::Child(e)) => Err(self.child_refused(c, e).await),
            Some(Failed::Task(e)) if e.is_unique_violation() => {
                Err(StoreError::DuplicateTask(t.id.clone()))
            }
            Some(Failed::Task(e)) => Err(e),
        }
    }

    async fn child_by_key_any(&self, key: &str) -> StoreResult<bool> {
        on_writer!(&self.db, vec![Arg::from(key)], |p, args| !p
            .fetch("SELECT 1 FROM live_children WHERE agent_key = $1", args)
            .await?
            .is_empty())
    }

    pub(super) async fn children_of(&self, session: &str) -> StoreResult<Vec<LiveChildEntry>> {
        let sql = format!(
            "SELECT {LIVE_COLS} FROM live_children WHERE parent_session_id = $1 \
             ORDER BY created_at, agent_key"
        );
        let rows = self.db.fetch(&sql, vec![session.into()]).await?;
        rows.iter().map(Row::live).collect()
    }

    pub(super) async fn child_where(
        &self,
        session: &str,
        condition: &str,
        value: &str,
    ) -> StoreResult<Option<LiveChildEntry>> {
        let sql = format!(
            "SELECT {LIVE_COLS} FROM live_children WHERE parent_session_id = $1 AND {condition}"
        );
        let rows = self
            .db
            .fetch(&sql, vec![session.into(), value.into()])
            .await?;
        rows.first().map(Row::live).transpose()
    }

    pub(super) async fn remove_child(&self, session: &str, key: &str) -> StoreResult<bool> {
        let args = vec![Arg::from(session), key.into()];
        let removed = on_writer!(&self.db, args, |p, args| p
            .execute(
                "DELETE FROM live_children WHERE parent_session_id = $1 AND agent_key = $2",
                args,
            )
            .await?)?;
        Ok(removed > 0)
    }
}
