//! Live children: persisted `agent_spawn` children, found by key or (case-insensitive) label.
//! Label uniqueness per parent session is enforced by the unique index
//! `live_children (parent_session_id, lower(label))`.

use super::rows::{LIVE_COLS, RecordRow};
use super::{SqlStore, is_unique_violation};
use crate::error::{StoreError, StoreResult};
use crate::model::LiveChildEntry;

impl SqlStore {
    pub(super) async fn insert_child(&self, c: &LiveChildEntry) -> StoreResult<()> {
        let res = on_writer!(&self.db, c.clone(), |p, c| {
            sqlx::query(
                "INSERT INTO live_children (agent_key, parent_session_id, label, agent_id, \
                   child_session_id, depth, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&c.agent_key)
            .bind(&c.parent_session_id)
            .bind(&c.label)
            .bind(&c.agent_id)
            .bind(&c.child_session_id)
            .bind(i64::from(c.depth))
            .bind(i64::try_from(c.created_at).unwrap_or(i64::MAX))
            .execute(p)
            .await?
            .rows_affected()
        });
        match res {
            Ok(_) => Ok(()),
            Err(StoreError::Db(e)) if is_unique_violation(&e) => {
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
        on_writer!(&self.db, key.to_owned(), |p, key| {
            sqlx::query("SELECT 1 FROM live_children WHERE agent_key = $1")
                .bind(key)
                .fetch_optional(p)
                .await?
                .is_some()
        })
    }

    pub(super) async fn children_of(&self, session: &str) -> StoreResult<Vec<LiveChildEntry>> {
        let sql = format!(
            "SELECT {LIVE_COLS} FROM live_children WHERE parent_session_id = $1 \
             ORDER BY created_at, agent_key"
        );
        on_reader!(&self.db, p => sqlx::query(&sql)
            .bind(session)
            .fetch_all(p)
            .await?
            .iter()
            .map(super::rows::RecordRow::live)
            .collect())
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
        on_reader!(&self.db, p => sqlx::query(&sql)
            .bind(session)
            .bind(value)
            .fetch_optional(p)
            .await?
            .map(|r| r.live())
            .transpose())
    }

    pub(super) async fn remove_child(&self, session: &str, key: &str) -> StoreResult<bool> {
        let args = (session.to_owned(), key.to_owned());
        let removed = on_writer!(&self.db, args, |p, (session, key)| {
            sqlx::query("DELETE FROM live_children WHERE parent_session_id = $1 AND agent_key = $2")
                .bind(session)
                .bind(key)
                .execute(p)
                .await?
                .rows_affected()
        })?;
        Ok(removed > 0)
    }
}
