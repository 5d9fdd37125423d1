//! The sub-agent tasks of the session as the UI shows them. Status, usage and times come from
//! the runtime's tracker (its owner), synced by the shell; the last progress lines come from
//! the sub-agent updates of the event stream, so foreground children show them too.

use cadre_subagents::{TaskRecord, TaskStatus};
use cadre_types::{SubagentUpdate, UpdateKind, Usage};
use std::collections::{HashMap, VecDeque};

/// Progress lines kept per task.
pub const PROGRESS_LINES: usize = 12;
/// Characters kept per progress line.
pub const PROGRESS_LINE_CHARS: usize = 200;
/// Tasks kept on the board (the oldest finished ones go first).
pub const MAX_TASKS: usize = 2_000;

/// One task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    /// `task_<uuid>`.
    pub id: String,
    /// The sub-agent.
    pub agent: String,
    /// Its short title.
    pub description: String,
    /// Its status.
    pub status: TaskStatus,
    /// Runs in the background.
    pub background: bool,
    /// Created, Unix ms.
    pub started_ms: u64,
    /// Ended, Unix ms.
    pub ended_ms: Option<u64>,
    /// Tokens so far.
    pub usage: Usage,
    /// The result, once there is one.
    pub result: Option<String>,
    /// The error, for failed tasks.
    pub error: Option<String>,
    /// Cancellation was requested.
    pub cancel_requested: bool,
    /// The task of the agent that started this one (a grandchild's parent), if any.
    pub parent_task: Option<String>,
    /// Recent progress, oldest first.
    pub progress: VecDeque<String>,
    /// Whether the last progress line is streamed text still growing.
    text_open: bool,
    /// Bumped on every change (part of the render cache key).
    pub version: u64,
}

impl TaskView {
    fn new(id: &str, agent: &str, now_ms: u64) -> Self {
        Self {
            id: id.to_string(),
            agent: agent.to_string(),
            description: String::new(),
            status: TaskStatus::Running,
            background: false,
            started_ms: now_ms,
            ended_ms: None,
            usage: Usage::default(),
            result: None,
            error: None,
            cancel_requested: false,
            parent_task: None,
            progress: VecDeque::new(),
            text_open: false,
            version: 0,
        }
    }

    /// Milliseconds it has run (to `now_ms` while running).
    pub fn elapsed_ms(&self, now_ms: u64) -> u64 {
        self.ended_ms
            .unwrap_or(now_ms)
            .saturating_sub(self.started_ms)
    }

    fn line(&mut self, text: String) {
        let text: String = text.chars().take(PROGRESS_LINE_CHARS).collect();
        self.progress.push_back(text);
        while self.progress.len() > PROGRESS_LINES {
            self.progress.pop_front();
        }
    }

    /// Append streamed text, splitting it into lines.
    fn stream(&mut self, text: &str) {
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                self.text_open = false;
            }
            if part.is_empty() {
                continue;
            }
            if self.text_open
                && let Some(last) = self.progress.back_mut()
            {
                let room = PROGRESS_LINE_CHARS.saturating_sub(last.chars().count());
                last.extend(part.chars().take(room));
            } else {
                self.line(part.to_string());
                self.text_open = true;
            }
        }
    }

    fn apply(&mut self, u: &SubagentUpdate, now_ms: u64) {
        let first = |s: &str| s.lines().next().unwrap_or("").trim().to_string();
        match u.kind {
            UpdateKind::Start => {}
            UpdateKind::Resumed => {
                self.text_open = false;
                self.line(format!("↻ {}", first(&u.text)));
            }
            UpdateKind::Delta => self.stream(&u.text),
            UpdateKind::Thinking => {}
            UpdateKind::ToolStart => {
                self.text_open = false;
                let tool = u.tool.as_deref().unwrap_or("tool");
                self.line(format!(
                    "→ {tool} {}",
                    crate::text::call_title(tool, &u.text)
                ));
            }
            UpdateKind::ToolResult => {
                self.text_open = false;
                let tool = u.tool.as_deref().unwrap_or("tool");
                self.line(format!("← {tool}: {}", first(&u.text)));
            }
            UpdateKind::Compaction => {
                self.text_open = false;
                self.line(format!("⇣ compacted: {}", first(&u.text)));
            }
            UpdateKind::Done | UpdateKind::Error | UpdateKind::Cancelled => {
                self.text_open = false;
                self.status = match u.kind {
                    UpdateKind::Done => TaskStatus::Completed,
                    UpdateKind::Cancelled => TaskStatus::Cancelled,
                    _ => TaskStatus::Failed,
                };
                self.ended_ms.get_or_insert(now_ms);
                if let Some(usage) = u.usage {
                    self.usage = usage;
                }
                match u.kind {
                    UpdateKind::Done => self.result = Some(u.text.clone()),
                    UpdateKind::Error => self.error = Some(u.text.clone()),
                    _ => {}
                }
            }
        }
        self.version += 1;
    }
}

