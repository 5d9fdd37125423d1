//! The lifecycle tools that inspect and control tasks: `task_output`, `task_cancel`,
//! `task_list`. Tasks are scoped to the parent session; replies are `key: value` lines.

use crate::runtime::{RuntimeRef, SubagentRuntime, Waited};
use async_trait::async_trait;
use cadre_store::TaskRecord;
use cadre_tools::{Tool, ToolContext, ToolError, ToolOutput, parse_args};
use cadre_types::{TaskStatus, ToolDefinition};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

/// Default wait of `task_output`, in milliseconds.
pub const DEFAULT_WAIT_MS: u64 = 30_000;
/// Longest wait of `task_output`, in milliseconds.
pub const MAX_WAIT_MS: u64 = 600_000;
/// How long `task_cancel` waits for the child to stop before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// RFC 3339 time of a Unix-millisecond timestamp.
pub fn timestamp(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

fn describe(t: &TaskRecord) -> String {
    let mut s = format!(
        "task_id: {}\nagent_id: {}\nstatus: {}\ncreated_at: {}\nupdated_at: {}\ndescription: {}\ntokens: {}\ncost: {}",
        t.id,
        t.agent_id,
        t.status,
        timestamp(t.created_at),
        timestamp(t.updated_at),
        t.description,
        t.usage.tokens_text(),
        t.usage
            .cost_usd()
            .map_or_else(|| "unknown".to_string(), cadre_types::format_usd)
    );
    if let Some(e) = &t.error {
        s.push_str(&format!("\nerror: {e}"));
    }
    if t.status.is_terminal() {
        match t.incomplete_reason() {
            None => s.push_str("\ncomplete: true"),
            Some(reason) => s.push_str(&format!("\ncomplete: false (reason: {reason})")),
        }
    }
    s
}

/// `describe` plus the task's recent progress, for a task that has not finished.
fn describe_running(runtime: &SubagentRuntime, t: &TaskRecord, note: &str) -> String {
    let mut s = describe(t);
    let lines = runtime.progress_of(&t.id);
    if !lines.is_empty() {
        s.push_str("\nrecent progress:");
        for l in &lines {
            s.push_str("\n  ");
            s.push_str(&l.render());
        }
    }
    s.push_str("\nnote: ");
    s.push_str(note);
    s
}

async fn lookup(runtime: &SubagentRuntime, ctx: &ToolContext, id: &str) -> Option<TaskRecord> {
    runtime.task(&ctx.run.session_id, id).await
}

fn unknown(id: &str) -> ToolOutput {
    ToolOutput::error(format!("Error: Unknown task_id: {id}"))
}

async fn finished(runtime: &SubagentRuntime, t: &TaskRecord) -> ToolOutput {
    runtime.mark_delivered(&t.id).await;
    let mut s = describe(t);
    if t.result.is_some() {
        let shown = runtime.shown_result(t);
        s.push_str(&format!("\nresult: {}", shown.text));
        if let Some((path, bytes)) = &shown.file {
            s.push_str(&format!(
                "\nresult_file: {} ({bytes} bytes; the first {} are shown above; read the whole \
                 result with read_file)",
                path.display(),
                shown.text.len()
            ));
        }
    }
    ToolOutput::ok(s)
}

/// `task_output(task_id, block?, timeout?)`.
pub struct TaskOutputTool {
    runtime: RuntimeRef,
}

impl TaskOutputTool {
    /// The tool over `runtime`.
    pub fn new(runtime: &Arc<SubagentRuntime>) -> Self {
        Self {
            runtime: RuntimeRef::new(runtime),
        }
    }
}

#[derive(Deserialize)]
struct OutputArgs {
    task_id: String,
    #[serde(default)]
    block: Option<bool>,
    #[serde(default)]
    timeout: Option<u64>,
}

#[async_trait]
impl Tool for TaskOutputTool {
    fn name(&self) -> &str {
        "task_output"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "task_output".into(),
            description: "Get the status and result of a background task. block=true (default) waits up to \
                timeout milliseconds (default 30000, max 600000) for it to finish; block=false answers at once. \
                Results are also delivered automatically, so only use this when you need one now."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task_id": {"type": "string"},
                    "block": {"type": "boolean", "default": true},
                    "timeout": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS, "default": DEFAULT_WAIT_MS, "description": "Milliseconds to wait when blocking."}
                },
                "required": ["task_id"]
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn timeout_exempt(&self) -> bool {
        true
    }

    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let runtime = self.runtime.get()?;
        let a: OutputArgs = parse_args(args)?;
        let Some(t) = lookup(&runtime, ctx, &a.task_id).await else {
            return Ok(unknown(&a.task_id));
        };
        if t.status.is_terminal() {
            return Ok(finished(&runtime, &t).await);
        }
        if !a.block.unwrap_or(true) {
            return Ok(ToolOutput::ok(describe_running(
                &runtime,
                &t,
                "still running",
            )));
        }
        let ms = a.timeout.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_MS);
        match runtime
            .wait_for(&a.task_id, &ctx.cancel, Some(Duration::from_millis(ms)))
            .await
        {
            Waited::Done(t) => Ok(finished(&runtime, &t).await),
            Waited::Unknown => Ok(unknown(&a.task_id)),
            Waited::Aborted | Waited::TimedOut => {
                let now = lookup(&runtime, ctx, &a.task_id).await.unwrap_or(t);
                Ok(ToolOutput::ok(describe_running(
                    &runtime,
                    &now,
                    &format!("timed out waiting after {ms} ms; the task is still running"),
                )))
            }
        }
    }
}

