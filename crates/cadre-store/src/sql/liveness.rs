//! Liveness: heartbeats of the owner, the sweeper that fails orphans, and restart recovery.
//!
//! The candidates of a sweep or a recovery are read first (their error message depends on
//! the row), then each is failed by a conditional `UPDATE` that re-checks the condition, so a
//! task that finished or was beaten in between is left alone.

use super::conn::{Arg, Row};
use super::rows::{TASK_COLS, tasks_sorted};
use super::{SqlStore, millis, now_ms};
use crate::error::{StoreError, StoreResult};
use crate::model::{TaskOwner, TaskRecord};
use crate::node::{NodeId, instance_alive};
use std::time::{Duration, UNIX_EPOCH};

/// One row of a task's owner history; a row already there is kept.
const OWNER_SQL: &str = "INSERT INTO task_owners (task_id, epoch, owner_node, owner_instance, since) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";

/// The error written by the sweeper.
pub fn executor_lost_message(last_seen_ms: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(last_seen_ms);
    format!(
        "executor lost: no heartbeat since {}",
        humantime::format_rfc3339_millis(t)
    )
}

/// The error written by restart recovery.
pub fn executor_died_message(node: &NodeId) -> String {
    format!("executor died: cadre restarted on {node}")
}

/// A heartbeat's arguments: the time it is written (`$1`: when the writer runs it, which a
/// writer waiting on another process's lock may do seconds after it was queued), then
/// `rest`.
fn beaten_now(rest: &[Arg]) -> Vec<Arg> {
    std::iter::once(Arg::from(now_ms()))
        .chain(rest.iter().cloned())
        .collect()
}

impl SqlStore {
    pub(super) async fn heartbeat_tasks(&self, node: &NodeId, ids: &[String]) -> StoreResult<u64> {
        let mut total = 0;
        for chunk in ids.chunks(super::ID_CHUNK) {
            let sql = format!(
                "UPDATE tasks SET heartbeat_at = $1 WHERE owner_node = $2 \
                 AND status IN ('pending', 'running') AND id IN ({})",
                super::placeholders(3, chunk.len())
            );
            let args: Vec<Arg> = std::iter::once(node.as_str().into())
                .chain(chunk.iter().map(Arg::from))
                .collect();
            total += on_writer!(&self.db, (sql, args), |p, (sql, args)| p
                .execute(sql, &beaten_now(args))
                .await?)?;
        }
        Ok(total)
    }

    pub(super) async fn heartbeat_owned_tasks(&self) -> StoreResult<u64> {
        let args = vec![Arg::from(self.node.as_str()), (&self.instance).into()];
        on_writer!(&self.db, args, |p, args| p
            .execute(
                "UPDATE tasks SET heartbeat_at = $1 WHERE owner_node = $2 \
                 AND owner_instance = $3 AND status IN ('pending', 'running')",
                &beaten_now(args),
            )
            .await?)
    }

    /// One conditional `UPDATE`: the epoch it matches is the fence, so a task another node
    /// adopted (or that ended) is left alone and answers false.
    pub(super) async fn renew_task(&self, id: &str, epoch: u64) -> StoreResult<bool> {
        let epoch = i64::try_from(epoch).unwrap_or(i64::MAX);
        let args = vec![Arg::from(id), epoch.into()];
        let n = on_writer!(&self.db, args, |p, args| p
            .execute(
                "UPDATE tasks SET heartbeat_at = $1 WHERE id = $2 AND owner_epoch = $3 \
                 AND status IN ('pending', 'running')",
                &beaten_now(args),
            )
            .await?)?;
        Ok(n == 1)
    }

