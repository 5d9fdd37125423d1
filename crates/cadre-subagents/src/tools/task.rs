//! The `task` tool: delegate one job to a sub-agent, in the foreground (wait for the
//! answer) or the background (get a task id at once; the result arrives by itself).

use crate::Isolation;
use crate::runtime::results::ShownResult;
use crate::runtime::{Inherited, Parent, RuntimeRef, SpawnRequest, SubagentRuntime, Waited};
use cadre_store::TaskRecord;
use cadre_tools::{
    PromptArgs, RunContext, ToolContext, ToolError, ToolInfo, ToolOutput, TypedTool,
};
use cadre_types::TaskStatus;
use schemars::JsonSchema;
use serde::Deserialize;
use std::borrow::Cow;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The `task` tool.
pub struct TaskTool {
    runtime: RuntimeRef,
    /// What the agent holding this tool passes down to its children.
    inherited: Arc<Inherited>,
}

delegating_constructors!(TaskTool);

/// The arguments of `task`.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// Which agent does the job.
    subagent_type: String,
    /// A short (3-7 word) title of the job.
    #[serde(default)]
    description: String,
    /// The full brief; the only context the sub-agent gets.
    prompt: String,
    /// Run in the background and return a task id at once.
    #[serde(default)]
    background: bool,
    /// Run the sub-agent in its own git worktree on a new branch from your HEAD; its changes
    /// come back as a commit on that branch (the result names it), your files stay untouched.
    #[serde(default)]
    isolation: Option<Isolation>,
    /// Put the sub-agent in your team of this name for its task (created on first use; you
    /// lead it): it gets the team tools, messages members and shares their board.
    #[serde(default)]
    team: Option<String>,
}

/// Escape text for inclusion in the XML-like task envelope.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            other => out.push(other),
        }
    }
    out
}

/// The attributes of a finished task's envelope that say how complete its result is:
/// ` complete="true"`, or ` complete="false" reason="max_turns"`.
pub fn completeness_attrs(snap: &TaskRecord) -> String {
    match snap.incomplete_reason() {
        None => " complete=\"true\"".to_string(),
        Some(reason) => format!(" complete=\"false\" reason=\"{reason}\""),
    }
}

/// Render a finished task for the parent model, with its result as `shown`.
pub fn render_result(snap: &TaskRecord, shown: &ShownResult) -> ToolOutput {
    let result = shown.envelope();
    let complete = completeness_attrs(snap);
    match snap.status {
        TaskStatus::Completed => ToolOutput::ok(format!(
            "<task state=\"completed\"{complete}>{result}</task>"
        )),
        TaskStatus::Cancelled => ToolOutput::error(format!(
            "<task state=\"cancelled\"{complete}>{result}</task>"
        )),
        _ => {
            let error = xml_escape(snap.error.as_deref().unwrap_or("the sub-agent failed"));
            ToolOutput::error(format!(
                "<task state=\"failed\"{complete}><error>{error}</error>{result}</task>"
            ))
        }
    }
}

/// The result of the parent's `task` call `call_id` of an earlier run that was lost while
/// the call ran, from the task the call started (recorded with the call's id): `None` when
/// the call started no task (it never reached the store, so running it again starts the
/// only child). A background task answers as its call did (its end is delivered like any
/// other); a foreground one with its end, waited for (until `cancel`) when it still runs —
/// adopted and continued by this process, or failed by restart recovery, per its
/// `on_orphan`. Never a second child for the same call.
pub(crate) async fn settle_interrupted(
    runtime: &SubagentRuntime,
    run: &RunContext,
    call_id: &str,
    cancel: &CancellationToken,
) -> Option<ToolOutput> {
    let tasks = match runtime.store().list_by_session(&run.session_id).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(call = call_id, error = %e, "store: cannot look for the task of an interrupted call");
            return None;
        }
    };
    // The newest: a call id reused after its first use was compacted away names the
    // latest task.
    let task = tasks
        .into_iter()
        .rev()
        .find(|t| t.parent_call_id.as_deref() == Some(call_id))?;
    if task.background {
        return Some(running(&task.id));
    }
    let ended = if task.status.is_terminal() {
        task
    } else {
        match runtime.wait_for(&task.id, cancel, None).await {
            Waited::Done(r) => *r,
            Waited::Aborted | Waited::TimedOut | Waited::Unknown => {
                return Some(ToolOutput::error(format!(
                    "<task id=\"{}\" state=\"{}\"/>\nThe run stopped before the sub-agent \
                     ended; it was not started again.",
                    task.id, task.status
                )));
            }
        }
    };
    Some(render_result(&ended, &runtime.shown_result(&ended)))
}

