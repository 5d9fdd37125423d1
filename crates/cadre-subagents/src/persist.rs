//! Mirroring the runtime into the persistent task store: every task and live child is
//! written through, so other processes and nodes can list, wait for and cancel them, and a
//! restarted `cadre` finds them again. The store enforces the state rules itself; a write it
//! refuses is reported back, never papered over.

use crate::live::LiveChild;
use crate::tracker::{TaskSnapshot, TaskStatus};
use cadre_store::{
    LiveChildEntry, NewTask as StoredTask, StoreError, TaskRecord, TaskStore, Transition, Transport,
};
use cadre_types::{EndState, Usage, unix_millis};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The stored form of an end state: `completed`, `failed`, `cancelled`, `limit_reached:<kind>`.
pub fn end_state_name(state: &EndState) -> String {
    match state {
        EndState::LimitReached { limit } => {
            let kind = serde_json::to_value(limit)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("limit_reached:{kind}")
        }
        other => other.name().to_string(),
    }
}

/// The end state a stored name stands for (the inverse of [`end_state_name`]); `error` is
/// the record's error, which the name does not carry. `None` for a name this version does
/// not know.
pub fn parse_end_state_name(name: &str, error: Option<&str>) -> Option<EndState> {
    match name {
        "completed" => Some(EndState::Completed),
        "cancelled" => Some(EndState::Cancelled),
        "failed" => Some(EndState::Failed {
            error: error.unwrap_or_default().to_string(),
        }),
        other => {
            let kind = other.strip_prefix("limit_reached:")?;
            let limit = serde_json::from_value(serde_json::Value::String(kind.into())).ok()?;
            Some(EndState::LimitReached { limit })
        }
    }
}

/// A stored record as the runtime's snapshot type.
pub fn snapshot_of(r: &TaskRecord) -> TaskSnapshot {
    TaskSnapshot {
        id: r.id.clone(),
        agent: r.agent_id.clone(),
        parent_session_id: r.parent_session_id.clone(),
        child_session_id: r.child_session_id.clone().unwrap_or_default(),
        description: r.description.clone(),
        status: r.status,
        result: r.result.clone(),
        error: r.error.clone(),
        cancel_requested: r.cancel_requested,
        background: r.background,
        created_at: r.created_at,
        updated_at: r.updated_at,
        usage: r.usage,
        end_state: r
            .end_state
            .as_deref()
            .and_then(|n| parse_end_state_name(n, r.error.as_deref())),
    }
}

/// What the runtime writes when it starts a task.
pub(crate) struct TaskStart<'a> {
    pub id: &'a str,
    pub agent: &'a str,
    pub parent_agent: &'a str,
    pub parent_session_id: &'a str,
    pub child_session_id: &'a str,
    pub user_id: Option<&'a str>,
    pub prompt: &'a str,
    pub description: &'a str,
    pub background: bool,
    /// `Some((url, headers))` for remote children.
    pub remote: Option<(&'a str, &'a BTreeMap<String, String>)>,
}

/// The write-through side of the runtime.
#[derive(Clone)]
pub(crate) struct Persist {
    pub store: Arc<dyn TaskStore>,
}

impl Persist {
    pub(crate) async fn created(&self, t: TaskStart<'_>) -> Result<(), StoreError> {
        let (transport, headers) = match t.remote {
            Some((url, headers)) => (
                Transport::Remote {
                    url: url.to_string(),
                },
                headers.clone(),
            ),
            None => (Transport::Local, BTreeMap::new()),
        };
        self.store
            .create(StoredTask {
                id: t.id.to_string(),
                agent_id: t.agent.to_string(),
                parent_agent_id: (t.parent_agent != "main").then(|| t.parent_agent.to_string()),
                parent_session_id: t.parent_session_id.to_string(),
                child_session_id: Some(t.child_session_id.to_string()),
                user_id: t.user_id.map(str::to_string),
                prompt: t.prompt.to_string(),
                description: t.description.to_string(),
                background: t.background,
                transport,
                remote_headers: headers,
            })
            .await
            .map(|_| ())
    }

    /// Record `running`; `false` when the store refuses (cancel requested elsewhere).
    pub(crate) async fn running(&self, id: &str) -> bool {
        match self.store.transition(id, Transition::running()).await {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(task = id, error = %e, "store refused running");
                false
            }
        }
    }

    /// Record the end of a task.
    pub(crate) async fn finished(
        &self,
        id: &str,
        status: TaskStatus,
        result: Option<String>,
        error: Option<String>,
        end: &EndState,
        usage: Usage,
    ) {
        let mut t = Transition::to(status)
            .with_end_state(end_state_name(end))
            .with_usage(usage);
        t.result = result;
        t.error = error;
        if let Err(e) = self.store.transition(id, t.clone()).await {
            // Cancel was requested (possibly from another node) while the child finished.
            if status != TaskStatus::Cancelled {
                let mut c = t;
                c.to = TaskStatus::Cancelled;
                if let Err(e2) = self.store.transition(id, c).await {
                    tracing::warn!(task = id, error = %e, then = %e2, "store kept its own end state");
                }
            } else {
                tracing::warn!(task = id, error = %e, "store refused the end state");
            }
        }
    }

    pub(crate) async fn live_child(
        &self,
        parent_session: &str,
        c: &LiveChild,
    ) -> Result<(), StoreError> {
        self.store
            .insert_live_child(&LiveChildEntry {
                agent_key: c.key.clone(),
                label: c.label.clone(),
                agent_id: c.agent_id.clone(),
                parent_session_id: parent_session.to_string(),
                child_session_id: c.child.session_id.clone(),
                depth: c.child.depth,
                created_at: unix_millis(),
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_types::LimitKind;

    #[test]
    fn stored_names_read_back_as_the_end_state() {
        let states = [
            EndState::Completed,
            EndState::Cancelled,
            EndState::Failed { error: "x".into() },
            EndState::LimitReached {
                limit: LimitKind::MaxTurns,
            },
            EndState::LimitReached {
                limit: LimitKind::Cost,
            },
        ];
        for state in states {
            let back = parse_end_state_name(&end_state_name(&state), Some("x"));
            assert_eq!(back, Some(state));
        }
        assert_eq!(parse_end_state_name("limit_reached:moon", None), None);
        assert_eq!(parse_end_state_name("odd", None), None);
    }

    #[test]
    fn end_states_have_stable_names() {
        assert_eq!(end_state_name(&EndState::Completed), "completed");
        assert_eq!(
            end_state_name(&EndState::LimitReached {
                limit: LimitKind::MaxTurns
            }),
            "limit_reached:max_turns"
        );
        assert_eq!(
            end_state_name(&EndState::Failed { error: "x".into() }),
            "failed"
        );
    }
}
