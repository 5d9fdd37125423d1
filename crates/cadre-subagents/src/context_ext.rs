//! The runtime's per-turn contribution to a parent run: a rebuilt sub-agents section of the
//! system prompt, exactly-once delivery of finished background tasks before the next model
//! call, and holding a finished run open while its background tasks still run.

use crate::persist::snapshot_of;
use crate::runtime::SubagentRuntime;
use crate::task_tool::xml_escape;
use crate::tracker::{TaskSnapshot, TaskStatus};
use async_trait::async_trait;
use cadre_engine::TurnExtension;
use cadre_tools::RunContext;
use cadre_types::Message;
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

/// Lines of background tasks listed in the prompt before "N more".
pub const MAX_TASK_LINES: usize = 10;

/// The sub-agent turn extension of a parent agent.
pub struct SubagentContext {
    runtime: Arc<SubagentRuntime>,
}

impl SubagentContext {
    /// The extension over `runtime`.
    pub fn new(runtime: Arc<SubagentRuntime>) -> Self {
        Self { runtime }
    }
}

fn task_line(t: &TaskSnapshot) -> String {
    format!("- {} [{}] {}: {}", t.id, t.status, t.agent, t.description)
}

/// The sub-agents section for a parent session (pure; rebuilt every turn).
pub fn section(runtime: &SubagentRuntime, session: &str) -> String {
    let mut s = String::from(
        "# Sub-agents\n\
         You can delegate self-contained jobs to sub-agents. Each starts with a fresh context and \
         sees only the brief you write, so make it complete.\n\
         - Prefer background runs for independent work that can go on in parallel; start several at once.\n\
         - Results of background tasks are delivered to you automatically when they finish; do not poll in a loop.\n\
         - The status shown below and in earlier messages may be stale; a task may have finished since.\n\n\
         Available agents:\n",
    );
    for d in runtime.registry().list() {
        s.push_str(&format!("- {}: {}\n", d.name, d.description.trim()));
    }
    let (recent, total) = runtime.tracker().recent_background(session, MAX_TASK_LINES);
    if !recent.is_empty() {
        s.push_str("\nBackground tasks of this session (newest first):\n");
        for t in &recent {
            s.push_str(&task_line(t));
            s.push('\n');
        }
        if total > recent.len() {
            s.push_str(&format!("… {} more\n", total - recent.len()));
        }
    }
    s.trim_end().to_string()
}

/// The message that delivers finished background tasks to the parent.
pub fn delivery_message(tasks: &[TaskSnapshot]) -> Message {
    let mut s = String::from("<background-task-results>\n");
    for t in tasks {
        let state = match t.status {
            TaskStatus::Completed => "completed",
            TaskStatus::Cancelled => "cancelled",
            _ => "failed",
        };
        s.push_str(&format!(
            "<task id=\"{}\" agent=\"{}\" state=\"{state}\">",
            t.id,
            xml_escape(&t.agent)
        ));
        if let Some(e) = &t.error {
            s.push_str(&format!("<error>{}</error>", xml_escape(e)));
        }
        s.push_str(&format!(
            "<task_result>{}</task_result></task>\n",
            xml_escape(t.result.as_deref().unwrap_or(""))
        ));
    }
    s.push_str("</background-task-results>");
    Message::user(s)
}

#[async_trait]
impl TurnExtension for SubagentContext {
    fn system_section(&self, run: &RunContext) -> Option<String> {
        Some(section(&self.runtime, &run.session_id))
    }

    fn usage_rollup(&self, run: &RunContext) -> cadre_types::Usage {
        self.runtime.usage_of(&run.session_id)
    }

    async fn take_injections(&self, run: &RunContext) -> Vec<Message> {
        let mut done = self.runtime.tracker().take_finished(&run.session_id);
        if let Some(store) = self.runtime.store() {
            // Record this process's deliveries, then collect what finished elsewhere or
            // before a restart: the store hands each completion out once.
            if !done.is_empty() {
                let ids: Vec<String> = done.iter().map(|t| t.id.clone()).collect();
                if let Err(e) = store.mark_delivered_many(&ids).await {
                    tracing::warn!(tasks = ids.len(), error = %e, "store: mark delivered failed");
                }
            }
            match store.take_undelivered_finished(&run.session_id).await {
                Ok(records) => {
                    for r in records {
                        if !done.iter().any(|t| t.id == r.id) {
                            // The store can hand out a task of this process between its
                            // durable end and its local one: mark it here too, or the
                            // tracker would deliver it again.
                            self.runtime.tracker().mark_delivered(&r.id);
                            done.push(snapshot_of(&r));
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "store: collecting finished tasks failed"),
            }
        }
        if done.is_empty() {
            Vec::new()
        } else {
            vec![delivery_message(&done)]
        }
    }

    async fn wait_outstanding(
        &self,
        run: &RunContext,
        cancel: &CancellationToken,
        round: u32,
    ) -> bool {
        if self.runtime.is_detached() {
            return false;
        }
        let tracker = self.runtime.tracker();
        let signal = tracker.session_signal(&run.session_id);
        // The counts come from the tracker's counter and queue of ended tasks; after this a
        // wake-up means a task ended, so a long tail of completions costs no rescans.
        let (_, mut ready) = tracker.pending_counts(&run.session_id);
        loop {
            // Register for the wake-up before looking, so no completion slips between.
            let notified = signal.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let running = tracker.open_background(&run.session_id);
            if running == 0 {
                return ready > 0 || tracker.pending_counts(&run.session_id).1 > 0;
            }
            if ready > 0 && round < WAIT_ALL_AFTER_ROUNDS {
                // Let a burst of completions land in the same turn, but stop gathering as
                // soon as nothing is left running.
                let deadline = tokio::time::Instant::now() + gather_window(round);
                loop {
                    let notified = signal.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    if tracker.open_background(&run.session_id) == 0 {
                        return true;
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
}
