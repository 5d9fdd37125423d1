//! The lifecycle tools that create, talk to and close live children: `agent_spawn`,
//! `agent_send`, `agent_list`, `agent_close`. Thin adapters over the runtime; replies are
//! `key: value` lines.

use crate::Isolation;
use crate::runtime::live::LiveChild;
use crate::runtime::{Inherited, LiveRequest, Parent, RuntimeRef, Started, SubagentRuntime};
use cadre_tools::{PromptArgs, ToolContext, ToolError, ToolInfo, ToolOutput, TypedTool};
use cadre_types::TaskStatus;
use schemars::JsonSchema;
use serde::Deserialize;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

/// Default wait of a synchronous spawn or send.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Longest wait of a synchronous spawn or send.
pub const MAX_TIMEOUT_SECS: u64 = 600;

fn error(msg: impl std::fmt::Display) -> ToolOutput {
    ToolOutput::error(format!("Error: {msg}"))
}

fn header(child: &LiveChild) -> String {
    format!(
        "agent_key: {}\nagent_id: {}\nsession_id: {}\n",
        child.key, child.agent_id, child.child.session_id
    )
}

/// How long `agent_spawn` and `agent_send` wait for the reply.
#[derive(Deserialize, JsonSchema)]
pub struct ReplyWait {
    /// Seconds to wait for the reply; 0 runs the task in the background and answers at once.
    #[serde(default)]
    #[schemars(range(max = MAX_TIMEOUT_SECS), extend("default" = DEFAULT_TIMEOUT_SECS))]
    timeout_seconds: Option<u64>,
}

impl ReplyWait {
    /// The wait in seconds, within bounds; 0 means background.
    fn seconds(&self) -> u64 {
        self.timeout_seconds
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .min(MAX_TIMEOUT_SECS)
    }
}

/// Which live child a call addresses: its full agent key or its label, exactly one.
#[derive(Deserialize, JsonSchema)]
pub struct AgentAddress {
    /// The full agent_key from agent_spawn (agent:<id>:<uuid>).
    #[serde(default)]
    agent_key: Option<String>,
    /// The label given at agent_spawn.
    #[serde(default)]
    label: Option<String>,
}

/// Give `child` a message and answer per `wait` (0 seconds = background).
async fn deliver(
    runtime: &SubagentRuntime,
    child: &LiveChild,
    message: String,
    wait: &ReplyWait,
    parent: &Parent,
) -> ToolOutput {
    let started = match runtime
        .start(
            &child.child,
            message.clone(),
            crate::short_title(&message),
            wait.seconds() == 0,
            parent,
        )
        .await
    {
        Ok(s) => s,
        Err(e) => return error(e),
    };
    child.set_last_task(&started.task_id);
    answer(runtime, child, &started, wait, parent).await
}

/// The answer to a message `child` was given as task `started`, per `wait`.
async fn answer(
    runtime: &SubagentRuntime,
    child: &LiveChild,
    started: &Started,
    wait: &ReplyWait,
    parent: &Parent,
) -> ToolOutput {
    let secs = wait.seconds();
    let background = secs == 0;
    let head = header(child);
    if background {
        return ToolOutput::ok(format!(
            "{head}status: accepted\ntask_id: {}\nhint: running in the background; the result is delivered to you when it finishes. Use task_output(task_id) only if you need it sooner.",
            started.task_id
        ));
    }
    // Boxed, as in `task`: a record matched on across the promotion's await would sit
    // beside the wait in this future.
    let ended = runtime
        .wait(&started.task_id, parent, Some(Duration::from_secs(secs)))
        .await
        .map(Box::new);
    match ended {
        // This call's own foreground task, ended in time (so not promoted): created
        // delivered, nothing to write.
        Some(snap) if snap.status == TaskStatus::Completed => ToolOutput::ok(format!(
            "{head}status: ok\nreply: {}",
            snap.result.unwrap_or_default()
        )),
        Some(snap) => {
            let why = snap
                .error
                .unwrap_or_else(|| format!("the task ended {}", snap.status));
            let mut out = format!("{head}status: error\nerror: {why}");
            if let Some(partial) = snap.result {
                out.push_str(&format!("\npartial_reply: {partial}"));
            }
            ToolOutput::error(out)
        }
        None => {
            // Timed out: the same run keeps going in the background (no lost work, no rerun).
            runtime.promote(&started.task_id).await;
            ToolOutput::ok(format!(
                "{head}status: running\ntask_id: {}\nhint: no reply within {secs}s; the task keeps running in the background and its result will be delivered to you when it finishes.",
                started.task_id
            ))
        }
    }
}

/// `agent_spawn(agent_id, task?, label?, timeout_seconds?)`.
pub struct AgentSpawnTool {
    runtime: RuntimeRef,
    /// What the agent holding this tool passes down to its children.
    inherited: Arc<Inherited>,
}

delegating_constructors!(AgentSpawnTool);

