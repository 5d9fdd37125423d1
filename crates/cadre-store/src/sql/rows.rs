//! Decoding rows (of either backend, as [`super::conn::Row`]s) into records.

use super::conn::Row;
use crate::error::{StoreError, StoreResult};
use crate::model::{LiveChildEntry, OrphanPolicy, ServedTurn, TaskRecord, Transport};
use cadre_types::TaskStatus;
use cadre_types::Usage;
use std::collections::BTreeMap;

/// Every column of `tasks`, in the order `SELECT` and `RETURNING` use.
pub(crate) const TASK_COLS: &str = "id, agent_id, parent_agent_id, parent_session_id, \
     child_session_id, user_id, status, prompt, description, result, error, end_state, \
     cancel_requested, background, delivered, created_at, updated_at, heartbeat_at, \
     owner_node, owner_instance, transport, remote_task_id, remote_headers, input_tokens, \
     output_tokens, cached_input_tokens, cache_write_tokens, cost_nano_usd, unpriced_calls, \
     owner_epoch, on_orphan, resumes, served_task_id, served_turn, served_message_id, \
     caller_task_id, \
     question, answer, depth";

/// Every column of `live_children`.
pub(crate) const LIVE_COLS: &str =
    "agent_key, parent_session_id, label, agent_id, child_session_id, depth, created_at";

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl Row {
    /// A `tasks` row selected with [`TASK_COLS`].
    pub(crate) fn task(&self) -> StoreResult<TaskRecord> {
        let id: String = self.try_get("id")?;
        let status: String = self.try_get("status")?;
        let status = TaskStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
            id: id.clone(),
            reason: format!("unknown status {status:?}"),
        })?;
        let headers: String = self.try_get("remote_headers")?;
        let remote_headers: BTreeMap<String, String> =
            serde_json::from_str(&headers).map_err(|e| StoreError::Corrupt {
                id: id.clone(),
                reason: format!("remote_headers: {e}"),
            })?;
        let transport: String = self.try_get("transport")?;
        let on_orphan: String = self.try_get("on_orphan")?;
        let on_orphan = OrphanPolicy::parse(&on_orphan).ok_or_else(|| StoreError::Corrupt {
            id: id.clone(),
            reason: format!("unknown on_orphan {on_orphan:?}"),
        })?;
        let served = self
            .try_get::<Option<String>, _>("served_task_id")?
            .map(|task_id| -> StoreResult<ServedTurn> {
                Ok(ServedTurn {
                    task_id,
                    turn: self
                        .try_get::<Option<i64>, _>("served_turn")?
                        .map_or(0, to_u64),
                    message_id: self.try_get("served_message_id")?,
                    caller_id: self.try_get("caller_task_id")?,
                })
            })
            .transpose()?;
        Ok(TaskRecord {
            served,
            question: self.try_get("question")?,
            answer: self.try_get("answer")?,
            agent_id: self.try_get("agent_id")?,
            parent_agent_id: self.try_get("parent_agent_id")?,
            parent_session_id: self.try_get("parent_session_id")?,
            child_session_id: self.try_get("child_session_id")?,
            user_id: self.try_get("user_id")?,
            status,
            prompt: self.try_get("prompt")?,
            description: self.try_get("description")?,
            result: self.try_get("result")?,
            error: self.try_get("error")?,
            end_state: self.try_get("end_state")?,
            cancel_requested: self.try_get("cancel_requested")?,
            background: self.try_get("background")?,
            delivered: self.try_get("delivered")?,
            created_at: to_u64(self.try_get("created_at")?),
            updated_at: to_u64(self.try_get("updated_at")?),
            heartbeat_at: self.try_get::<Option<i64>, _>("heartbeat_at")?.map(to_u64),
            owner_node: self.try_get("owner_node")?,
            owner_instance: self.try_get("owner_instance")?,
            transport: Transport::from_stored(&transport),
            remote_task_id: self.try_get("remote_task_id")?,
            remote_headers,
            usage: Usage {
                input_tokens: to_u64(self.try_get("input_tokens")?),
                output_tokens: to_u64(self.try_get("output_tokens")?),
                cached_input_tokens: to_u64(self.try_get("cached_input_tokens")?),
                cache_write_tokens: to_u64(self.try_get("cache_write_tokens")?),
                cost_nano_usd: to_u64(self.try_get("cost_nano_usd")?),
                unpriced_calls: to_u64(self.try_get("unpriced_calls")?),
            },
            owner_epoch: to_u64(self.try_get("owner_epoch")?),
            on_orphan,
            resumes: to_u64(self.try_get("resumes")?),
            depth: self
                .try_get::<Option<i64>, _>("depth")?
                .map(|d| u32::try_from(d).unwrap_or(u32::MAX)),
            id,
        })
    }

    /// A `live_children` row selected with [`LIVE_COLS`].
    pub(crate) fn live(&self) -> StoreResult<LiveChildEntry> {
        Ok(LiveChildEntry {
            agent_key: self.try_get("agent_key")?,
            label: self.try_get("label")?,
            agent_id: self.try_get("agent_id")?,
            parent_session_id: self.try_get("parent_session_id")?,
            child_session_id: self.try_get("child_session_id")?,
            depth: u32::try_from(self.try_get::<i64, _>("depth")?).unwrap_or(0),
            created_at: to_u64(self.try_get("created_at")?),
        })
    }
}

/// Decode many task rows, sorted by creation time then id.
pub(crate) fn tasks_sorted(rows: &[Row]) -> StoreResult<Vec<TaskRecord>> {
    let mut out = rows
        .iter()
        .map(Row::task)
        .collect::<StoreResult<Vec<_>>>()?;
    out.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Ok(out)
}
