//! Live children: sub-agents created by `agent_spawn` that keep their session so
//! `agent_send` can continue them. Keys and labels are scoped to the parent session; labels
//! are unique per session, case-insensitively.

use crate::runtime::Child;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// One live child.
pub struct LiveChild {
    /// `agent:<id>:<uuid>`.
    pub key: String,
    /// The definition's name.
    pub agent_id: String,
    /// Optional label, unique in the parent session.
    pub label: Option<String>,
    /// The child itself.
    pub child: Child,
    /// Its latest task, if it has had one.
    pub last_task: Mutex<Option<String>>,
}

impl LiveChild {
    /// The id of the child's latest task.
    pub fn last_task(&self) -> Option<String> {
        match self.last_task.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Remember the child's latest task.
    pub fn set_last_task(&self, id: &str) {
        let mut g = match self.last_task.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *g = Some(id.to_string());
    }
}

/// Why a live child could not be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Label already in use: {0}")]
pub struct LabelInUse(pub String);

/// Live children per parent session.
#[derive(Default)]
pub struct LiveChildren {
    by_session: Mutex<HashMap<String, Vec<Arc<LiveChild>>>>,
}

impl LiveChildren {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Vec<Arc<LiveChild>>>> {
        match self.by_session.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Add a child to a parent session, refusing a label already used there.
    pub fn add(&self, session: &str, child: LiveChild) -> Result<Arc<LiveChild>, LabelInUse> {
        let mut g = self.lock();
        let list = g.entry(session.to_string()).or_default();
        if let Some(label) = &child.label
            && list.iter().any(|c| {
                c.label
                    .as_deref()
                    .is_some_and(|l| l.eq_ignore_ascii_case(label))
            })
        {
            return Err(LabelInUse(label.clone()));
        }
        let child = Arc::new(child);
        list.push(child.clone());
        Ok(child)
    }

    /// True when `label` is taken in `session`.
    pub fn label_taken(&self, session: &str, label: &str) -> bool {
        self.lock().get(session).is_some_and(|l| {
            l.iter().any(|c| {
                c.label
                    .as_deref()
                    .is_some_and(|x| x.eq_ignore_ascii_case(label))
            })
        })
    }

    /// Find by full agent key.
    pub fn by_key(&self, session: &str, key: &str) -> Option<Arc<LiveChild>> {
        self.lock()
            .get(session)
            .and_then(|l| l.iter().find(|c| c.key == key).cloned())
    }

    /// Find by label (case-insensitive).
    pub fn by_label(&self, session: &str, label: &str) -> Option<Arc<LiveChild>> {
        self.lock().get(session).and_then(|l| {
            l.iter()
                .find(|c| {
                    c.label
                        .as_deref()
                        .is_some_and(|x| x.eq_ignore_ascii_case(label))
                })
                .cloned()
        })
    }

    /// Forget the live children of a session that has ended (the session of a one-off
    /// child whose task is over): nothing can address them any more. Returns them.
    pub fn drop_session(&self, session: &str) -> Vec<Arc<LiveChild>> {
        self.lock().remove(session).unwrap_or_default()
    }

    /// Forget one live child (it was closed); true when it was here.
    pub fn remove(&self, session: &str, key: &str) -> bool {
        let mut g = self.lock();
        let Some(list) = g.get_mut(session) else {
            return false;
        };
        let before = list.len();
        list.retain(|c| c.key != key);
        let removed = list.len() < before;
        if list.is_empty() {
            g.remove(session);
        }
        removed
    }

    /// How many sessions have live children.
    pub fn sessions(&self) -> usize {
        self.lock().len()
    }

    /// The live children of a session, in creation order.
    pub fn list(&self, session: &str) -> Vec<Arc<LiveChild>> {
        self.lock().get(session).cloned().unwrap_or_default()
    }
}