/// The arguments of `agent_spawn`.
#[derive(Deserialize, JsonSchema)]
pub struct SpawnArgs {
    /// Which agent to create.
    agent_id: String,
    /// The first task; the only context the agent gets.
    #[serde(default)]
    task: Option<String>,
    /// A short name to address the agent by, unique in this session.
    #[serde(default)]
    label: Option<String>,
    #[serde(flatten)]
    wait: ReplyWait,
    /// Run the agent in its own git worktree on a new branch from your HEAD for its whole
    /// life; after each message its changes are committed on that branch (the reply names
    /// it), your files stay untouched. agent_close removes the worktree.
    #[serde(default)]
    isolation: Option<Isolation>,
    /// Put the agent in your team of this name (created on first use; you lead it): its
    /// members get the team tools, message each other and share a board.
    #[serde(default)]
    team: Option<String>,
}

impl TypedTool for AgentSpawnTool {
    const INFO: ToolInfo = ToolInfo::delegation("agent_spawn")
        .read_only()
        .prompts(PromptArgs {
            definition: &["agent_id"],
            address: &["label"],
            what: &["task"],
        });
    type Args = SpawnArgs;

    fn description(&self) -> Cow<'_, str> {
        format!(
            "Create a sub-agent that keeps its own conversation, optionally giving it a first \
             task. The reply starts with its agent_key (use it, or the label, with agent_send \
             for follow-ups). timeout_seconds: how long to wait for the reply (default \
             {DEFAULT_TIMEOUT_SECS}, max {MAX_TIMEOUT_SECS}); 0 runs the task in the background \
             and returns a task_id at once; a task that outlasts the wait keeps running in the \
             background. Background results are delivered to you automatically."
        )
        .into()
    }

    /// The agents there are to create, known only at run time.
    fn refine_schema(&self, schema: &mut serde_json::Value) {
        let runtime = self.runtime.upgrade();
        let ids: Vec<&str> = runtime.iter().flat_map(|r| r.registry().names()).collect();
        schema["properties"]["agent_id"]["enum"] = ids.into();
    }

    fn timeout_exempt(&self) -> bool {
        true
    }

    async fn run(&self, a: SpawnArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let runtime = self.runtime.get()?;
        let label = a.label.filter(|l| !l.trim().is_empty());
        let parent = Parent::of_call(ctx, &self.inherited);
        // The first task is created with the child: one write where two were.
        let team = a.team.filter(|t| !t.trim().is_empty()).or_else(|| {
            runtime
                .registry()
                .get(&a.agent_id)
                .and_then(|d| d.team.clone())
        });
        let request = LiveRequest {
            agent: a.agent_id,
            label,
            isolation: a.isolation,
            task: a.task.filter(|t| !t.trim().is_empty()),
            background: a.wait.seconds() == 0,
        };
        // Boxed: its ~2.8 KB is held while it creates the child, not by every call for as
        // long as it waits for the reply.
        match Box::pin(runtime.spawn_live_in_team(request, team.as_deref(), &parent)).await {
            Ok((child, None)) => Ok(ToolOutput::ok(format!(
                "{}status: accepted",
                header(&child)
            ))),
            // Boxed too: the wait for a reply is not laid out beside the start of every call.
            Ok((child, Some(started))) => {
                Ok(Box::pin(answer(&runtime, &child, &started, &a.wait, &parent)).await)
            }
            Err(e) => Ok(error(e)),
        }
    }
}

/// `agent_send(agent_key | label, message, timeout_seconds?)`.
pub struct AgentSendTool {
    runtime: RuntimeRef,
    /// What the agent holding this tool passes down to its children.
    inherited: Arc<Inherited>,
}

delegating_constructors!(AgentSendTool);

/// The arguments of `agent_send`.
#[derive(Deserialize, JsonSchema)]
pub struct SendArgs {
    #[serde(flatten)]
    address: AgentAddress,
    /// The message; the agent continues with its own history.
    message: String,
    #[serde(flatten)]
    wait: ReplyWait,
}

impl TypedTool for AgentSendTool {
    const INFO: ToolInfo = ToolInfo::delegation("agent_send")
        .read_only()
        .prompts(PromptArgs {
            definition: &[],
            address: &["label", "agent_key"],
            what: &["message"],
        });
    type Args = SendArgs;

    fn description(&self) -> Cow<'_, str> {
        "Send a follow-up message to a sub-agent created with agent_spawn; it continues with \
         its own history. Address it by its full agent_key or by its label (exactly one). \
         timeout_seconds works as for agent_spawn."
            .into()
    }

    fn timeout_exempt(&self) -> bool {
        true
    }

    async fn run(&self, a: SendArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let call = match addressed(&self.runtime, &self.inherited, ctx, a.address).await {
            Ok(call) => call,
            Err(answer) => return answer,
        };
        let (runtime, child, parent) = (&call.runtime, &call.child, &call.parent);
        Ok(deliver(runtime, child, a.message, &a.wait, parent).await)
    }
}

/// A call addressed to one live child: the runtime, the caller as a parent, the child.
struct Addressed {
    runtime: Arc<SubagentRuntime>,
    parent: Parent,
    child: Arc<LiveChild>,
}

