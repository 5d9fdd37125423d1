//! The runtime's contribution to a parent run: the sub-agents section of the system prompt
//! (usage rules and the available agents, built once: the registry of a runtime does not
//! change), a short status of the session's background tasks appended before a model call
//! when it changed since the last one the conversation holds, exactly-once delivery of
//! finished background tasks, and holding a finished run open while its background tasks
//! still run. Nothing earlier in the conversation is ever rewritten, so the requests of a
//! session only grow at the end and providers' prompt caches keep hitting.

use crate::definitions::registry::AgentRegistry;
use crate::runtime::results::ShownResult;
use crate::runtime::{SubagentRuntime, ToolSurface};
use crate::tools::deliveries::{Deliveries, RESULTS_TAG, results_since_last_reply};
use crate::tools::task::{completeness_attrs, xml_escape};
use async_trait::async_trait;
use cadre_engine::TurnExtension;
use cadre_store::{BackgroundSummary, TaskRecord};
use cadre_tools::RunContext;
use cadre_types::{Message, TaskStatus};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// After this many rounds a held-open parent waits for all its background tasks at once.
pub const WAIT_ALL_AFTER_ROUNDS: u32 = 8;
/// How long the first round waits after a completion for others to arrive, so they share a
/// turn. Each later round waits twice as long (up to [`MAX_GATHER_WINDOW`]): every turn
/// re-sends the whole conversation, so a long stream of completions is delivered in a few
/// growing batches rather than many small ones. A round ends early when nothing is left
/// running, so the last results are never held back.
pub const GATHER_WINDOW: Duration = Duration::from_millis(100);
/// The longest gather window.
pub const MAX_GATHER_WINDOW: Duration = Duration::from_secs(10);

/// The gather window of held-open round `round` (0-based).
pub fn gather_window(round: u32) -> Duration {
    GATHER_WINDOW
        .saturating_mul(1u32 << round.min(16))
        .min(MAX_GATHER_WINDOW)
}

/// How often a parent held open for background tasks that run elsewhere looks at them.
pub const ELSEWHERE_POLL: Duration = Duration::from_secs(1);

/// Lines of open background tasks listed in the status before "N more".
pub const MAX_TASK_LINES: usize = 10;
/// Characters of a task's description shown in the status.
const MAX_DESCRIPTION_CHARS: usize = 120;
/// The opening tag of the status message (how the conversation's last status is found).
pub const STATUS_TAG: &str = "<background-tasks>";

/// The sub-agent turn extension of a parent agent.
pub struct SubagentContext {
    runtime: Arc<SubagentRuntime>,
    /// The system-prompt section, built once from the runtime's (fixed) registry.
    section: String,
    /// Results handed out and not yet marked delivered.
    deliveries: Deliveries,
    /// Team messages to this session as a lead, handed out and not yet marked delivered.
    lead_inbox: Deliveries,
}

impl SubagentContext {
    /// The extension over `runtime`.
    pub fn new(runtime: Arc<SubagentRuntime>) -> Self {
        let section = section(runtime.registry(), runtime.config().surface);
        Self {
            runtime,
            section,
            deliveries: Deliveries::default(),
            lead_inbox: Deliveries::default(),
        }
    }
}

fn task_line(t: &TaskRecord) -> String {
    let description: String = t
        .description
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(MAX_DESCRIPTION_CHARS)
        .collect();
    // No pending/running: both mean "open, its result will be delivered", and a status
    // that changed only there would be appended (and re-sent with every later request) for
    // nothing the model can act on; task_list shows it.
    format!(
        "- {} {}: {}",
        t.id,
        xml_escape(&t.agent_id),
        xml_escape(&description)
    )
}