    pub(super) async fn sweep_orphans(&self, orphan_timeout: Duration) -> StoreResult<Vec<String>> {
        let cutoff = now_ms().saturating_sub(millis(orphan_timeout));
        let candidates: Vec<(String, i64)> = self
            .db
            .fetch(
                "SELECT id, COALESCE(heartbeat_at, created_at) AS seen FROM tasks \
                 WHERE status IN ('pending', 'running') AND transport = 'local' \
                   AND on_orphan = 'fail' AND COALESCE(heartbeat_at, created_at) < $1",
                vec![cutoff.into()],
            )
            .await?
            .iter()
            .map(|r| Ok::<_, StoreError>((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, _>>()?;
        let mut swept = Vec::new();
        for (id, seen) in candidates {
            let msg = executor_lost_message(u64::try_from(seen).unwrap_or(0));
            let args = vec![
                Arg::from(&id),
                (&msg).into(),
                now_ms().into(),
                cutoff.into(),
            ];
            let n = on_writer!(&self.db, args, |p, args| p
                .execute(
                    "UPDATE tasks SET status = 'failed', error = $2, end_state = 'failed', \
                       updated_at = $3 \
                     WHERE id = $1 AND status IN ('pending', 'running') \
                       AND transport = 'local' AND on_orphan = 'fail' \
                       AND COALESCE(heartbeat_at, created_at) < $4",
                    args,
                )
                .await?)?;
            if n == 1 {
                tracing::warn!(task = %id, "{msg}");
                swept.push(id);
            }
        }
        Ok(swept)
    }

    pub(super) async fn recover(&self, node: &NodeId) -> StoreResult<Vec<String>> {
        let candidates: Vec<(String, Option<String>)> = self
            .db
            .fetch(
                "SELECT id, owner_instance FROM tasks WHERE owner_node = $1 \
                 AND transport = 'local' AND on_orphan = 'fail' \
                 AND status IN ('pending', 'running')",
                vec![node.as_str().into()],
            )
            .await?
            .iter()
            .map(|r| Ok::<_, StoreError>((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, _>>()?;
        let msg = executor_died_message(node);
        let mut failed = Vec::new();
        for (id, instance) in candidates {
            // A sibling process of the same node that is still running keeps its tasks.
            if instance
                .as_deref()
                .is_some_and(|i| i != self.instance && instance_alive(i))
            {
                continue;
            }
            let args = vec![
                Arg::from(&id),
                node.as_str().into(),
                (&msg).into(),
                now_ms().into(),
            ];
            let n = on_writer!(&self.db, args, |p, args| p
                .execute(
                    "UPDATE tasks SET status = 'failed', error = $3, end_state = 'failed', \
                       updated_at = $4 \
                     WHERE id = $1 AND owner_node = $2 AND on_orphan = 'fail' \
                       AND status IN ('pending', 'running')",
                    args,
                )
                .await?)?;
            if n == 1 {
                failed.push(id);
            }
        }
        Ok(failed)
    }

    pub(super) async fn orphans_to_adopt(
        &self,
        orphan_timeout: Duration,
    ) -> StoreResult<Vec<TaskRecord>> {
        let cutoff = now_ms().saturating_sub(millis(orphan_timeout));
        let sql = format!(
            "SELECT {TASK_COLS} FROM tasks WHERE status IN ('pending', 'running') \
               AND transport = 'local' AND on_orphan = 'resume' \
               AND COALESCE(heartbeat_at, created_at) < $1"
        );
        tasks_sorted(&self.db.fetch(&sql, vec![cutoff.into()]).await?)
    }

    /// The compare-and-swap of an adoption: one `UPDATE` that matches only the orphan as it
    /// was seen (its epoch), so of two nodes racing exactly one changes the row.
    pub(super) async fn adopt_task(
        &self,
        id: &str,
        seen_epoch: u64,
        orphan_timeout: Duration,
    ) -> StoreResult<Option<TaskRecord>> {
        let now = now_ms();
        let cutoff = now.saturating_sub(millis(orphan_timeout));
        let sql = format!(
            "UPDATE tasks SET owner_node = $3, owner_instance = $4, \
               owner_epoch = owner_epoch + 1, resumes = resumes + 1, heartbeat_at = $5, \
               updated_at = $5 \
             WHERE id = $1 AND owner_epoch = $2 AND status IN ('pending', 'running') \
               AND transport = 'local' AND on_orphan = 'resume' \
               AND COALESCE(heartbeat_at, created_at) < $6 \
             RETURNING {TASK_COLS}"
        );
        let epoch = i64::try_from(seen_epoch).unwrap_or(i64::MAX);
        let args = vec![
            Arg::from(id),
            epoch.into(),
            self.node.as_str().into(),
            (&self.instance).into(),
            now.into(),
            cutoff.into(),
        ];
        on_writer!(&self.db, (sql, args), |p, (sql, args)| {
            // The owner being replaced, for the history (read in the same transaction).
            let before = p
                .fetch(
                    "SELECT owner_node, owner_instance, created_at FROM tasks \
                     WHERE id = $1 AND owner_epoch = $2",
                    &args[..2],
                )
                .await?;
            let row = p.fetch(sql, args).await?;
            let adopted = row.first().map(Row::task).transpose()?;
            if let (Some(_), Some(before)) = (&adopted, before.first()) {
                let lost_node: String = before.try_get(0)?;
                let lost_instance: Option<String> = before.try_get(1)?;
                let created: i64 = before.try_get(2)?;
                let (node, instance) = (&args[2], &args[3]);
                for owner in [
                    [
                        args[0].clone(),
                        epoch.into(),
                        lost_node.as_str().into(),
                        lost_instance.as_deref().into(),
                        created.into(),
                    ],
                    [
                        args[0].clone(),
                        epoch.saturating_add(1).into(),
                        node.clone(),
                        instance.clone(),
                        now.into(),
                    ],
                ] {
                    p.execute(OWNER_SQL, &owner).await?;
                }
            }
            adopted
        })
    }

    /// One `UPDATE`: every active durable task of this node and process, at once.
    pub(super) async fn release_owned_tasks(&self) -> StoreResult<Vec<String>> {
        let args = vec![
            Arg::from(self.node.as_str()),
            (&self.instance).into(),
            now_ms().into(),
        ];
        let rows = on_writer!(&self.db, args, |p, args| p
            .fetch(
                "UPDATE tasks SET owner_epoch = owner_epoch + 1, owner_instance = NULL, \
                   heartbeat_at = 0, updated_at = $3 \
                 WHERE owner_node = $1 AND owner_instance = $2 \
                   AND status IN ('pending', 'running') AND transport = 'local' \
                   AND on_orphan = 'resume' \
                 RETURNING id",
                args,
            )
            .await?)?;
        rows.iter().map(|r| r.try_get(0)).collect()
    }

    pub(super) async fn owners_of(&self, id: &str) -> StoreResult<Vec<TaskOwner>> {
        let sql = "SELECT epoch, owner_node, owner_instance, since FROM task_owners \
                   WHERE task_id = $1 ORDER BY epoch";
        let owners: Vec<TaskOwner> = self
            .db
            .fetch(sql, vec![id.into()])
            .await?
            .iter()
            .map(|r| {
                Ok::<_, StoreError>(TaskOwner {
                    epoch: u64::try_from(r.try_get::<i64, _>(0)?).unwrap_or(0),
                    node: r.try_get(1)?,
                    instance: r.try_get(2)?,
                    since: u64::try_from(r.try_get::<i64, _>(3)?).unwrap_or(0),
                })
            })
            .collect::<Result<_, _>>()?;
        if !owners.is_empty() {
            return Ok(owners);
        }
        Ok(self
            .get_task(id)
            .await?
            .map(|r| vec![r.only_owner()])
            .unwrap_or_default())
    }
}
