//! The lifecycle tools that inspect and control tasks: `task_output`, `task_cancel`,
//! `task_list`. Tasks are scoped to the parent session; replies are `key: value` lines.

use crate::runtime::{RuntimeRef, SubagentRuntime, Taking, Waited};
use cadre_store::TaskRecord;
use cadre_tools::{ToolContext, ToolError, ToolInfo, ToolOutput, TypedTool};
use cadre_types::TaskStatus;
use schemars::JsonSchema;
use serde::Deserialize;
use std::borrow::Cow;
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
    runtime.mark_delivered(t).await;
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

/// Whether `task_output` waits for an unfinished task unless told otherwise.
const DEFAULT_BLOCK: bool = true;

/// The arguments of `task_output`.
#[derive(Deserialize, JsonSchema)]
pub struct OutputArgs {
    /// The task, as `task` or `agent_spawn` named it.
    task_id: String,
    /// Wait for the task to finish (up to `timeout`); false answers at once.
    #[serde(default)]
    #[schemars(extend("default" = DEFAULT_BLOCK))]
    block: Option<bool>,
    /// Milliseconds to wait when blocking.
    #[serde(default)]
    #[schemars(range(max = MAX_WAIT_MS), extend("default" = DEFAULT_WAIT_MS))]
    timeout: Option<u64>,
}

impl OutputArgs {
    /// Whether to wait for an unfinished task.
    fn block(&self) -> bool {
        self.block.unwrap_or(DEFAULT_BLOCK)
    }

    /// How long to wait, within bounds.
    fn wait_ms(&self) -> u64 {
        self.timeout.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_MS)
    }
}

impl TypedTool for TaskOutputTool {
    const INFO: ToolInfo = ToolInfo::delegation("task_output")
        .read_only()
        .titled(&["task_id"]);
    type Args = OutputArgs;

    fn description(&self) -> Cow<'_, str> {
        format!(
            "Get the status and result of a background task. block=true (default) waits up to \
             timeout milliseconds (default {DEFAULT_WAIT_MS}, max {MAX_WAIT_MS}) for it to \
             finish; block=false answers at once. Results are also delivered automatically, so \
             only use this when you need one now."
        )
        .into()
    }

    fn timeout_exempt(&self) -> bool {
        true
    }

    async fn run(&self, a: OutputArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let runtime = self.runtime.get()?;
        let wait = Duration::from_millis(a.wait_ms());
        // Each way is its own boxed future, so a call is as large as the way it takes: as
        // one state machine, every call of a 10 000-call reply held ~2.9 KB at once (the
        // ways' records and waits laid side by side), the most of that reply's peak.
        let out = if a.block() && runtime.runs_here_for(&ctx.run.session_id, &a.task_id) {
            Box::pin(output_waited_here(&runtime, ctx, &a.task_id, wait)).await
        } else {
            Box::pin(output_stored(&runtime, ctx, &a, wait)).await
        };
        Ok(out)
    }
}

/// `task_output` of a task of the caller's session running here, blocking: waited for at
/// once, reading nothing; when it ends, its result (not delivered yet: the parent is in
/// this call) is taken with its end's own write.
async fn output_waited_here(
    runtime: &SubagentRuntime,
    ctx: &ToolContext,
    id: &str,
    wait: Duration,
) -> ToolOutput {
    let session = &ctx.run.session_id;
    let ended = match runtime
        .wait_to_take(session, id, &ctx.cancel, Some(wait))
        .await
    {
        // Delivered by its end's own write.
        Taking::Taken(t) => Some(t),
        // Written for this caller; read it (delivered now if that write was refused).
        Taking::Claimed => done(runtime.stored_end(id).await),
        Taking::Ended => match runtime.deliver_finished(session, id).await {
            Some(t) => Some(Box::new(t)),
            None => done(runtime.stored_end(id).await),
        },
        Taking::Aborted | Taking::TimedOut => return timed_out(runtime, ctx, id, wait).await,
    };
    match ended {
        Some(t) => finished(runtime, &t).await,
        None => unknown(id),
    }
}

/// The record of a `Waited::Done`.
fn done(w: Waited) -> Option<Box<TaskRecord>> {
    match w {
        Waited::Done(t) => Some(t),
        _ => None,
    }
}