/// The status message of a session's background tasks (pure), or `None` when it has none
/// or it would repeat `history`'s last status: the counts, then the newest open tasks (at
/// most [`MAX_TASK_LINES`], then "N more"). When the model has seen every open task already
/// — listed by the last status that listed tasks, or named in a tool result, as the `task`
/// call that started it answers — only finished tasks can have changed, and their results
/// are delivered beside the status: the counts alone say what changed, and nothing at all
/// while none finished (the model just started them).
pub fn status_message(status: &BackgroundSummary, history: &[Message]) -> Option<String> {
    if status.open_total == 0 && status.finished_total == 0 {
        return None;
    }
    let lines: Vec<String> = status.open.iter().map(task_line).collect();
    let listed = statuses(history)
        .map(|s| {
            s.lines()
                .filter(|l| l.starts_with("- "))
                .collect::<Vec<_>>()
        })
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let in_tool_result = |id: &str| {
        history.iter().any(|m| match m {
            Message::Tool { content, .. } => content.contains(id),
            _ => false,
        })
    };
    let known = status.open_total == lines.len()
        && status
            .open
            .iter()
            .zip(&lines)
            .all(|(t, l)| listed.contains(&l.as_str()) || in_tool_result(&t.id));
    let head = format!("{STATUS_TAG}\nBackground tasks: ");
    let mut full = format!(
        "{head}{} open, {} finished.",
        status.open_total, status.finished_total
    );
    if !lines.is_empty() {
        full.push_str(" Open, newest first:");
        for line in &lines {
            full.push('\n');
            full.push_str(line);
        }
        if status.open_total > lines.len() {
            full.push_str(&format!("\n… {} more", status.open_total - lines.len()));
        }
    }
    full.push_str("\n</background-tasks>");
    let last = statuses(history).next();
    if last == Some(full.as_str()) {
        return None;
    }
    if known && !lines.is_empty() {
        if last.is_none() && status.finished_total == 0 {
            return None;
        }
        let counts = format!(
            "{head}{} open (as seen before), {} finished.\n</background-tasks>",
            status.open_total, status.finished_total
        );
        return (last != Some(counts.as_str())).then_some(counts);
    }
    Some(full)
}

/// The status messages in `history`, newest first.
fn statuses(history: &[Message]) -> impl Iterator<Item = &str> {
    history.iter().rev().filter_map(|m| match m {
        Message::User { content } if content.starts_with(STATUS_TAG) => Some(content.as_str()),
        _ => None,
    })
}

/// The sub-agents section of the system prompt (pure): how to use sub-agents and the
/// available agents. It depends on the registry and the surface only, so it is the same on
/// every turn. The agents are listed once per request: in the `task` tool's description when
/// the model has that tool (the tool must describe itself to MCP clients, which see no
/// system prompt), else here.
pub fn section(registry: &AgentRegistry, surface: ToolSurface) -> String {
    let mut s = String::from(
        "# Sub-agents\n\
         You can delegate self-contained jobs to sub-agents. Each starts with a fresh context and \
         sees only the brief you write, so make it complete.\n\
         - Prefer background runs for independent work that can go on in parallel; start several at once.\n\
         - Results of background tasks are delivered to you automatically when they finish; do not poll in a loop.\n\
         - The status of your background tasks is appended to the conversation as a \
         <background-tasks> message whenever it changes; an earlier status may be stale.\n\n",
    );
    if surface == ToolSurface::Lifecycle {
        s.push_str("Available agents (the agent_id of agent_spawn):\n");
        s.push_str(&registry.catalogue());
    } else {
        s.push_str("The available agents are listed in the description of the task tool.");
    }
    s.trim_end().to_string()
}

/// The message that delivers finished background tasks to the parent, each with its
/// result as shown to the parent.
pub fn delivery_message(tasks: &[(TaskRecord, ShownResult)]) -> Message {
    use std::fmt::Write as _;
    let mut s = format!("{RESULTS_TAG}\n");
    for (t, shown) in tasks {
        let state = match t.status {
            TaskStatus::Completed => "completed",
            TaskStatus::Cancelled => "cancelled",
            _ => "failed",
        };
        // Writing to a String cannot fail.
        let _ = write!(
            s,
            "<task id=\"{}\" agent=\"{}\" state=\"{state}\"{}>",
            t.id,
            xml_escape(&t.agent_id),
            completeness_attrs(t)
        );
        if let Some(e) = &t.error {
            let _ = write!(s, "<error>{}</error>", xml_escape(e));
        }
        s.push_str(&shown.envelope());
        s.push_str("</task>\n");
    }
    s.push_str("</background-task-results>");
    // The message stays in the conversation for the session's life; the room the string
    // grew into (up to as much again, for a batch of thousands) would stay with it.
    s.shrink_to_fit();
    Message::user(s)
}

#[async_trait]
impl TurnExtension for SubagentContext {
    fn system_section(&self, _run: &RunContext) -> Option<String> {
        Some(self.section.clone())
    }

