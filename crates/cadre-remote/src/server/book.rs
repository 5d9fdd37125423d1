//! The server's task book: the tasks it started (the runtime's tracker holds their status),
//! the caller-chosen ids of the task protocol mapped to them, the A2A conversations
//! (`contextId` → the child that holds the conversation) and the concurrency slots.
//!
//! This is in memory for now. It is the seam for the persistent task store: a store record
//! would carry what [`ServedTask`] holds (the external id as a column), and the lookups below
//! would read it, so other nodes see the tasks too.

use cadre_subagents::Child;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Tasks remembered; beyond this the oldest finished ones are forgotten.
const MAX_TASKS: usize = 10_000;
/// Conversations remembered; beyond this the oldest idle ones are forgotten.
const MAX_CONTEXTS: usize = 4_096;

/// One task the server started.
#[derive(Debug, Clone)]
pub(crate) struct ServedTask {
    /// The runtime's task id, also the A2A task id.
    pub id: String,
    /// The id the caller chose (task protocol).
    pub external_id: Option<String>,
    /// The A2A conversation.
    pub context_id: String,
    /// The agent.
    pub agent: String,
    /// The caller's message.
    pub input: String,
    /// The caller's message id.
    pub message_id: String,
    /// Unix ms.
    pub created_at: u64,
}

/// A conversation: the child whose session holds it.
#[derive(Clone)]
pub(crate) struct Conversation {
    pub agent: String,
    pub child: Child,
}

/// The book. Cheap lookups under one lock, never held across an await; an external id is
/// reserved while its task starts, so that two submissions of it cannot both start one.
pub(crate) struct TaskBook {
    inner: Mutex<Inner>,
    slots: Arc<Semaphore>,
    limit: usize,
}

/// What an external id stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum External {
    /// A submission with this id is being started.
    Reserved,
    /// The runtime's task id.
    Task(String),
}

#[derive(Default)]
pub(crate) struct Inner {
    tasks: HashMap<String, Arc<ServedTask>>,
    order: VecDeque<String>,
    external: HashMap<String, External>,
    contexts: HashMap<String, Conversation>,
    context_order: VecDeque<String>,
}

impl TaskBook {
    pub(crate) fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        Self {
            inner: Mutex::new(Inner::default()),
            slots: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The most tasks running at once.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// A slot for one more running task, if there is one.
    pub(crate) fn try_admit(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().try_acquire_owned().ok()
    }

    /// A task by its runtime id.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<ServedTask>> {
        self.lock().tasks.get(id).cloned()
    }

    /// A task by its external id, else by its runtime id.
    pub(crate) fn find(&self, id: &str) -> Option<Arc<ServedTask>> {
        let g = self.lock();
        g.by_external(id).or_else(|| g.tasks.get(id).cloned())
    }

    /// Every remembered task, oldest first.
    pub(crate) fn list(&self) -> Vec<Arc<ServedTask>> {
        let g = self.lock();
        g.order
            .iter()
            .filter_map(|id| g.tasks.get(id).cloned())
            .collect()
    }
}

impl Inner {
    pub(crate) fn by_external(&self, id: &str) -> Option<Arc<ServedTask>> {
        match self.external.get(id) {
            Some(External::Task(tid)) => self.tasks.get(tid).cloned(),
            _ => None,
        }
    }

    /// Whether a submission with this external id is being started right now.
    pub(crate) fn is_reserved(&self, id: &str) -> bool {
        self.external.get(id) == Some(&External::Reserved)
    }

    /// Claim an external id while its task is being started.
    pub(crate) fn reserve(&mut self, id: &str) {
        self.external.insert(id.to_string(), External::Reserved);
    }

    /// Give up a claim whose task could not be started.
    pub(crate) fn release(&mut self, id: &str) {
        if self.is_reserved(id) {
            self.external.remove(id);
        }
    }

    pub(crate) fn conversation(&self, context_id: &str) -> Option<Conversation> {
        self.contexts.get(context_id).cloned()
    }

    pub(crate) fn add_conversation(&mut self, context_id: &str, conv: Conversation) {
        if self.contexts.insert(context_id.to_string(), conv).is_none() {
            self.context_order.push_back(context_id.to_string());
        }
        // Forget the oldest idle conversations (a busy child holds its session lock).
        let mut budget = self.context_order.len();
        while self.contexts.len() > MAX_CONTEXTS && budget > 0 {
            budget -= 1;
            let Some(old) = self.context_order.pop_front() else {
                break;
            };
            let idle = self
                .contexts
                .get(&old)
                .is_some_and(|c| c.child.session.try_lock().is_ok());
            if idle {
                self.contexts.remove(&old);
            } else {
                self.context_order.push_back(old);
            }
        }
    }

    /// Record a started task; forget the oldest finished ones beyond the cap.
    pub(crate) fn insert(
        &mut self,
        task: ServedTask,
        is_finished: impl Fn(&str) -> bool,
    ) -> Arc<ServedTask> {
        let task = Arc::new(task);
        if let Some(ext) = &task.external_id {
            self.external
                .insert(ext.clone(), External::Task(task.id.clone()));
        }
        self.order.push_back(task.id.clone());
        self.tasks.insert(task.id.clone(), task.clone());
        while self.order.len() > MAX_TASKS {
            let Some(front) = self.order.front().cloned() else {
                break;
            };
            if !is_finished(&front) {
                break;
            }
            self.order.pop_front();
            if let Some(old) = self.tasks.remove(&front)
                && let Some(ext) = &old.external_id
            {
                self.external.remove(ext);
            }
        }
        task
    }
}