/// What a background `task` call answers at once.
fn running(task_id: &str) -> ToolOutput {
    ToolOutput::ok(format!("<task id=\"{task_id}\" state=\"running\"/>"))
}

impl TypedTool for TaskTool {
    const INFO: ToolInfo = ToolInfo::delegation("task")
        // Delegating reads nothing and writes nothing by itself; the child's own tool calls
        // go through the child's permission policy.
        .read_only()
        .foreign_names(&["Task", "Agent"])
        .prompts(PromptArgs {
            definition: &["subagent_type"],
            address: &[],
            what: &["description", "prompt"],
        });
    type Args = Args;

    fn description(&self) -> Cow<'_, str> {
        let catalogue = self
            .runtime
            .upgrade()
            .map(|r| r.registry().catalogue())
            .unwrap_or_default();
        format!(
            "Delegate a self-contained job to a sub-agent. The sub-agent starts with a fresh \
             context: it sees only `prompt`, not this conversation, and returns only its final \
             answer. Use it for work that needs many tool calls, broad searches, or independent \
             parts that can run in parallel (issue several task calls in one reply). Write the \
             prompt as a complete brief: goal, what is known, where to look, what to return. \
             With background=true you get a task id at once and the result is delivered to you \
             automatically when it is done; do not poll.\n\nAvailable agents:\n{catalogue}"
        )
        .into()
    }

    /// The agents there are to delegate to, known only at run time.
    fn refine_schema(&self, schema: &mut serde_json::Value) {
        let runtime = self.runtime.upgrade();
        let defs: Vec<_> = runtime.iter().flat_map(|r| r.registry().list()).collect();
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        schema["properties"]["subagent_type"]["enum"] = names.into();
    }

    fn timeout_exempt(&self) -> bool {
        true
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let runtime = self.runtime.get()?;
        let description = if args.description.trim().is_empty() {
            crate::short_title(&args.prompt)
        } else {
            args.description
        };
        let parent = Parent::of_call(ctx, &self.inherited);
        let team = args.team.filter(|t| !t.trim().is_empty()).or_else(|| {
            runtime
                .registry()
                .get(&args.subagent_type)
                .and_then(|d| d.team.clone())
        });
        let request = SpawnRequest {
            agent: args.subagent_type,
            prompt: args.prompt,
            description,
            background: args.background,
            isolation: args.isolation,
            call_id: Some(ctx.call_id.clone()),
        };
        // Boxed: its ~1.7 KB is held while it starts the child, not by every foreground
        // call for as long as it waits.
        let started = match team {
            Some(t) => Box::pin(runtime.spawn_in_team(request, &t, &parent)).await,
            None => Box::pin(runtime.spawn(request, &parent)).await,
        }
        .map_err(|e| ToolError::Failed(e.to_string()))?;
        if args.background {
            return Ok(running(&started.task_id));
        }
        let timeout = runtime.config().task_timeout;
        // Its end boxed: matched on across the promotion's await, a record in place would be
        // laid beside the wait in this call's future, doubling what every waiting call holds.
        let ended = runtime
            .wait(&started.task_id, &parent, timeout)
            .await
            .map(Box::new);
        match ended {
            Some(snap) => Ok(render_result(&snap, &runtime.shown_result(&snap))),
            None => {
                // Timed out: the same child keeps running as a background task.
                runtime.promote(&started.task_id).await;
                Ok(ToolOutput::ok(format!(
                    "<task id=\"{}\" state=\"running\"/>\nNo result within {}s; the sub-agent continues in the background and its result will be delivered to you when it finishes.",
                    started.task_id,
                    timeout.map_or(0, |t| t.as_secs())
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_xml_escaped() {
        assert_eq!(xml_escape("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
    }
}