    async fn run_starts(&self, run: &RunContext, cancel: &CancellationToken) {
        self.runtime.run_starts(run, cancel).await;
    }

    async fn take_injections(&self, run: &RunContext, history: &[Message]) -> Vec<Message> {
        let store = self.runtime.store();
        // Read, not claimed: they are marked delivered once the session holds them.
        let undelivered = store
            .undelivered_finished(&run.session_id)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "store: collecting finished tasks failed");
                Vec::new()
            });
        let seen = results_since_last_reply(history);
        let split = self
            .deliveries
            .split(&run.session_id, &seen, undelivered, |t| t.id.clone());
        if !split.recorded.is_empty() {
            self.mark(&run.session_id, split.recorded).await;
        }
        let done = split.deliver;
        // The status first, then the results it counts as finished.
        let mut out = Vec::new();
        match store
            .background_summary(&run.session_id, MAX_TASK_LINES)
            .await
        {
            Ok(status) => {
                if let Some(text) = status_message(&status, history) {
                    out.push(Message::user(text));
                }
            }
            Err(e) => tracing::warn!(error = %e, "store: reading the task status failed"),
        }
        if !done.is_empty() {
            let shown: Vec<_> = done
                .into_iter()
                .map(|t| {
                    let r = self.runtime.shown_result(&t);
                    (t, r)
                })
                .collect();
            out.push(delivery_message(&shown));
        }
        // Last: what the team's members wrote to this session as their lead.
        if let Some(m) = crate::runtime::teams::lead_messages(
            store.as_ref(),
            self.runtime.led_teams(),
            &run.session_id,
            history,
            &self.lead_inbox,
        )
        .await
        {
            out.push(m);
        }
        out
    }

    async fn recorded(&self, run: &RunContext) {
        crate::runtime::teams::lead_recorded(
            self.runtime.store().as_ref(),
            self.runtime.led_teams(),
            &run.session_id,
            &self.lead_inbox,
        )
        .await;
        let ids = self.deliveries.recorded(&run.session_id);
        if ids.is_empty() {
            return;
        }
        run.events.emit(cadre_types::EventEnvelope {
            session_id: run.session_id.clone(),
            agent: run.agent.clone(),
            task_id: run.task_id.clone(),
            event: cadre_types::Event::ResultsDelivered {
                task_ids: ids.clone(),
            },
        });
        self.mark(&run.session_id, ids).await;
    }

    async fn settle_call(
        &self,
        run: &RunContext,
        call: &cadre_types::ToolCall,
        cancel: &CancellationToken,
    ) -> Option<cadre_engine::Settled> {
        use cadre_tools::TypedTool;
        if let Some(out) =
            crate::tools::task::settle_interrupted(&self.runtime, run, &call.id, cancel).await
        {
            return Some(cadre_engine::Settled::Known(out));
        }
        // Read-only for the permission policy, yet they act on a live child: run again,
        // they would spawn a second child or send the message twice.
        let acts = [
            crate::tools::agents::AgentSpawnTool::INFO.name,
            crate::tools::agents::AgentSendTool::INFO.name,
        ];
        acts.contains(&call.name.as_str())
            .then_some(cadre_engine::Settled::OutcomeUnknown)
    }

    async fn wait_outstanding(
        &self,
        run: &RunContext,
        cancel: &CancellationToken,
        round: u32,
    ) -> bool {
        if !self.runtime.holds_for_background(run.depth) {
            return false;
        }
        let session = run.session_id.as_str();
        let local = self.runtime.local();
        let undelivered = || async {
            self.runtime
                .store()
                .background_summary(session, 0)
                .await
                .map(|s| s.undelivered)
                .unwrap_or(0)
        };
        let mut ready = undelivered().await;
        loop {
            // Register for the wake-up before looking, so no completion slips between. A
            // wake-up means a task ended, so a long tail of completions costs no store reads.
            let Some(wake) = local.session_wake(session) else {
                match self.wait_elsewhere(run, cancel, ready > 0).await {
                    Some(deliver) => return deliver,
                    None => continue,
                }
            };
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let Some(running) = local.open_background(session, &wake) else {
                continue;
            };
            if running == 0 {
                match self.wait_elsewhere(run, cancel, ready > 0).await {
                    Some(deliver) => return deliver,
                    None => continue,
                }
            }
            if ready > 0 && round < WAIT_ALL_AFTER_ROUNDS {
                // Let a burst of completions land in the same turn, but stop gathering as
                // soon as nothing is left running.
                let deadline = tokio::time::Instant::now() + gather_window(round);
                loop {
                    let Some(wake) = local.session_wake(session) else {
                        return true;
                    };
                    let notified = wake.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    match local.open_background(session, &wake) {
                        Some(0) => return true,
                        None => continue,
                        Some(_) => {}
                    }
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(deadline) => return true,
                        _ = cancel.cancelled() => return false,
                    }
                }
            }
            tokio::select! {
                _ = &mut notified => ready = 1,
                _ = cancel.cancelled() => return false,
            }
        }
    }
}

