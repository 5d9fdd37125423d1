//! One transcript entry to styled, wrapped lines: prompts, Markdown replies, folded thinking,
//! folded tool calls with their results (diffs for file edits) and the live sub-agents each
//! call started.

use super::{diff, markdown, wrap::wrap};
use crate::model::tasks::{TaskBoard, TaskView};
use crate::model::transcript::{EntryKind, ToolEntry};
use crate::text::{call_title, elapsed, short, short_id, tokens};
use cadre_subagents::TaskStatus;
use cadre_types::{TodoItem, TodoStatus};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// Result lines shown when a call is unfolded.
const RESULT_LINES: usize = 40;

fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// The colour of a task status.
pub fn status_style(s: TaskStatus) -> Style {
    match s {
        TaskStatus::Pending => Style::default().fg(Color::Gray),
        TaskStatus::Running => Style::default().fg(Color::Yellow),
        TaskStatus::Completed => Style::default().fg(Color::Green),
        TaskStatus::Failed => Style::default().fg(Color::Red),
        TaskStatus::Cancelled => Style::default().fg(Color::Magenta),
    }
}

/// `explorer · task_1a2b3c4d · running · 3.2s · 1.2k tok · $0.0042` (or `cost unknown`).
pub fn task_summary(t: &TaskView, now_ms: u64) -> Vec<Span<'static>> {
    vec![
        Span::styled(
            t.agent.clone(),
            Style::default()
                .fg(Color::Cyan)
                .add_modifier(Modifier::BOLD),
        ),
        Span::styled(format!(" · {} · ", short_id(&t.id)), dim()),
        Span::styled(t.status.to_string(), status_style(t.status)),
        Span::styled(
            format!(
                " · {} · {} tok · {}{}",
                elapsed(t.elapsed_ms(now_ms)),
                tokens(t.usage.total()),
                t.usage.task_cost_text(t.status.is_terminal()),
                if t.background { " · background" } else { "" }
            ),
            dim(),
        ),
    ]
}

/// The lines of entry `kind`, wrapped to `width`.
pub fn lines(
    kind: &EntryKind,
    tasks: &TaskBoard,
    now_ms: u64,
    selected: bool,
    width: usize,
) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut add = |l: Line<'static>, indent: usize| out.extend(wrap(l, width, indent));
    match kind {
        EntryKind::User(text) => {
            add(Line::default(), 0);
            for (i, l) in text.lines().enumerate() {
                let head = if i == 0 { "› " } else { "  " };
                add(
                    Line::from(vec![
                        Span::styled(
                            head,
                            Style::default()
                                .fg(Color::Blue)
                                .add_modifier(Modifier::BOLD),
                        ),
                        Span::styled(l.to_string(), Style::default().add_modifier(Modifier::BOLD)),
                    ]),
                    2,
                );
            }
        }
        EntryKind::Assistant(text) => {
            for l in markdown::render(text, width) {
                add(l, 0);
            }
        }
        EntryKind::Thinking { text, expanded } => {
            let style = dim().add_modifier(Modifier::ITALIC);
            let marker = if *expanded { "▾" } else { "▸" };
            let n = text.lines().count();
            add(
                Line::from(vec![
                    Span::styled(format!("{marker} thinking"), style),
                    Span::styled(
                        if *expanded {
                            String::new()
                        } else {
                            format!(" · {n} lines · {}", short(text, 60))
                        },
                        dim(),
                    ),
                ]),
                2,
            );
            if *expanded {
                for l in text.lines() {
                    add(Line::styled(format!("  {l}"), style), 2);
                }
            }
        }
        EntryKind::Tool(t) => tool(t, tasks, now_ms, &mut add),
        EntryKind::Notice(text) => {
            for l in text.lines() {
                add(Line::styled(format!("· {l}"), dim()), 2);
            }
        }
        EntryKind::Error(text) => {
            for l in text.lines() {
                add(
                    Line::styled(format!("✗ {l}"), Style::default().fg(Color::Red)),
                    2,
                );
            }
        }
        EntryKind::Plan { agent, todos } => plan(agent, todos, &mut add),
        EntryKind::TurnEnd { state, usage } => add(
            Line::styled(
                format!(
                    "── {state} · {} in · {} out · {}",
                    tokens(usage.input_tokens),
                    tokens(usage.output_tokens),
                    usage.cost_text()
                ),
                dim(),
            ),
            0,
        ),
    }
    if selected && let Some(first) = out.iter_mut().find(|l| !l.spans.is_empty()) {
        first.style = first.style.bg(Color::Rgb(40, 40, 60));
    }
    out
}

