//! Event sinks of the command line: human text (answer on stdout, progress on stderr) and
//! JSONL (one event per line on stdout). Logs never go to stdout.

use cadre_subagents::call_title;
use cadre_types::{EndState, Event, EventEnvelope, EventSink, TodoItem, TodoStatus, UpdateKind};
use std::io::Write;
use std::sync::Mutex;

/// Prints events as JSON lines on stdout.
#[derive(Debug, Default)]
pub struct JsonlSink {
    lock: Mutex<()>,
}

impl EventSink for JsonlSink {
    fn emit(&self, event: EventEnvelope) {
        if let Ok(line) = serde_json::to_string(&event) {
            let _guard = self.lock.lock();
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

/// Renders events for a person.
#[derive(Debug, Default)]
pub struct TextSink {
    state: Mutex<TextState>,
}

#[derive(Debug, Default)]
struct TextState {
    /// True when stdout is in the middle of a line of streamed text.
    mid_line: bool,
}

/// First line of `s`, cut to `max` characters.
pub fn short(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    if line.chars().count() <= max {
        line.to_string()
    } else {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// A plan as progress lines: a heading with the count done, then one marked line per item.
fn plan_lines(todos: &[TodoItem]) -> String {
    let done = todos
        .iter()
        .filter(|t| t.status == TodoStatus::Completed)
        .count();
    let mut out = format!("plan ({done}/{} done)", todos.len());
    for t in todos {
        let mark = match t.status {
            TodoStatus::Completed => "✓",
            TodoStatus::InProgress => "▸",
            TodoStatus::Pending => "·",
        };
        out.push_str(&format!("\n  {mark} {}", short(&t.content, 100)));
    }
    out
}

impl TextSink {
    fn progress(&self, st: &mut TextState, line: &str) {
        if st.mid_line {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out);
            let _ = out.flush();
            st.mid_line = false;
        }
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
    }
}

impl EventSink for TextSink {
    fn emit(&self, env: EventEnvelope) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let main = env.agent == "main";
        match env.event {
            Event::TextDelta { text } if main => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
                st.mid_line = !text.ends_with('\n');
            }
            Event::ToolStart { tool, args, .. } => {
                let prefix = if main {
                    String::new()
                } else {
                    format!("[{}] ", env.agent)
                };
                self.progress(&mut st, &format!("{prefix}▸ {tool}({})", call_title(&tool, &args, 100)));
            }
            Event::ToolResult {
                tool,
                output,
                is_error: true,
                ..
            } => {
                let prefix = if main {
                    String::new()
                } else {
                    format!("[{}] ", env.agent)
                };
                self.progress(
                    &mut st,
                    &format!("{prefix}✗ {tool}: {}", short(&output, 120)),
                );
            }
            Event::SubagentUpdate { update } => {
                let name = &update.agent;
                let line = match update.kind {
                    UpdateKind::Start => {
                        Some(format!("[{name}] started: {}", short(&update.text, 80)))
                    }
                    UpdateKind::Resumed => Some(format!("[{name}] ↻ {}", short(&update.text, 120))),
                    UpdateKind::ToolStart => Some(format!(
                        "[{name}] ▸ {}({})",
                        update.tool.as_deref().unwrap_or("?"),
                        call_title(update.tool.as_deref().unwrap_or(""), &update.text, 100)
                    )),
                    UpdateKind::Done => Some(format!("[{name}] ✓ done")),
                    UpdateKind::Error => Some(format!("[{name}] ✗ {}", short(&update.text, 120))),
                    UpdateKind::Cancelled => Some(format!("[{name}] ✗ cancelled")),
                    UpdateKind::Compaction => {
                        Some(format!("[{name}] compacted: {}", short(&update.text, 120)))
                    }
                    UpdateKind::Delta | UpdateKind::Thinking | UpdateKind::ToolResult => None,
                };
                if let Some(line) = line {
                    self.progress(&mut st, &line);
                }
            }
            Event::Todo { todos } => {
                let prefix = if main {
                    String::new()
                } else {
                    format!("[{}] ", env.agent)
                };
                self.progress(&mut st, &format!("{prefix}{}", plan_lines(&todos)));
            }
            Event::Notice { message } => self.progress(&mut st, &format!("! {message}")),
            Event::Compaction {
                replaced_messages,
                tokens_before,
                tokens_after,
                model,
            } => self.progress(
                &mut st,
                &format!(
                    "⇣ compacted: {replaced_messages} messages summarised by {model}, about {tokens_before} → {tokens_after} tokens"
                ),
            ),
            Event::Done {
                state,
                turns,
                usage,
                ..
            } if main => {
                let verdict = match &state {
                    EndState::Completed => "completed".to_string(),
                    other => other.to_string(),
                };
                let line = format!(
                    "— {verdict} · {turns} turn{} · {}",
                    if turns == 1 { "" } else { "s" },
                    usage.summary()
                );
                self.progress(&mut st, &line);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut() {
        assert!(short(&"x".repeat(200), 10).ends_with('…'));
    }

    #[test]
    fn plans_show_each_item_with_its_state() {
        let item = |content: &str, status| TodoItem {
            content: content.into(),
            status,
        };
        let shown = plan_lines(&[
            item("read", TodoStatus::Completed),
            item("fix", TodoStatus::InProgress),
            item("test", TodoStatus::Pending),
        ]);
        assert_eq!(shown, "plan (1/3 done)\n  ✓ read\n  ▸ fix\n  · test");
    }
}
