//! `todo_write`: the agent's plan for the session, rewritten whole on every call. The plan
//! lives in the transcript (the call's arguments), so a resumed session has it; each call
//! and each resume emits it as an [`Event::Todo`].

use crate::{ToolContext, ToolError, ToolInfo, ToolOutput, TypedTool};
use cadre_types::{Event, EventEnvelope, Message, TodoItem, TodoStatus};
use schemars::JsonSchema;
use serde::Deserialize;
use std::borrow::Cow;

/// The tool's name, which its calls in a transcript carry.
pub const TODO_WRITE: &str = "todo_write";
/// Items in one plan at most.
const MAX_ITEMS: usize = 100;
/// Characters of one item at most.
const MAX_CONTENT_CHARS: usize = TodoItem::MAX_CONTENT_CHARS;

const DESCRIPTION: &str = "Write your plan for this session as a checklist, to track multi-step \
work and show the user where you are. Each call replaces the whole list: send every item, \
each with `content` (what to do, imperative) and `status` (`pending`, `in_progress` or \
`completed`). Keep one item `in_progress` at a time, mark an item `completed` as soon as it is \
done, and add items you discover. Skip it for one-step tasks. The list is shown to the user; \
it does not run anything.";

/// Records the agent's plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoWriteTool;

/// The arguments of `todo_write`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The whole plan, in order.
    #[schemars(length(max = MAX_ITEMS))]
    todos: Vec<TodoItem>,
}

/// Check a plan against the bounds; the message says what to fix.
fn validate(todos: &[TodoItem]) -> Result<(), ToolError> {
    if todos.len() > MAX_ITEMS {
        return Err(ToolError::InvalidArgs(format!(
            "{} items; a plan holds at most {MAX_ITEMS}: merge or drop some",
            todos.len()
        )));
    }
    for (i, t) in todos.iter().enumerate() {
        if t.content.trim().is_empty() {
            return Err(ToolError::InvalidArgs(format!(
                "item {} has no content",
                i + 1
            )));
        }
        if t.content.chars().count() > MAX_CONTENT_CHARS {
            return Err(ToolError::InvalidArgs(format!(
                "item {} is longer than {MAX_CONTENT_CHARS} characters: say it shorter",
                i + 1
            )));
        }
    }
    Ok(())
}

/// The plan as the model reads it back: a count, then one line per item.
fn render(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "Plan cleared.".to_string();
    }
    let done = todos
        .iter()
        .filter(|t| t.status == TodoStatus::Completed)
        .count();
    let mut out = format!("Plan updated ({done}/{} completed):", todos.len());
    for t in todos {
        let mark = match t.status {
            TodoStatus::Completed => "[x]",
            TodoStatus::InProgress => "[>]",
            TodoStatus::Pending => "[ ]",
        };
        out.push('\n');
        out.push_str(mark);
        out.push(' ');
        out.push_str(t.content.trim());
    }
    out
}

/// The plan the last successful `todo_write` call in `history` left in force.
pub fn current_plan(history: &[Message]) -> Option<Vec<TodoItem>> {
    let failed: std::collections::HashSet<&str> = history
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                is_error: true,
                ..
            } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    history.iter().rev().find_map(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls.iter().rev().find_map(|c| {
            if c.name != TODO_WRITE || failed.contains(c.id.as_str()) {
                return None;
            }
            let args: Args = serde_json::from_str(&c.arguments).ok()?;
            validate(&args.todos).ok()?;
            Some(args.todos)
        }),
        _ => None,
    })
}

impl TypedTool for TodoWriteTool {
    const INFO: ToolInfo = ToolInfo::builtin(TODO_WRITE).read_only().foreign_names(&[
        "TodoWrite",
        "todowrite",
        "write_todos",
    ]);
    type Args = Args;

    fn description(&self) -> Cow<'_, str> {
        DESCRIPTION.into()
    }

    /// It changes nothing but the plan shown to the user.
    fn resumed_state(&self, history: &[Message]) -> Option<Event> {
        current_plan(history).map(|todos| Event::Todo { todos })
    }

    async fn run(&self, Args { todos }: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        validate(&todos)?;
        let text = render(&todos);
        ctx.run.events.emit(EventEnvelope {
            session_id: ctx.run.session_id.clone(),
            agent: ctx.run.agent.clone(),
            task_id: ctx.run.task_id.clone(),
            event: Event::Todo { todos },
        });
        Ok(ToolOutput::ok(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_types::ToolCall;
    use serde_json::json;

    fn item(content: &str, status: TodoStatus) -> TodoItem {
        TodoItem {
            content: content.into(),
            status,
        }
    }

    fn call(id: &str, args: serde_json::Value) -> Message {
        Message::Assistant {
            content: String::new(),
            thinking: None,
            thinking_signature: None,
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: TODO_WRITE.into(),
                arguments: args.to_string(),
            }],
        }
    }

    fn result(id: &str, is_error: bool) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: TODO_WRITE.into(),
            content: String::new(),
            is_error,
            images: Vec::new(),
        }
    }

    #[test]
    fn the_plan_in_force_is_the_last_accepted_call() {
        let first = json!({"todos": [{"content": "read", "status": "in_progress"}]});
        let second = json!({"todos": [
            {"content": "read", "status": "completed"},
            {"content": "fix", "status": "in_progress"}
        ]});
        let refused = json!({"todos": [{"content": "", "status": "pending"}]});
        let history = vec![
            Message::user("go"),
            call("c1", first),
            result("c1", false),
            call("c2", second),
            result("c2", false),
            call("c3", refused),
            result("c3", true),
        ];
        assert_eq!(
            current_plan(&history),
            Some(vec![
                item("read", TodoStatus::Completed),
                item("fix", TodoStatus::InProgress)
            ])
        );
        assert_eq!(current_plan(&history[..1]), None);
    }

    #[test]
    fn plans_are_bounded_and_rendered_as_a_checklist() {
        let many: Vec<TodoItem> = (0..=MAX_ITEMS)
            .map(|i| item(&format!("step {i}"), TodoStatus::Pending))
            .collect();
        assert!(validate(&many).is_err());
        assert!(validate(&[item(&"x".repeat(501), TodoStatus::Pending)]).is_err());
        assert!(validate(&[item("  ", TodoStatus::Pending)]).is_err());
        let text = render(&[
            item("read", TodoStatus::Completed),
            item("fix", TodoStatus::InProgress),
            item("test", TodoStatus::Pending),
        ]);
        assert_eq!(
            text,
            "Plan updated (1/3 completed):\n[x] read\n[>] fix\n[ ] test"
        );
        assert_eq!(render(&[]), "Plan cleared.");
    }
}