/// `≡ plan · 1/3 done` (with the agent for a sub-agent's), then one line per item.
fn plan(agent: &str, todos: &[TodoItem], add: &mut impl FnMut(Line<'static>, usize)) {
    let done = todos
        .iter()
        .filter(|t| t.status == TodoStatus::Completed)
        .count();
    let mut head = vec![Span::styled(
        "≡ plan",
        Style::default().add_modifier(Modifier::BOLD),
    )];
    if agent != "main" {
        head.push(Span::styled(
            format!(" of {agent}"),
            Style::default().fg(Color::Cyan),
        ));
    }
    head.push(Span::styled(
        format!(" · {done}/{} done", todos.len()),
        dim(),
    ));
    add(Line::from(head), 2);
    for t in todos {
        let (mark, style) = match t.status {
            TodoStatus::Completed => ("✓", Style::default().fg(Color::Green)),
            TodoStatus::InProgress => (
                "▸",
                Style::default()
                    .fg(Color::Yellow)
                    .add_modifier(Modifier::BOLD),
            ),
            TodoStatus::Pending => ("·", Style::default()),
        };
        let text = if t.status == TodoStatus::Completed {
            dim().add_modifier(Modifier::CROSSED_OUT)
        } else {
            style
        };
        add(
            Line::from(vec![
                Span::styled(format!("  {mark} "), style),
                Span::styled(t.content.clone(), text),
            ]),
            4,
        );
    }
}

/// `✗ failed` or `⊘ cancelled` when a child of a call ended so, else `✓`.
fn children_mark(children: &[String], tasks: &TaskBoard) -> Span<'static> {
    let statuses: Vec<TaskStatus> = children
        .iter()
        .filter_map(|id| tasks.get(id).map(|t| t.status))
        .collect();
    let worst = [TaskStatus::Failed, TaskStatus::Cancelled]
        .into_iter()
        .find(|s| statuses.contains(s));
    match worst {
        Some(TaskStatus::Failed) => Span::styled("  ✗ failed", status_style(TaskStatus::Failed)),
        Some(TaskStatus::Cancelled) => {
            Span::styled("  ⊘ cancelled", status_style(TaskStatus::Cancelled))
        }
        // A child still going: the call itself went well (its status shows below).
        _ => Span::styled("  ✓", Style::default().fg(Color::Green)),
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "not split yet (issue 46): the head line, the result and the child's progress of a tool entry"
)]
fn tool(t: &ToolEntry, tasks: &TaskBoard, now_ms: u64, add: &mut impl FnMut(Line<'static>, usize)) {
    let marker = if t.expanded { "▾" } else { "▸" };
    let direct = t.tool.starts_with('@');
    let mut head = vec![
        Span::styled(format!("{marker} "), dim()),
        Span::styled(t.tool.clone(), Style::default().fg(Color::Cyan)),
    ];
    if direct {
        head.push(Span::raw(format!(" {}", short(&t.args, 70))));
    } else {
        head.push(Span::styled(
            format!("({})", call_title(&t.tool, &t.args)),
            Style::default(),
        ));
    }
    if let Some((added, removed)) = diff::tool_diff_stat(&t.tool, &t.args, t.replaces.as_deref()) {
        head.push(Span::styled(
            format!(" +{added}"),
            Style::default().fg(Color::Green),
        ));
        head.push(Span::styled(
            format!(" -{removed}"),
            Style::default().fg(Color::Red),
        ));
    }
    match &t.result {
        None if !direct => head.push(Span::styled(" …", Style::default().fg(Color::Yellow))),
        None => {}
        // The children below say how a delegation went; the mark sums them up, so a
        // cancelled or failed child is not shown as a success.
        Some((_, false)) if !t.children.is_empty() && !t.expanded => {
            head.push(children_mark(&t.children, tasks))
        }
        Some((out, true)) => head.push(Span::styled(
            format!("  ✗ {}", short(out, 60)),
            Style::default().fg(Color::Red),
        )),
        Some((out, false)) => {
            let n = out.lines().count();
            let what = if n > 1 {
                format!("  ✓ {n} lines")
            } else {
                format!("  ✓ {}", short(out, 60))
            };
            head.push(Span::styled(what, Style::default().fg(Color::Green)));
        }
    }
    add(Line::from(head), 4);
    if t.expanded {
        match diff::tool_diff(&t.tool, &t.args, t.replaces.as_deref()) {
            Some(d) => {
                for l in d {
                    let mut spans = vec![Span::raw("    ")];
                    spans.extend(l.spans);
                    add(Line::from(spans), 6);
                }
            }
            None if !direct => {
                let pretty = serde_json::from_str::<serde_json::Value>(&t.args)
                    .ok()
                    .and_then(|v| serde_json::to_string_pretty(&v).ok())
                    .unwrap_or_else(|| t.args.clone());
                for l in pretty.lines().take(RESULT_LINES) {
                    add(Line::styled(format!("    {l}"), dim()), 6);
                }
            }
            None => {}
        }
        if let Some((out, is_error)) = &t.result {
            let style = if *is_error {
                Style::default().fg(Color::Red)
            } else {
                Style::default()
            };
            let n = out.lines().count();
            for l in out.lines().take(RESULT_LINES) {
                add(Line::styled(format!("    │ {l}"), style), 6);
            }
            if n > RESULT_LINES {
                add(
                    Line::styled(format!("    │ … {} more lines", n - RESULT_LINES), dim()),
                    6,
                );
            }
        }
    }
    for id in &t.children {
        let Some(child) = tasks.get(id) else {
            continue;
        };
        let depth = if child.parent_task.is_some() { 2 } else { 1 };
        let pad = "  ".repeat(depth);
        let mut spans = vec![Span::styled(format!("{pad}├─ "), dim())];
        spans.extend(task_summary(child, now_ms));
        add(Line::from(spans), depth * 2 + 3);
        let running = !child.status.is_terminal();
        if running || t.expanded {
            for p in &child.progress {
                add(Line::styled(format!("{pad}│  {p}"), dim()), depth * 2 + 3);
            }
        }
        if !running {
            let end = match (&child.error, &child.result) {
                (Some(e), _) => Some(Span::styled(
                    format!("{pad}└─ {}", short(e, 100)),
                    Style::default().fg(Color::Red),
                )),
                (None, Some(r)) if !r.is_empty() => {
                    Some(Span::styled(format!("{pad}└─ {}", short(r, 100)), dim()))
                }
                _ => None,
            };
            if let Some(e) = end {
                add(Line::from(e), depth * 2 + 3);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(status: TaskStatus) -> TaskBoard {
        let mut t = cadre_store::NewTask::new("slowkid", "s-1", "sleep");
        t.id = "task_slow0001".into();
        let mut r = t.into_record("node", "1:1", 1_000);
        r.status = status;
        let mut b = TaskBoard::default();
        b.sync(&[r]);
        b
    }

    fn head(status: TaskStatus) -> String {
        let call = EntryKind::Tool(ToolEntry {
            call_id: String::new(),
            tool: "@slowkid".into(),
            args: "sleep a while".into(),
            result: Some(("done".into(), false)),
            expanded: false,
            children: vec!["task_slow0001".into()],
            replaces: None,
        });
        let l = &lines(&call, &board(status), 2_000, false, 100)[0];
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn a_delegation_is_marked_by_how_its_children_ended() {
        assert!(head(TaskStatus::Completed).ends_with("  ✓"));
        let cancelled = head(TaskStatus::Cancelled);
        assert!(cancelled.ends_with("⊘ cancelled"), "{cancelled}");
        assert!(!cancelled.contains('✓'), "{cancelled}");
        assert!(head(TaskStatus::Failed).ends_with("✗ failed"));
    }
}