/// `task_cancel(task_id)`.
pub struct TaskCancelTool {
    runtime: RuntimeRef,
}

impl TaskCancelTool {
    /// The tool over `runtime`.
    pub fn new(runtime: &Arc<SubagentRuntime>) -> Self {
        Self {
            runtime: RuntimeRef::new(runtime),
        }
    }
}

#[derive(Deserialize)]
struct CancelArgs {
    task_id: String,
}

#[async_trait]
impl Tool for TaskCancelTool {
    fn name(&self) -> &str {
        "task_cancel"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "task_cancel".into(),
            description: "Cancel a running task: its sub-agent stops at once (no further model or tool calls).".into(),
            parameters: json!({
                "type": "object",
                "properties": {"task_id": {"type": "string"}},
                "required": ["task_id"]
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn timeout_exempt(&self) -> bool {
        true
    }

    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let runtime = self.runtime.get()?;
        let a: CancelArgs = parse_args(args)?;
        let Some(t) = lookup(&runtime, ctx, &a.task_id).await else {
            return Ok(unknown(&a.task_id));
        };
        if t.status.is_terminal() {
            return Ok(ToolOutput::ok(format!(
                "task_id: {}\nstatus: {}\nnote: the task had already finished; nothing to cancel",
                t.id, t.status
            )));
        }
        let _ = runtime.cancel_task(&ctx.run.session_id, &a.task_id).await;
        let after = match runtime
            .wait_for(&a.task_id, &CancellationToken::new(), Some(CANCEL_WAIT))
            .await
        {
            Waited::Done(t) => *t,
            _ => lookup(&runtime, ctx, &a.task_id).await.unwrap_or(t),
        };
        let note = if after.status == TaskStatus::Cancelled {
            "the sub-agent was stopped"
        } else if after.status.is_terminal() {
            "the task finished before the cancellation took effect"
        } else {
            "cancellation requested; the sub-agent is stopping"
        };
        Ok(ToolOutput::ok(format!(
            "task_id: {}\nstatus: {}\nnote: {note}",
            after.id, after.status
        )))
    }
}

/// `task_list(status_filter?)`.
pub struct TaskListTool {
    runtime: RuntimeRef,
}

impl TaskListTool {
    /// The tool over `runtime`.
    pub fn new(runtime: &Arc<SubagentRuntime>) -> Self {
        Self {
            runtime: RuntimeRef::new(runtime),
        }
    }
}

#[derive(Deserialize)]
struct ListArgs {
    #[serde(default)]
    status_filter: Option<String>,
}

#[async_trait]
impl Tool for TaskListTool {
    fn name(&self) -> &str {
        "task_list"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "task_list".into(),
            description:
                "List this session's sub-agent tasks with status, creation time, token use and cost."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "status_filter": {"type": "string", "enum": ["pending", "running", "completed", "failed", "cancelled", "all"], "default": "all"}
                }
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let runtime = self.runtime.get()?;
        let a: ListArgs = parse_args(args)?;
        let filter = a.status_filter.unwrap_or_else(|| "all".into());
        let wanted = match filter.as_str() {
            "all" => None,
            other => match TaskStatus::parse(other) {
                Some(s) => Some(s),
                None => {
                    return Err(ToolError::InvalidArgs(format!(
                        "status_filter must be one of pending, running, completed, failed, cancelled, all (got {other})"
                    )));
                }
            },
        };
        let tasks: Vec<TaskRecord> = runtime
            .tasks_of(&ctx.run.session_id)
            .await
            .into_iter()
            .filter(|t| wanted.is_none_or(|w| t.status == w))
            .collect();
        let mut out = format!("tasks: {} (status_filter: {filter})", tasks.len());
        for t in &tasks {
            out.push_str("\n\n");
            out.push_str(&describe(t));
        }
        Ok(ToolOutput::ok(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00Z");
    }
}
