//! Turns a child's events into sub-agent updates in the parent's event stream and previews
//! of them in the task's small progress log. Approval requests and plans pass through unchanged,
//! so the parent's UI sees which sub-agent asks or plans. A durable child whose task another
//! node took over ends here with a notice saying so, not with an end of the task.

use crate::runtime::lease::OwnerLease;
use crate::runtime::tracker::LocalTasks;
use cadre_types::{EndState, Event, EventEnvelope, EventSink, SubagentUpdate, UpdateKind};
use std::sync::{Arc, OnceLock};

/// The event sink given to a child run.
pub(crate) struct ForwardSink {
    pub parent: Arc<dyn EventSink>,
    /// The parent run's budget node, whose running total a child's usage is reported with.
    pub parent_budget: cadre_tools::Budget,
    pub parent_session_id: String,
    pub parent_agent: String,
    pub parent_task_id: Option<String>,
    pub agent: String,
    pub task_id: String,
    pub local: LocalTasks,
    /// Background tasks log their progress; foreground ones only forward it.
    pub log: bool,
    /// The lease of a durable child's task, once its run holds one.
    pub lease: OnceLock<Arc<OwnerLease>>,
}

impl ForwardSink {
    /// The run holds its task under `lease`: once the lease is lost (another node adopted
    /// the task), the run's end here is not the task's end and is not forwarded as one.
    pub(crate) fn leased(&self, lease: Arc<OwnerLease>) {
        let _ = self.lease.set(lease);
    }

    fn handed_over(&self) -> bool {
        self.lease.get().is_some_and(|l| l.is_lost())
    }

    pub(crate) fn update(
        &self,
        session_id: &str,
        kind: UpdateKind,
        text: String,
        tool: Option<String>,
        usage: Option<cadre_types::Usage>,
    ) {
        self.send(session_id, kind, text, tool, usage, None);
    }

    /// The child's end: its kind follows from the state, which the update carries too.
    pub(crate) fn ended(
        &self,
        session_id: &str,
        end: &EndState,
        text: String,
        usage: cadre_types::Usage,
    ) {
        let kind = match end {
            EndState::Completed => UpdateKind::Done,
            EndState::Cancelled => UpdateKind::Cancelled,
            EndState::Failed { .. } | EndState::LimitReached { .. } => UpdateKind::Error,
        };
        self.send(session_id, kind, text, None, Some(usage), Some(end.clone()));
    }

    fn send(
        &self,
        session_id: &str,
        kind: UpdateKind,
        text: String,
        tool: Option<String>,
        usage: Option<cadre_types::Usage>,
        end: Option<EndState>,
    ) {
        if self.log {
            self.local.log(&self.task_id, kind, tool.as_deref(), &text);
        }
        let update = SubagentUpdate {
            agent: self.agent.clone(),
            task_id: Some(self.task_id.clone()),
            session_id: session_id.to_string(),
            kind,
            text,
            tool,
            usage,
            end,
        };
        self.to_parent(Event::SubagentUpdate { update });
    }

    fn to_parent(&self, event: Event) {
        self.parent.emit(EventEnvelope {
            session_id: self.parent_session_id.clone(),
            agent: self.parent_agent.clone(),
            task_id: self.parent_task_id.clone(),
            event,
        });
    }
}

impl EventSink for ForwardSink {
    fn emit(&self, env: EventEnvelope) {
        let sid = env.session_id.as_str();
        match env.event {
            Event::TextDelta { text } => self.update(sid, UpdateKind::Delta, text, None, None),
            Event::ThinkingDelta { text } => {
                self.update(sid, UpdateKind::Thinking, text, None, None)
            }
            Event::ToolStart { tool, args, .. } => {
                self.update(sid, UpdateKind::ToolStart, args, Some(tool), None)
            }
            Event::ToolResult {
                tool,
                output,
                is_error,
                ..
            } => {
                let text = if is_error {
                    format!("error: {output}")
                } else {
                    output
                };
                self.update(sid, UpdateKind::ToolResult, text, Some(tool), None)
            }
            // The task is another node's now: the run stopped here because of that, and
            // the task's end will be that node's. Whoever watches hears that it moved.
            Event::Done { .. } if self.handed_over() => self.to_parent(Event::Notice {
                message: format!(
                    "[{}] task {} was taken over by another node: its run here stopped, and \
                     its end will come from that node",
                    self.agent, self.task_id
                ),
            }),
            Event::Done {
                state,
                output,
                usage,
                ..
            } => {
                let text = match &state {
                    EndState::Completed => output,
                    EndState::Cancelled => "cancelled".to_string(),
                    EndState::Failed { error } => error.clone(),
                    EndState::LimitReached { limit } => format!("limit reached ({limit})"),
                };
                self.ended(sid, &state, text, usage);
            }
            // A grandchild's progress, any approval request and the child's own plan travel
            // up unchanged: their envelope names the agent they belong to.
            ev @ (Event::SubagentUpdate { .. }
            | Event::ApprovalRequired { .. }
            | Event::Todo { .. }) => self.parent.emit(EventEnvelope { event: ev, ..env }),
            Event::Notice { message } => self.to_parent(Event::Notice {
                message: format!("[{}] {message}", self.agent),
            }),
            // A model call of the child (or of one under it) is one the parent's run made
            // on its behalf: the parent's stream reports it with the parent's total.
            Event::Usage {
                usage,
                subagent,
                total,
            } => {
                // The child's own running total, so its task shows live tokens before it ends.
                if subagent.is_none() {
                    self.local.record_usage(&self.task_id, total);
                }
                self.to_parent(Event::Usage {
                    usage,
                    total: self.parent_budget.spent().usage,
                    subagent: Some(subagent.unwrap_or_else(|| self.agent.clone())),
                })
            }
            Event::Compaction {
                replaced_messages,
                tokens_before,
                tokens_after,
                model,
            } => self.update(
                sid,
                UpdateKind::Compaction,
                format!(
                    "{replaced_messages} messages summarised by {model}: about {tokens_before} → {tokens_after} tokens"
                ),
                None,
                None,
            ),
            Event::RunStarted { .. }
            | Event::TurnStarted { .. }
            | Event::ResultsDelivered { .. }
            | Event::Error { .. } => {}
        }
    }
}