impl SubagentContext {
    /// Mark results the session of `session` holds delivered; a failed mark is tried again
    /// at the next delivery (they are not shown again meanwhile).
    async fn mark(&self, session: &str, ids: Vec<String>) {
        let result = self.runtime.store().mark_delivered_many(&ids).await;
        self.deliveries.marking(session, ids, result);
    }

    /// With nothing of `run`'s session running here: wait while its background tasks run
    /// elsewhere (another node or process; e.g. after `cadre run --resume`), looking through
    /// the store every [`ELSEWHERE_POLL`]. Lost ones of policy `resume` are adopted on the
    /// way (`None`: they run here now, so wait for them here). `Some(true)` when there is
    /// something to deliver, `Some(false)` when nothing is left to wait for or on cancel.
    async fn wait_elsewhere(
        &self,
        run: &RunContext,
        cancel: &CancellationToken,
        ready: bool,
    ) -> Option<bool> {
        let mut announced = false;
        let mut failing_since: Option<tokio::time::Instant> = None;
        loop {
            match self.runtime.look_elsewhere(run, cancel).await {
                Ok(seen) => {
                    failing_since = None;
                    if seen.adopted > 0 {
                        return None;
                    }
                    if ready || seen.undelivered > 0 {
                        return Some(true);
                    }
                    if seen.running == 0 {
                        if seen.stranded > 0 {
                            tracing::warn!(
                                session = %run.session_id,
                                stranded = seen.stranded,
                                "not waiting for background tasks whose owner is lost and that nothing here can take up"
                            );
                        }
                        return Some(false);
                    }
                    if !announced {
                        announced = true;
                        tracing::info!(
                            session = %run.session_id,
                            running = seen.running,
                            stranded = seen.stranded,
                            "waiting for background tasks that run elsewhere"
                        );
                    }
                }
                Err(e) => {
                    // A database restart is waited out, as the writes are; a store that
                    // stays down ends the wait.
                    let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
                    if !e.is_transient()
                        || since.elapsed() >= self.runtime.config().store_write_retry
                    {
                        tracing::warn!(error = %e, "store: reading the session's background tasks failed");
                        return Some(ready);
                    }
                    tracing::debug!(error = %e, "store: reading the session's background tasks failed; trying again");
                }
            }
            tokio::select! {
                () = tokio::time::sleep(cadre_store::jittered(ELSEWHERE_POLL)) => {}
                () = cancel.cancelled() => return Some(false),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gather_window_doubles_per_round_up_to_its_cap() {
        assert_eq!(gather_window(0), Duration::from_millis(100));
        assert_eq!(gather_window(1), Duration::from_millis(200));
        assert_eq!(gather_window(3), Duration::from_millis(800));
        assert_eq!(gather_window(7), Duration::from_secs(10));
        assert_eq!(gather_window(u32::MAX), MAX_GATHER_WINDOW);
    }

    #[test]
    fn a_delivery_keeps_no_spare_room_in_the_conversation() {
        let tasks: Vec<_> = (0..300)
            .map(|i| {
                let mut t = cadre_store::NewTask::new("worker", "s1", "go")
                    .into_record("node", "instance", 0);
                t.status = TaskStatus::Completed;
                let shown = ShownResult {
                    text: format!("result {i}"),
                    file: None,
                };
                (t, shown)
            })
            .collect();
        let Message::User { content } = delivery_message(&tasks) else {
            panic!("a delivery is a user message");
        };
        assert_eq!(content.matches("state=\"completed\"").count(), 300);
        assert_eq!(content.capacity(), content.len());
    }
}
