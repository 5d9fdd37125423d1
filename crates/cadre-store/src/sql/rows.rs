//! Decoding rows (of either backend, as [`super::conn::Row`]s) into records.

use super::conn::{FromCell, Row};
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
     question, answer, depth, parent_call_id, turns, trace_parent";

/// Every column of `live_children`.
pub(crate) const LIVE_COLS: &str =
    "agent_key, parent_session_id, label, agent_id, child_session_id, depth, created_at";

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A row's columns read in the order a statement lists them: each is looked for at the
/// next place first, one comparison where a search by name takes up to forty (a task's row
/// was decoded with 800 string comparisons). A column elsewhere is found by name.
struct InOrder<'r> {
    row: &'r Row,
    next: usize,
}

impl InOrder<'_> {
    fn get<T: FromCell>(&mut self, name: &str) -> StoreResult<T> {
        let at = self.next;
        self.next += 1;
        if self.row.name_at(at) == Some(name) {
            self.row.try_get(at)
        } else {
            self.row.try_get(name)
        }
    }
}

impl Row {
    /// A `tasks` row selected with [`TASK_COLS`] (its columns read in that order).
    pub(crate) fn task(&self) -> StoreResult<TaskRecord> {
        let mut c = InOrder { row: self, next: 0 };
        let id: String = c.get("id")?;
        let corrupt = |reason: String| StoreError::Corrupt {
            id: id.clone(),
            reason,
        };
        let agent_id = c.get("agent_id")?;
        let parent_agent_id = c.get("parent_agent_id")?;
        let parent_session_id = c.get("parent_session_id")?;
        let child_session_id = c.get("child_session_id")?;
        let user_id = c.get("user_id")?;
        let status: String = c.get("status")?;
        let status = TaskStatus::parse(&status)
            .ok_or_else(|| corrupt(format!("unknown status {status:?}")))?;
        let prompt = c.get("prompt")?;
        let description = c.get("description")?;
        let result = c.get("result")?;
        let error = c.get("error")?;
        let end_state = c.get("end_state")?;
        let cancel_requested = c.get("cancel_requested")?;
        let background = c.get("background")?;
        let delivered = c.get("delivered")?;
        let created_at = to_u64(c.get("created_at")?);
        let updated_at = to_u64(c.get("updated_at")?);
        let heartbeat_at = c.get::<Option<i64>>("heartbeat_at")?.map(to_u64);
        let owner_node = c.get("owner_node")?;
        let owner_instance = c.get("owner_instance")?;
        let transport = Transport::from_stored(&c.get::<String>("transport")?);
        let remote_task_id = c.get("remote_task_id")?;
        let headers: String = c.get("remote_headers")?;
        let remote_headers: BTreeMap<String, String> =
            serde_json::from_str(&headers).map_err(|e| corrupt(format!("remote_headers: {e}")))?;
        let usage = Usage {
            input_tokens: to_u64(c.get("input_tokens")?),
            output_tokens: to_u64(c.get("output_tokens")?),
            cached_input_tokens: to_u64(c.get("cached_input_tokens")?),
            cache_write_tokens: to_u64(c.get("cache_write_tokens")?),
            cost_nano_usd: to_u64(c.get("cost_nano_usd")?),
            unpriced_calls: to_u64(c.get("unpriced_calls")?),
        };
        let owner_epoch = to_u64(c.get("owner_epoch")?);
        let on_orphan: String = c.get("on_orphan")?;
        let on_orphan = OrphanPolicy::parse(&on_orphan)
            .ok_or_else(|| corrupt(format!("unknown on_orphan {on_orphan:?}")))?;
        let resumes = to_u64(c.get("resumes")?);
        let served_task_id: Option<String> = c.get("served_task_id")?;
        let served_turn: Option<i64> = c.get("served_turn")?;
        let served_message_id = c.get("served_message_id")?;
        let caller_task_id = c.get("caller_task_id")?;
        let served = served_task_id.map(|task_id| ServedTurn {
            task_id,
            turn: served_turn.map_or(0, to_u64),
            message_id: served_message_id,
            caller_id: caller_task_id,
        });
        Ok(TaskRecord {
            question: c.get("question")?,
            answer: c.get("answer")?,
            depth: c
                .get::<Option<i64>>("depth")?
                .map(|d| u32::try_from(d).unwrap_or(u32::MAX)),
            parent_call_id: c.get("parent_call_id")?,
            turns: c.get::<Option<i64>>("turns")?.map(to_u64),
            trace_parent: c.get("trace_parent")?,
            served,
            agent_id,
            parent_agent_id,
            parent_session_id,
            child_session_id,
            user_id,
            status,
            prompt,
            description,
            result,
            error,
            end_state,
            cancel_requested,
            background,
            delivered,
            created_at,
            updated_at,
            heartbeat_at,
            owner_node,
            owner_instance,
            transport,
            remote_task_id,
            remote_headers,
            usage,
            owner_epoch,
            on_orphan,
            resumes,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::conn::Cell;

    /// A task row with a value of its own in every column, its columns in `order`.
    fn row(order: &[&str]) -> Row {
        const INTS: &[&str] = &[
            "cancel_requested",
            "background",
            "delivered",
            "created_at",
            "updated_at",
            "heartbeat_at",
            "input_tokens",
            "output_tokens",
            "cached_input_tokens",
            "cache_write_tokens",
            "cost_nano_usd",
            "unpriced_calls",
            "owner_epoch",
            "resumes",
            "served_turn",
            "depth",
            "turns",
        ];
        let cell = |name: &str| match name {
            "status" => Cell::Text("running".into()),
            "on_orphan" => Cell::Text("resume".into()),
            "remote_headers" => Cell::Text(r#"{"k":"v"}"#.into()),
            "transport" => Cell::Text("http://node-b".into()),
            n if INTS.contains(&n) => Cell::Int(100 + TASK_COLS.find(n).unwrap_or(0) as i64),
            n => Cell::Text(format!("v-{n}")),
        };
        Row::of(order.iter().map(|n| (n.to_string(), cell(n))).collect())
    }

    #[test]
    fn a_task_row_decodes_the_same_whatever_the_order_of_its_columns() {
        let names: Vec<&str> = TASK_COLS.split(',').map(str::trim).collect();
        let in_order = row(&names).task().unwrap();
        let reversed: Vec<&str> = names.iter().rev().copied().collect();
        assert_eq!(row(&reversed).task().unwrap(), in_order);
        assert_eq!(in_order.id, "v-id");
        assert_eq!(in_order.parent_session_id, "v-parent_session_id");
        assert_eq!(in_order.answer.as_deref(), Some("v-answer"));
        assert_eq!(in_order.status, TaskStatus::Running);
        assert_eq!(in_order.on_orphan, OrphanPolicy::Resume);
        assert_eq!(
            in_order.remote_headers.get("k").map(String::as_str),
            Some("v")
        );
        let served = in_order.served.as_ref().unwrap();
        assert_eq!(served.caller_id.as_deref(), Some("v-caller_task_id"));
        assert_ne!(in_order.created_at, in_order.updated_at);
        assert_ne!(in_order.usage.input_tokens, in_order.usage.output_tokens);
        // A column the statement does not return is an error, not a default.
        let missing: Vec<&str> = names.iter().copied().filter(|n| *n != "depth").collect();
        assert!(row(&missing).task().is_err());
    }
}