/// `task_output` of any other task: one that ended, one running elsewhere or not blocked
/// on, or one that is not the caller's.
async fn output_stored(
    runtime: &SubagentRuntime,
    ctx: &ToolContext,
    a: &OutputArgs,
    wait: Duration,
) -> ToolOutput {
    let id = a.task_id.as_str();
    // One of the caller's that ended (the common case: before the call; its result may
    // have been delivered at a turn's start) is shown and marked delivered in one write,
    // without reading it first.
    let taken = if runtime.runs_here(id) {
        None
    } else {
        runtime.deliver_finished(&ctx.run.session_id, id).await
    };
    if let Some(t) = taken.map(Box::new) {
        return finished(runtime, &t).await;
    }
    // Any other is read: it may run here or elsewhere, or not be the caller's.
    let Some(t) = lookup(runtime, ctx, id).await.map(Box::new) else {
        return unknown(id);
    };
    if t.status.is_terminal() {
        return finished(runtime, &t).await;
    }
    if !a.block() {
        return ToolOutput::ok(describe_running(runtime, &t, "still running"));
    }
    drop(t);
    // Boxed: a long wait holds only what waiting needs.
    match Box::pin(runtime.wait_for(id, &ctx.cancel, Some(wait))).await {
        Waited::Done(t) => finished(runtime, &t).await,
        Waited::Unknown => unknown(id),
        Waited::Aborted | Waited::TimedOut => timed_out(runtime, ctx, id, wait).await,
    }
}

/// `task_output`'s answer when its wait ended before the task: how the task stands now.
async fn timed_out(
    runtime: &SubagentRuntime,
    ctx: &ToolContext,
    id: &str,
    wait: Duration,
) -> ToolOutput {
    match lookup(runtime, ctx, id).await {
        Some(now) => ToolOutput::ok(describe_running(
            runtime,
            &now,
            &format!(
                "timed out waiting after {} ms; the task is still running",
                wait.as_millis()
            ),
        )),
        None => unknown(id),
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

/// The arguments of `task_cancel`.
#[derive(Deserialize, JsonSchema)]
pub struct CancelArgs {
    /// The task to cancel.
    task_id: String,
}

impl TypedTool for TaskCancelTool {
    const INFO: ToolInfo = ToolInfo::delegation("task_cancel")
        .read_only()
        .titled(&["task_id"]);
    type Args = CancelArgs;

    fn description(&self) -> Cow<'_, str> {
        "Cancel a running task: its sub-agent stops at once (no further model or tool calls)."
            .into()
    }

    fn timeout_exempt(&self) -> bool {
        true
    }

    async fn run(&self, a: CancelArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let runtime = self.runtime.get()?;
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

/// Which tasks `task_list` shows: those in one state, or all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum StatusFilter {
    /// Every task.
    #[default]
    All,
    /// The tasks in this state.
    Only(TaskStatus),
}

impl StatusFilter {
    /// The filter's name, as the model writes it.
    fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Only(status) => status.as_str(),
        }
    }

    /// Every filter, in the order the model is offered them.
    fn names() -> impl Iterator<Item = &'static str> {
        TaskStatus::ALL
            .into_iter()
            .map(|s| Self::Only(s).as_str())
            .chain([Self::All.as_str()])
    }
}

impl TryFrom<String> for StatusFilter {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        if name == Self::All.as_str() {
            return Ok(Self::All);
        }
        TaskStatus::parse(&name).map(Self::Only).ok_or_else(|| {
            let names: Vec<&str> = Self::names().collect();
            format!(
                "status_filter must be one of {} (got {name})",
                names.join(", ")
            )
        })
    }
}

impl JsonSchema for StatusFilter {
    fn schema_name() -> Cow<'static, str> {
        "StatusFilter".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = Self::names().collect();
        schemars::json_schema!({"type": "string", "enum": names})
    }
}

/// The arguments of `task_list`.
#[derive(Deserialize, JsonSchema)]
pub struct ListArgs {
    /// Only the tasks in this state.
    #[serde(default)]
    #[schemars(extend("default" = StatusFilter::All.as_str()))]
    status_filter: Option<StatusFilter>,
}

impl TypedTool for TaskListTool {
    const INFO: ToolInfo = ToolInfo::delegation("task_list").read_only();
    type Args = ListArgs;

    fn description(&self) -> Cow<'_, str> {
        "List this session's sub-agent tasks with status, creation time, token use and cost.".into()
    }

    async fn run(&self, a: ListArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let runtime = self.runtime.get()?;
        let filter = a.status_filter.unwrap_or_default();
        let wanted = match filter {
            StatusFilter::All => None,
            StatusFilter::Only(status) => Some(status),
        };
        let tasks: Vec<TaskRecord> = runtime
            .tasks_of(&ctx.run.session_id)
            .await
            .into_iter()
            .filter(|t| wanted.is_none_or(|w| t.status == w))
            .collect();
        let mut out = format!(
            "tasks: {} (status_filter: {})",
            tasks.len(),
            filter.as_str()
        );
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