/// Every task the session has seen, in the order they appeared.
#[derive(Debug, Default, Clone)]
pub struct TaskBoard {
    tasks: Vec<TaskView>,
    index: HashMap<String, usize>,
}

impl TaskBoard {
    /// The tasks, in order of appearance.
    pub fn all(&self) -> &[TaskView] {
        &self.tasks
    }

    /// One task.
    pub fn get(&self, id: &str) -> Option<&TaskView> {
        self.index.get(id).map(|&i| &self.tasks[i])
    }

    fn entry(&mut self, id: &str, agent: &str, now_ms: u64) -> &mut TaskView {
        let i = match self.index.get(id) {
            Some(&i) => i,
            None => {
                self.tasks.push(TaskView::new(id, agent, now_ms));
                self.index.insert(id.to_string(), self.tasks.len() - 1);
                self.tasks.len() - 1
            }
        };
        &mut self.tasks[i]
    }

    /// Apply a sub-agent update; `parent_task` is the task of the agent it came through.
    /// Returns true when the update started a task the board had not seen.
    pub fn on_update(
        &mut self,
        parent_task: Option<&str>,
        u: &SubagentUpdate,
        now_ms: u64,
    ) -> bool {
        let Some(id) = u.task_id.as_deref() else {
            return false;
        };
        let new = !self.index.contains_key(id);
        let t = self.entry(id, &u.agent, now_ms);
        if new {
            t.parent_task = parent_task.map(str::to_string);
        }
        t.apply(u, now_ms);
        self.trim();
        new
    }

    /// Take the store's view of the tasks (the owner of status, usage and times); true
    /// when anything changed (the screen must be drawn again).
    pub fn sync(&mut self, snaps: &[TaskRecord]) -> bool {
        let mut any = false;
        for s in snaps {
            let t = self.entry(&s.id, &s.agent_id, s.created_at);
            let ended = s.status.is_terminal().then_some(s.updated_at);
            let changed = t.status != s.status
                || t.usage != s.usage
                || t.description != s.description
                || t.background != s.background
                || t.cancel_requested != s.cancel_requested
                || t.ended_ms != ended
                || t.result != s.result
                || t.error != s.error;
            if changed {
                t.status = s.status;
                t.usage = s.usage;
                t.description = s.description.clone();
                t.background = s.background;
                t.cancel_requested = s.cancel_requested;
                t.started_ms = s.created_at;
                t.ended_ms = ended;
                t.result = s.result.clone();
                t.error = s.error.clone();
                t.version += 1;
                any = true;
            }
        }
        self.trim();
        any
    }

    /// Background tasks not yet ended.
    pub fn running_background(&self) -> impl Iterator<Item = &TaskView> {
        self.tasks
            .iter()
            .filter(|t| t.background && !t.status.is_terminal())
    }

