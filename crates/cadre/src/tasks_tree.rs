//! `cadre tasks tree [SESSION]`: a session's delegation tree read back from the task store,
//! so that which child spent the tokens, failed or is still running can be seen without a
//! trace backend, from any process or node that shares the store.
//!
//! A task's stored usage is its whole subtree's (a child's spend is charged to every
//! ancestor's budget, and the record keeps the child's), so a session's total is the sum
//! of its top-level tasks, not of every line.

use crate::tasks_cmd::record_json;
use anyhow::Result;
use cadre_store::{TaskFilter, TaskRecord, TaskStore};
use cadre_types::Usage;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet, VecDeque};

/// At most this many tasks are read for one tree; beyond, the tree says it was cut.
const MAX_TASKS: usize = 10_000;
/// Nesting deeper than this is cut (no spawn depth cap comes near it).
const MAX_DEPTH: usize = 64;
/// How many of the newest tasks are looked through for a top-level session.
const NEWEST: u32 = 200;

/// One task and the tasks its child started.
struct Node {
    record: TaskRecord,
    children: Vec<Node>,
}

/// A session's delegation tree.
pub struct Tree {
    session: String,
    roots: Vec<Node>,
    tasks: usize,
    /// Not every task could be shown ([`MAX_TASKS`], [`MAX_DEPTH`]).
    cut: bool,
}

/// The tree of `session`, or of the newest top-level session in the store.
pub async fn load(store: &dyn TaskStore, session: Option<&str>) -> Result<Tree> {
    let session = match session {
        Some(s) => s.to_string(),
        None => newest_session(store).await?,
    };
    let mut by_session: HashMap<String, Vec<TaskRecord>> = HashMap::new();
    let mut seen = HashSet::from([session.clone()]);
    let mut queue = VecDeque::from([session.clone()]);
    let (mut read, mut cut) = (0, false);
    while let Some(s) = queue.pop_front() {
        if read >= MAX_TASKS {
            cut = true;
            break;
        }
        let tasks = store.list_by_session(&s).await?;
        for child in tasks.iter().filter_map(|t| t.child_session_id.as_ref()) {
            if seen.insert(child.clone()) {
                queue.push_back(child.clone());
            }
        }
        read += tasks.len();
        by_session.insert(s, tasks);
    }
    let mut tasks = 0;
    let roots = nest(&session, &mut by_session, 0, &mut tasks, &mut cut);
    Ok(Tree {
        session,
        roots,
        tasks,
        cut,
    })
}

/// The session of the newest task started by a top-level agent (depth 1); failing that,
/// the parent session of the newest task.
async fn newest_session(store: &dyn TaskStore) -> Result<String> {
    let newest = store
        .list(&TaskFilter {
            limit: Some(NEWEST),
            newest_first: true,
            ..TaskFilter::default()
        })
        .await?;
    let top = newest
        .iter()
        .find(|t| t.depth == Some(1))
        .or(newest.first());
    match top {
        Some(t) => Ok(t.parent_session_id.clone()),
        None => anyhow::bail!("no tasks in the store"),
    }
}

/// The tasks of `session` with their subtrees, each session's tasks taken once (so a
/// record naming an ancestor's session as its child's cannot loop).
fn nest(
    session: &str,
    by_session: &mut HashMap<String, Vec<TaskRecord>>,
    depth: usize,
    count: &mut usize,
    cut: &mut bool,
) -> Vec<Node> {
    let Some(records) = by_session.remove(session) else {
        return Vec::new();
    };
    if depth >= MAX_DEPTH {
        *cut = true;
        return Vec::new();
    }
    records
        .into_iter()
        .map(|record| {
            *count += 1;
            let children = match &record.child_session_id {
                Some(child) => nest(child, by_session, depth + 1, count, cut),
                None => Vec::new(),
            };
            Node { record, children }
        })
        .collect()
}

/// How long a task ran: to its last change once ended, to `now` while it runs.
fn duration_ms(r: &TaskRecord, now: u64) -> u64 {
    let end = if r.status.is_terminal() {
        r.updated_at
    } else {
        now
    };
    end.saturating_sub(r.created_at)
}