/// The preamble of the tools that address a live child: the runtime, the calling parent and
/// the child `address` names; or the call's answer when there is none (the runtime is gone,
/// the address is missing, ambiguous or unknown).
async fn addressed(
    runtime: &RuntimeRef,
    inherited: &Arc<Inherited>,
    ctx: &ToolContext,
    address: AgentAddress,
) -> Result<Addressed, Result<ToolOutput, ToolError>> {
    let runtime = runtime.get().map_err(Err)?;
    let parent = Parent::of_call(ctx, inherited);
    let child = find_child(&runtime, &parent, address).await.map_err(Ok)?;
    Ok(Addressed {
        runtime,
        parent,
        child,
    })
}

/// The live child a call addresses by its full agent key or its label (exactly one), or the
/// error the model reads.
async fn find_child(
    runtime: &SubagentRuntime,
    parent: &Parent,
    AgentAddress { agent_key, label }: AgentAddress,
) -> Result<Arc<LiveChild>, ToolOutput> {
    let (key, label) = match (
        agent_key.filter(|k| !k.is_empty()),
        label.filter(|l| !l.is_empty()),
    ) {
        (Some(_), Some(_)) => return Err(error("give either agent_key or label, not both")),
        (None, None) => return Err(error("give agent_key or label")),
        pair => pair,
    };
    let found = runtime
        .find_live(parent, key.as_deref(), label.as_deref())
        .await;
    match (found, key, label) {
        (Err(e), _, _) => Err(error(e)),
        (Ok(Some(c)), _, _) => Ok(c),
        (Ok(None), Some(key), _) => Err(error(format!(
            "Unknown agent_key: {key} (use the full agent_key returned by agent_spawn)"
        ))),
        (Ok(None), None, label) => Err(error(format!(
            "Unknown label: {}",
            label.unwrap_or_default()
        ))),
    }
}

/// `agent_close(agent_key | label)`.
pub struct AgentCloseTool {
    runtime: RuntimeRef,
    /// What the agent holding this tool passes down (a child restored to be closed is
    /// rebuilt under it).
    inherited: Arc<Inherited>,
}

delegating_constructors!(AgentCloseTool);

impl TypedTool for AgentCloseTool {
    const INFO: ToolInfo = ToolInfo::delegation("agent_close")
        .read_only()
        .titled(&["label", "agent_key"]);
    type Args = AgentAddress;

    fn description(&self) -> Cow<'_, str> {
        "Close a sub-agent created with agent_spawn when you need it no more: a task it is \
         still running is cancelled, and it can no longer be addressed. One in a git worktree \
         has its worktree removed; its commits stay on its branch (a branch without commits is \
         deleted). Address it by its full agent_key or by its label (exactly one)."
            .into()
    }

    fn timeout_exempt(&self) -> bool {
        true
    }

    async fn run(&self, address: AgentAddress, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let call = match addressed(&self.runtime, &self.inherited, ctx, address).await {
            Ok(call) => call,
            Err(answer) => return answer,
        };
        let report = call
            .runtime
            .close_live(&ctx.run.session_id, &call.child)
            .await;
        let mut out = format!("{}status: closed", header(&call.child));
        if let Some(report) = report {
            out.push('\n');
            out.push_str(&report.render());
        }
        Ok(ToolOutput::ok(out))
    }
}

/// `agent_list()`.
pub struct AgentListTool {
    runtime: RuntimeRef,
}

impl AgentListTool {
    /// The tool over `runtime`.
    pub fn new(runtime: &Arc<SubagentRuntime>) -> Self {
        Self {
            runtime: RuntimeRef::new(runtime),
        }
    }
}

/// `agent_list` takes no arguments.
#[derive(Deserialize, JsonSchema)]
pub struct NoArgs {}

impl TypedTool for AgentListTool {
    const INFO: ToolInfo = ToolInfo::delegation("agent_list").read_only();
    type Args = NoArgs;

    fn description(&self) -> Cow<'_, str> {
        "List the sub-agents created with agent_spawn in this session: agent_key, agent_id, \
         label, depth and state."
            .into()
    }

    async fn run(&self, _args: NoArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let runtime = self.runtime.get()?;
        let children = runtime.live().list(&ctx.run.session_id);
        let mut out = format!("agents: {}", children.len());
        for c in children {
            let last = match c.last_task() {
                Some(id) => runtime.task_record(&id).await,
                None => None,
            };
            let state = match last {
                None => "idle".to_string(),
                Some(t) if t.status.is_terminal() => format!("idle (last task {})", t.status),
                Some(t) => format!("{} (task {})", t.status, t.id),
            };
            out.push_str(&format!(
                "\n\nagent_key: {}\nagent_id: {}\nlabel: {}\ndepth: {}\nstate: {state}\nsession_id: {}",
                c.key,
                c.agent_id,
                c.label.as_deref().unwrap_or("-"),
                c.child.depth,
                c.child.session_id
            ));
            if let Some(w) = &c.child.worktree {
                out.push_str(&format!("\nworktree_branch: {}", w.branch()));
            }
        }
        Ok(ToolOutput::ok(out))
    }
}
