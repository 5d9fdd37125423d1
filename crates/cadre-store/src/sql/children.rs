//! Live children: persisted `agent_spawn` children, found by key or (case-insensitive) label.
//! Label uniqueness per parent session is enforced by the unique index
//! `live_children (parent_session_id, lower(label))`.

use super::SqlStore;
use super::conn::{Arg, Row, Shared};
use super::rows::LIVE_COLS;
use crate::error::{StoreError, StoreResult};
use crate::model::LiveChildEntry;

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

/// The writes every `agent_spawn` makes, prepared by SQLite's writer as it opens.
pub(super) fn hot_writes_sqlite() -> [String; 1] {
    [INSERT.one.to_owned()]
}

impl SqlStore {
    pub(super) async fn insert_child(&self, c: &LiveChildEntry) -> StoreResult<()> {
        let args: Vec<Arg> = vec![
            (&c.agent_key).into(),
            (&c.parent_session_id).into(),
            (&c.label).into(),
            (&c.agent_id).into(),
            (&c.child_session_id).into(),
            i64::from(c.depth).into(),
            i64::try_from(c.created_at).unwrap_or(i64::MAX).into(),
        ];
        let res = self.db.writer().write_row(&INSERT, args).await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if e.is_unique_violation() => {
                if self.child_by_key_any(&c.agent_key).await? {
                    Err(StoreError::DuplicateLiveChild(c.agent_key.clone()))
                } else {
                    Err(StoreError::LabelInUse(c.label.clone().unwrap_or_default()))
                }
            }
            Err(e) => Err(e),
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