fn duration_text(ms: u64) -> String {
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// The end state (or status while it runs) and whether the result is complete.
fn state_text(r: &TaskRecord) -> String {
    let state = r.end_state.as_deref().unwrap_or(r.status.as_str());
    if !r.status.is_terminal() {
        return state.to_string();
    }
    match r.incomplete_reason() {
        None => format!("{state} ✓"),
        Some(reason) => format!("{state} ✗ {}", reason.as_str()),
    }
}

fn turns_text(turns: Option<u64>) -> String {
    match turns {
        Some(1) => "1 turn".to_string(),
        Some(n) => format!("{n} turns"),
        None => "turns ?".to_string(),
    }
}

impl Tree {
    /// What the session's tasks spent: their top-level tasks' usage, each its subtree's.
    fn usage(&self) -> Usage {
        let mut total = Usage::default();
        for n in &self.roots {
            total += n.record.usage;
        }
        total
    }

    /// The tree for a person: a header with the totals, then one line per task.
    pub fn text(&self, now: u64) -> String {
        let usage = self.usage();
        let mut out = format!(
            "session {} · {} task{} · tokens {} · {}\n",
            self.session,
            self.tasks,
            if self.tasks == 1 { "" } else { "s" },
            usage.tokens_text(),
            usage.task_cost_text(self.roots.iter().all(|n| n.record.status.is_terminal())),
        );
        if self.roots.is_empty() {
            out.push_str("(no sub-agents)\n");
        }
        lines(&self.roots, "", now, &mut out);
        if self.cut {
            out.push_str(&format!(
                "(cut: at most {MAX_TASKS} tasks and {MAX_DEPTH} levels are shown)\n"
            ));
        }
        out
    }

    /// The tree as JSON: each task's record (as `tasks show --json` has it) with its
    /// `duration_ms` and its `children`.
    pub fn to_json(&self, now: u64) -> Value {
        json!({
            "session": self.session,
            "tasks": self.tasks,
            "usage": self.usage(),
            "truncated": self.cut,
            "children": nodes_json(&self.roots, now),
        })
    }
}

fn nodes_json(nodes: &[Node], now: u64) -> Value {
    nodes
        .iter()
        .map(|n| {
            let mut v = record_json(&n.record);
            v["duration_ms"] = json!(duration_ms(&n.record, now));
            v["children"] = nodes_json(&n.children, now);
            v
        })
        .collect()
}

/// Append `nodes` drawn under `prefix` with box-drawing branches.
fn lines(nodes: &[Node], prefix: &str, now: u64, out: &mut String) {
    for (i, n) in nodes.iter().enumerate() {
        let last = i + 1 == nodes.len();
        let r = &n.record;
        let mut duration = duration_text(duration_ms(r, now));
        if !r.status.is_terminal() {
            duration.push_str(" so far");
        }
        out.push_str(&format!(
            "{prefix}{} {}  {}  {}  {}  {}  tokens {}  {}  {}\n",
            if last { "└─" } else { "├─" },
            r.agent_id,
            r.id,
            r.owner_node,
            state_text(r),
            turns_text(r.turns),
            r.usage.tokens_text(),
            r.usage.task_cost_text(r.status.is_terminal()),
            duration,
        ));
        let deeper = format!("{prefix}{}", if last { "   " } else { "│  " });
        lines(&n.children, &deeper, now, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_store::{NewTask, TaskStatus};

    fn record(id: &str, session: &str, child: &str, tokens: u64) -> TaskRecord {
        let mut t = NewTask::new("worker", session, "do it");
        t.id = id.into();
        t.child_session_id = Some(child.into());
        let mut r = t.into_record("node-a", "1:1", 1_000);
        r.status = TaskStatus::Completed;
        r.end_state = Some("completed".into());
        r.updated_at = 3_500;
        r.turns = Some(2);
        r.usage = Usage {
            input_tokens: tokens,
            ..Usage::default()
        };
        r
    }

    #[test]
    fn a_session_naming_its_own_ancestor_does_not_loop_and_totals_count_top_level_tasks() {
        let mut by_session = HashMap::from([
            ("s".to_string(), vec![record("a", "s", "sa", 300)]),
            // A record claiming the root session as its child's: read once, never again.
            ("sa".to_string(), vec![record("b", "sa", "s", 100)]),
        ]);
        let (mut count, mut cut) = (0, false);
        let roots = nest("s", &mut by_session, 0, &mut count, &mut cut);
        assert_eq!(count, 2);
        assert_eq!(roots[0].children.len(), 1);
        assert!(roots[0].children[0].children.is_empty());
        let tree = Tree {
            session: "s".into(),
            roots,
            tasks: count,
            cut,
        };
        assert_eq!(tree.usage().input_tokens, 300);
        let text = tree.text(10_000);
        assert!(
            text.starts_with("session s · 2 tasks · tokens 300 (in 300, out 0) · $0.0000"),
            "{text}"
        );
        assert!(
            text.contains("└─ worker  a  node-a  completed ✓  2 turns"),
            "{text}"
        );
        assert!(text.contains("   └─ worker  b  "), "{text}");
        assert!(text.contains("2.5s"), "{text}");
    }
}