    /// (running or pending, ended) task counts.
    pub fn counts(&self) -> (usize, usize) {
        let (running, pending, ended) = self.counts_by_state();
        (running + pending, ended)
    }

    /// (running, pending, ended) task counts: a child waiting for a slot is not running yet.
    pub fn counts_by_state(&self) -> (usize, usize, usize) {
        let pending = self
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Pending)
            .count();
        let open = self
            .tasks
            .iter()
            .filter(|t| !t.status.is_terminal())
            .count();
        (open - pending, pending, self.tasks.len() - open)
    }

    /// Forget everything (a new session).
    pub fn clear(&mut self) {
        self.tasks.clear();
        self.index.clear();
    }

    fn trim(&mut self) {
        if self.tasks.len() <= MAX_TASKS {
            return;
        }
        let mut excess = self.tasks.len() - MAX_TASKS;
        self.tasks.retain(|t| {
            if excess > 0 && t.status.is_terminal() {
                excess -= 1;
                false
            } else {
                true
            }
        });
        self.index = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.clone(), i))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upd(kind: UpdateKind, text: &str, tool: Option<&str>) -> SubagentUpdate {
        SubagentUpdate {
            agent: "explorer".into(),
            task_id: Some("task_1".into()),
            session_id: "sub-1".into(),
            kind,
            text: text.into(),
            tool: tool.map(str::to_string),
            usage: None,
            end: None,
        }
    }

    #[test]
    fn progress_keeps_the_last_twelve_short_lines() {
        let mut b = TaskBoard::default();
        assert!(b.on_update(None, &upd(UpdateKind::Start, "", None), 0));
        b.on_update(None, &upd(UpdateKind::Delta, "Listing ", None), 1);
        b.on_update(None, &upd(UpdateKind::Delta, "the project.\nNext", None), 2);
        b.on_update(
            None,
            &upd(
                UpdateKind::ToolStart,
                r#"{"pattern":"**/*.py"}"#,
                Some("glob"),
            ),
            3,
        );
        let t = b.get("task_1").unwrap();
        assert_eq!(
            Vec::from(t.progress.clone()),
            ["Listing the project.", "Next", "→ glob **/*.py"]
        );
        for i in 0..20 {
            let long = "x".repeat(500);
            b.on_update(
                None,
                &upd(UpdateKind::ToolResult, &format!("{i}{long}"), Some("grep")),
                4,
            );
        }
        let t = b.get("task_1").unwrap();
        assert_eq!(t.progress.len(), PROGRESS_LINES);
        assert!(
            t.progress
                .iter()
                .all(|l| l.chars().count() <= PROGRESS_LINE_CHARS)
        );
        assert!(t.progress.back().unwrap().starts_with("← grep: 19"));
    }

    #[test]
    fn the_end_update_sets_status_and_time_and_sync_wins() {
        let mut b = TaskBoard::default();
        b.on_update(None, &upd(UpdateKind::Start, "", None), 100);
        b.on_update(None, &upd(UpdateKind::Cancelled, "cancelled", None), 350);
        let t = b.get("task_1").unwrap();
        assert_eq!(t.status, TaskStatus::Cancelled);
        assert_eq!(t.elapsed_ms(10_000), 250);
        assert_eq!(b.counts(), (0, 1));
        // The tracker's record wins and says whether the screen must change.
        let mut task = cadre_store::NewTask::new("explorer", "s-1", "map the project");
        task.id = "task_1".into();
        task.child_session_id = Some("sub-1".into());
        task.description = "map the project".into();
        task.background = true;
        let mut snap = task.into_record("node", "1:1", 100);
        snap.status = TaskStatus::Cancelled;
        snap.cancel_requested = true;
        snap.updated_at = 400;
        assert!(b.sync(std::slice::from_ref(&snap)));
        let t = b.get("task_1").unwrap();
        assert_eq!(
            (t.description.as_str(), t.background),
            ("map the project", true)
        );
        assert!(!b.sync(&[snap]), "nothing new");
    }
}
